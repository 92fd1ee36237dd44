#include "common/percent_decode.h"

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace blk {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

absl::StatusOr<std::string> PercentDecode(absl::string_view text) {
  if (text.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", absl::CHexEscape(text), "' contains a NUL byte"));
  }
  std::string decoded;
  decoded.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      decoded.push_back(text[i]);
      continue;
    }
    const absl::string_view escape = text.substr(i, 3);
    const int high = escape.size() == 3 ? HexValue(escape[1]) : -1;
    const int low = escape.size() == 3 ? HexValue(escape[2]) : -1;
    if (high < 0 || low < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad escape '", escape, "' in '", text,
                       "': '%' must be followed by two hex digits (write %25 for '%')"));
    }
    if (high == 0 && low == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", text, "' contains %00: a name or path cannot hold a NUL byte"));
    }
    decoded.push_back(static_cast<char>(high * 16 + low));
    i += 2;
  }
  return decoded;
}

}  // namespace blk
