#pragma once

#include <string>
#include <variant>

namespace blk::server {

// Reads return zeroes, everything else succeeds at once.
struct NullBackendConfig {};
// A regular file (created sparse at the device size when missing) or a block device.
struct FileBackendConfig {
  std::string path;
};
using BackendConfig = std::variant<NullBackendConfig, FileBackendConfig>;

}  // namespace blk::server
