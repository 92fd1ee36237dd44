// RFC 3986 percent-decoding, the one decoder of the tree: blkctl's backend URIs and the agent's
// NBD URIs both read names and paths through it, so both accept and refuse the same text.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace blk {

// Replaces every "%XY" (two hex digits, either case) by the byte 0xXY; every other character,
// '+' included, stays as it is. Refuses, with INVALID_ARGUMENT naming the text: a '%' not followed
// by two hex digits ("%", "%4", "%zz"; write "%25" for a '%'), and a NUL in the result ("%00",
// or a NUL in the text itself), since names and paths go on as C strings, where a NUL would cut
// them short.
absl::StatusOr<std::string> PercentDecode(absl::string_view text);

}  // namespace blk
