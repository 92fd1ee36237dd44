#pragma once

#include <cstdint>
#include <vector>

#include "server/backend.h"

namespace blk::server {

// Reads return zeroes; writes, flushes, discards and write-zeroes succeed at once.
// A tag's buffer starts zeroed (the queue maps it anonymous) and the kernel copies a read's
// bytes out of it as they are, so a read clears only what a write on the same tag left there:
// pure reads touch no data.
class NullBackend final : public Backend {
 public:
  explicit NullBackend(uint16_t queue_depth) : dirty_bytes_(queue_depth, 0) {}
  absl::Status Attach(Ring&, int, Completer completer) override {
    completer_ = completer;
    return absl::OkStatus();
  }
  void Submit(uint16_t tag, const BlockIo& io) override;
  void OnCompletion(uint16_t, const io_uring_cqe&) override {}

 private:
  Completer completer_;
  // Per tag, how many leading bytes of its buffer a write has dirtied since they were last zeroed.
  std::vector<uint32_t> dirty_bytes_;
};

class NullStorage final : public Storage {
 public:
  absl::StatusOr<std::unique_ptr<Backend>> NewQueueBackend(uint16_t queue_depth) override {
    return std::make_unique<NullBackend>(queue_depth);
  }
};

}  // namespace blk::server
