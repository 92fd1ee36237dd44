// Per-queue NVMe passthrough: each ublk request becomes one or more NVMe commands
// (IORING_OP_URING_CMD, NVME_URING_CMD_IO) on the namespace's generic char device, a registered
// file of the queue's ring, and completes once all of them have. Commands that find the ring's
// submission queue full wait for a later loop turn (SqeWaitlist), never failed or dropped. With
// path failover (a fabric namespace's multipath head), a command failing for a path reason waits
// for a retry timer and is resubmitted unchanged, the head choosing a live path, until the bound.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "server/backend.h"
#include "server/nvme/command.h"
#include "server/nvme/sqe.h"
#include "server/nvme/stats.h"
#include "server/ublk/sqe_waitlist.h"

namespace blk::server {

class NvmeBackend final : public Backend {
 public:
  // `max_request_bytes`: the largest data request the queue hands over, which sizes the per-tag
  // command arrays (discards and write-zeroes need one command within the device's limits).
  // A command that finds the namespace gone fails its request with EIO and is recorded in
  // `stats` (may be null).
  // `size_blocks` (may be null: the target's, fixed) is the volume's length as NvmeStorage::Grow
  // raises it while the queues run; every request is checked against its current value.
  // `path_failover_ms`: see NvmeBackendConfig (0: off).
  NvmeBackend(int fd, const nvme::NamespaceTarget& target, uint16_t queue_depth,
              uint32_t max_request_bytes, std::shared_ptr<NvmeStats> stats = nullptr,
              std::shared_ptr<const std::atomic<uint64_t>> size_blocks = nullptr,
              uint32_t path_failover_ms = 0);

  std::vector<int> Files() const override { return {fd_}; }
  absl::Status Attach(Ring& ring, int first_file, Completer completer) override;
  void Submit(uint16_t tag, const BlockIo& io) override;
  void OnCompletion(uint16_t tag, const io_uring_cqe& cqe) override;
  void EndOfTurn() override;

 private:
  // Submits the tag's commands not yet issued; false when the submission queue ran out first.
  bool Issue(uint16_t tag);
  // Submits command `index` of `tag` again; false without an SQE.
  bool Reissue(uint16_t tag, uint32_t index);
  // A command failed for a path reason: park it for the retry timer, or fail it past the bound.
  void Park(uint16_t tag, uint32_t index);
  void OnRetryTimer();
  void ArmRetryTimer();
  // Completes the tag once none of its commands is in flight, parked or unissued.
  void MaybeComplete(uint16_t tag);

  struct TagState {
    uint32_t pending = 0;  // commands in flight
    uint32_t issued = 0;   // of the request's commands, how many went to the ring
    uint32_t count = 0;    // the request's commands
    nvme::SqeBuffer buffer;
    uint32_t parked = 0;           // commands waiting for the retry timer
    int error = 0;                 // the first failure among them (positive errno)
    int64_t failing_since_ns = 0;  // first path failure of the request (0: none)
    int32_t result = 0;            // what the request completes with when none failed
    nvme::DsmRange dsm{};          // a discard's range: the device reads it while the command runs
  };

  int fd_;
  nvme::NamespaceTarget target_;
  uint32_t commands_per_tag_;
  Ring* ring_ = nullptr;
  Completer completer_;
  int file_index_ = -1;
  std::vector<TagState> tags_;
  std::vector<nvme::UringCmd> commands_;  // commands_per_tag_ per tag
  SqeWaitlist unissued_;
  // Path failover: parked commands by tag * commands_per_tag_ + index, one timer for all.
  uint32_t path_failover_ms_;
  SqeWaitlist parked_;
  bool retry_timer_armed_ = false;
  uint32_t retry_delay_ms_;
  __kernel_timespec retry_timeout_{};
  std::shared_ptr<NvmeStats> stats_;
  std::shared_ptr<const std::atomic<uint64_t>> size_blocks_;
};

}  // namespace blk::server
