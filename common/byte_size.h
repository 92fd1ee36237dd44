#pragma once

#include <cstdint>

#include "absl/status/statusor.h"

namespace blk {

// The size in bytes of an open regular file (st_size) or block device (BLKGETSIZE64).
absl::StatusOr<uint64_t> ByteSize(int fd);

}  // namespace blk
