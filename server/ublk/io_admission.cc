#include "server/ublk/io_admission.h"

#include <cerrno>

#include "server/ublk/abi.h"

namespace blk::server {

int32_t AdmitIo(uint8_t op, bool read_only, const StorageTraits& traits) {
  switch (op) {
    case abi::kIoOpRead:
    case abi::kIoOpFlush:
      return 0;
    case abi::kIoOpWrite:
      return read_only ? -EROFS : 0;
    case abi::kIoOpDiscard:
      if (read_only) return -EROFS;
      return traits.discard ? 0 : -EOPNOTSUPP;
    case abi::kIoOpWriteZeroes:
      if (read_only) return -EROFS;
      return traits.write_zeroes ? 0 : -EOPNOTSUPP;
    default:
      return -EOPNOTSUPP;
  }
}

}  // namespace blk::server
