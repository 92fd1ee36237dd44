// libFuzzer target: byte counts as an operator types them (cli/size_parse), the parser behind
// blkctl's --size and the nvme:// URI's ?offset=. An accepted size is exact: its decimal form
// parses to the same value, the spelling of its suffix does not matter, and every exact
// FormatSize output parses back to the number it printed.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "client/size_parse.h"

namespace {

void CheckFormatRoundTrip(uint64_t bytes) {
  const std::string text = blk::client::FormatSize(bytes);
  absl::StatusOr<uint64_t> again = blk::client::ParseSize(text);
  // FormatSize rounds down to one decimal when inexact; ParseSize refuses fractions.
  if (text.find('.') != std::string::npos) {
    if (again.ok()) abort();
    return;
  }
  if (!again.ok() || *again != bytes) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size >= 8) {
    uint64_t bytes = 0;
    std::memcpy(&bytes, data, 8);
    CheckFormatRoundTrip(bytes);
  }
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<uint64_t> parsed = blk::client::ParseSize(text);
  if (!parsed.ok()) {
    if (parsed.status().message().empty()) abort();
    return 0;
  }
  absl::StatusOr<uint64_t> plain = blk::client::ParseSize(absl::StrCat(*parsed));
  if (!plain.ok() || *plain != *parsed) abort();
  absl::StatusOr<uint64_t> upper = blk::client::ParseSize(absl::AsciiStrToUpper(text));
  absl::StatusOr<uint64_t> lower = blk::client::ParseSize(absl::AsciiStrToLower(text));
  if (!upper.ok() || !lower.ok() || *upper != *parsed || *lower != *parsed) abort();
  // Only digits and a suffix are accepted: the number comes first and is all digits.
  if (!absl::ascii_isdigit(static_cast<unsigned char>(text[0]))) abort();
  CheckFormatRoundTrip(*parsed);
  return 0;
}
