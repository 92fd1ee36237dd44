#include "server/local/null_backend.h"

#include <algorithm>
#include <cstring>

#include "server/ublk/abi.h"

namespace blk::server {

void NullBackend::Submit(uint16_t tag, const BlockIo& io) {
  switch (io.op) {
    case abi::kIoOpRead:
      if (dirty_bytes_[tag] != 0) {
        std::memset(io.buffer, 0, dirty_bytes_[tag]);
        dirty_bytes_[tag] = 0;
      }
      completer_.Complete(tag, static_cast<int32_t>(io.length));
      return;
    case abi::kIoOpWrite:
      // The kernel copied the written data into the tag's buffer.
      dirty_bytes_[tag] = std::max(dirty_bytes_[tag], io.length);
      completer_.Complete(tag, static_cast<int32_t>(io.length));
      return;
    case abi::kIoOpFlush:
      completer_.Complete(tag, 0);
      return;
    default:  // discard, write-zeroes
      completer_.Complete(tag, static_cast<int32_t>(io.length));
      return;
  }
}

}  // namespace blk::server
