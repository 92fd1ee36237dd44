#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace blk {

// The whole of a (small) file; NOT_FOUND when it does not exist, the errno's status otherwise,
// its message "PATH: <errno text>".
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

}  // namespace blk
