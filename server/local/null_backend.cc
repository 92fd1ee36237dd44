#include "server/local/null_backend.h"

#include <cerrno>
#include <cstring>

#include "server/ublk/abi.h"

namespace blk::server {

int32_t NullBackend::Submit(uint16_t /*tag*/, const BlockIo& io) {
  switch (io.op) {
    case abi::kIoOpRead:
      std::memset(io.buffer, 0, io.length);
      return static_cast<int32_t>(io.length);
    case abi::kIoOpWrite:
    case abi::kIoOpDiscard:
    case abi::kIoOpWriteZeroes:
      if (read_only_) return -EROFS;
      return static_cast<int32_t>(io.length);
    case abi::kIoOpFlush:
      return 0;
    default:
      return -EOPNOTSUPP;
  }
}

}  // namespace blk::server
