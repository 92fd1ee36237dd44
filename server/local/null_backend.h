#pragma once

#include "server/backend.h"

namespace blk::server {

// Reads return zeroes; writes, flushes, discards and write-zeroes succeed at once.
class NullBackend final : public Backend {
 public:
  absl::Status Attach(Ring&, int, Completer completer) override {
    completer_ = completer;
    return absl::OkStatus();
  }
  void Submit(uint16_t tag, const BlockIo& io) override;
  void OnCompletion(uint16_t, const io_uring_cqe&) override {}

 private:
  Completer completer_;
};

class NullStorage final : public Storage {
 public:
  absl::StatusOr<std::unique_ptr<Backend>> NewQueueBackend(uint16_t) override {
    return std::make_unique<NullBackend>();
  }
};

}  // namespace blk::server
