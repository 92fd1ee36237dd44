#include "server/local/null_backend.h"

#include <cstring>

#include "server/ublk/abi.h"

namespace blk::server {

void NullBackend::Submit(uint16_t tag, const BlockIo& io) {
  switch (io.op) {
    case abi::kIoOpRead:
      std::memset(io.buffer, 0, io.length);
      completer_.Complete(tag, static_cast<int32_t>(io.length));
      return;
    case abi::kIoOpFlush:
      completer_.Complete(tag, 0);
      return;
    default:  // write, discard, write-zeroes
      completer_.Complete(tag, static_cast<int32_t>(io.length));
      return;
  }
}

}  // namespace blk::server
