#pragma once

#include "server/backend.h"

namespace blk::server {

// Reads return zeroes; writes, flushes, discards and write-zeroes succeed at once.
class NullBackend final : public Backend {
 public:
  explicit NullBackend(bool read_only) : read_only_(read_only) {}
  absl::Status Attach(Ring&, int) override { return absl::OkStatus(); }
  int32_t Submit(uint16_t tag, const BlockIo& io) override;
  int32_t OnCompletion(uint16_t, const io_uring_cqe& cqe) override { return cqe.res; }

 private:
  bool read_only_;
};

class NullStorage final : public Storage {
 public:
  explicit NullStorage(bool read_only) : read_only_(read_only) {}
  absl::StatusOr<std::unique_ptr<Backend>> NewQueueBackend(uint16_t) override {
    return std::make_unique<NullBackend>(read_only_);
  }

 private:
  bool read_only_;
};

}  // namespace blk::server
