// libFuzzer target: the NBD reply parser fed arbitrary bytes in arbitrary pieces, with a few
// requests awaiting replies. It must refuse or accept, never touch memory outside the buffers
// (ASan), and a read it completes without error must have had every byte of its buffer written
// by the reply: the same input is parsed twice, into buffers that start out different, and each
// completed read's bytes must come out the same both times (a byte left stale would differ).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "server/nbd/protocol.h"

namespace {

using namespace blk::server::nbd;

class Targets : public ReplyTargets {
 public:
  static constexpr int kCount = 4;

  explicit Targets(uint8_t fill) {
    const uint16_t commands[kCount] = {kCmdRead, kCmdRead, kCmdWrite, kCmdFlush};
    const uint32_t lengths[kCount] = {4096, 17, 512, 0};
    for (int i = 0; i < kCount; ++i) {
      buffers_[i].assign(lengths[i], fill);
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
    if (t.covered.bytes() > t.length) abort();
    if (t.command == kCmdRead && t.nbd_error == 0 && !t.covered.Covers(t.length)) abort();
    live_[cookie - 1] = false;
    read_ok_[cookie - 1] = t.command == kCmdRead && t.nbd_error == 0;
  }
  // Whether the read under this index completed without error, and its bytes.
  bool read_ok(int i) const { return read_ok_[i]; }
  const std::vector<uint8_t>& buffer(int i) const { return buffers_[i]; }

 private:
  ReplyTarget targets_[kCount];
  std::vector<uint8_t> buffers_[kCount];
  bool live_[kCount] = {};
  bool read_ok_[kCount] = {};
};

// `in_place`: inside a read payload, the bytes go straight to PendingPayload().dst and the parser
// hears of them through PayloadArrived, as the backend receives large payloads.
void Parse(const uint8_t* data, size_t size, bool structured, bool in_place, size_t piece,
           Targets& targets) {
  ReplyParser parser(structured);
  while (size > 0) {
    size_t n = size < piece ? size : piece;
    const ReplyParser::Payload payload = parser.PendingPayload();
    if (in_place && payload.length > 0) {
      if (n > payload.length) n = payload.length;
      std::memcpy(payload.dst, data, n);
      // Refused only as Feed would be: a read its last data chunk leaves uncovered.
      if (!parser.PayloadArrived(n, targets).ok()) return;
    } else if (!parser.Feed(data, n, targets).ok()) {
      return;
    }
    data += n;
    size -= n;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const bool structured = data[0] & 1;
  const bool in_place = data[0] & 2;
  const size_t piece = 1 + data[1] % 64;  // how the "socket" splits the stream
  data += 2;
  size -= 2;
  Targets zeroed(0x00);
  Targets filled(0xff);
  Parse(data, size, structured, in_place, piece, zeroed);
  Parse(data, size, structured, in_place, piece, filled);
  for (int i = 0; i < Targets::kCount; ++i) {
    if (zeroed.read_ok(i) != filled.read_ok(i)) abort();
    if (zeroed.read_ok(i) && zeroed.buffer(i) != filled.buffer(i)) abort();
  }
  return 0;
}
