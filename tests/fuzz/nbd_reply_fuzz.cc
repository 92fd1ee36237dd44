// libFuzzer target: the NBD reply parser fed arbitrary bytes in arbitrary pieces, with a few
// requests awaiting replies. It must refuse or accept, never touch memory outside the buffers
// (ASan) or hand back more data than a request asked for.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "server/nbd/protocol.h"

namespace {

using namespace blk::server::nbd;

class Targets : public ReplyTargets {
 public:
  Targets() {
    const uint16_t commands[kCount] = {kCmdRead, kCmdRead, kCmdWrite, kCmdFlush};
    const uint32_t lengths[kCount] = {4096, 17, 512, 0};
    for (int i = 0; i < kCount; ++i) {
      buffers_[i].assign(lengths[i], 0);
      targets_[i].command = commands[i];
      targets_[i].offset = 1000 * static_cast<uint64_t>(i);
      targets_[i].length = lengths[i];
      targets_[i].buffer = buffers_[i].data();
      live_[i] = true;
    }
  }
  ReplyTarget* Find(uint64_t cookie) override {
    if (cookie < 1 || cookie > kCount || !live_[cookie - 1]) return nullptr;
    return &targets_[cookie - 1];
  }
  void Complete(uint64_t cookie) override {
    ReplyTarget& t = targets_[cookie - 1];
    if (t.received > t.length) abort();
    if (t.command == kCmdRead && t.nbd_error == 0 && t.received != t.length) abort();
    live_[cookie - 1] = false;
  }

 private:
  static constexpr int kCount = 4;
  ReplyTarget targets_[kCount];
  std::vector<uint8_t> buffers_[kCount];
  bool live_[kCount] = {};
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const bool structured = data[0] & 1;
  const size_t piece = 1 + data[1] % 64;  // how the "socket" splits the stream
  data += 2;
  size -= 2;
  Targets targets;
  ReplyParser parser(structured);
  while (size > 0) {
    const size_t n = size < piece ? size : piece;
    if (!parser.Feed(data, n, targets).ok()) break;
    data += n;
    size -= n;
  }
  return 0;
}
