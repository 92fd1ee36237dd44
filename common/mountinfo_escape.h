#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace blk {

// A path field of /proc/*/mountinfo with its octal escapes decoded: the kernel writes space, tab,
// newline and backslash as \ooo (proc(5)).
std::string UnescapeMountInfoField(absl::string_view field);

}  // namespace blk
