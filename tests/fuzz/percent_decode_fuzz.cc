// libFuzzer target: the one percent-decoder (uri/percent_decode) behind every URI name and path.
// Accepted text decodes to bytes without a NUL, never longer than the text; text without '%'
// decodes to itself; and the decoded bytes, escaped again (each byte as %XY, in either case),
// decode back to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/str_format.h"
#include "common/percent_decode.h"

namespace {

std::string EscapeAll(const std::string& bytes, bool upper) {
  std::string text;
  for (unsigned char c : bytes) {
    text += upper ? absl::StrFormat("%%%02X", c) : absl::StrFormat("%%%02x", c);
  }
  return text;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::string> decoded = blk::PercentDecode(text);
  const bool has_nul = text.find('\0') != std::string::npos;
  if (!decoded.ok()) {
    if (decoded.status().code() != absl::StatusCode::kInvalidArgument) abort();
    // Only a NUL or a '%' can make text unreadable.
    if (!has_nul && text.find('%') == std::string::npos) abort();
    return 0;
  }
  if (has_nul || decoded->find('\0') != std::string::npos) abort();
  if (decoded->size() > text.size()) abort();
  if (text.find('%') == std::string::npos && *decoded != text) abort();
  for (bool upper : {false, true}) {
    absl::StatusOr<std::string> again = blk::PercentDecode(EscapeAll(*decoded, upper));
    if (!again.ok() || *again != *decoded) abort();
  }
  return 0;
}
