// What a backend sees: "here is an I/O for tag T", and it answers with the result, at once or
// through the queue's ring later.
#pragma once

#include <liburing.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/ublk/device_config.h"
#include "server/ublk/ring.h"

namespace blk::server {

struct BlockIo {
  uint8_t op = 0;          // abi::kIoOp*
  uint32_t flags = 0;      // abi::kIoF* bits (kernel positions)
  uint64_t offset = 0;     // bytes
  uint32_t length = 0;     // bytes
  void* buffer = nullptr;  // the tag's buffer; data for writes, destination of reads
  // The data lies in registered buffer `buffer_index` of the queue's ring (-1: not registered).
  // Zero copy (UBLK_F_AUTO_BUF_REG): that buffer is the request's own pages, addressed from 0,
  // and `buffer` is null. Copy mode with StorageTraits::registered_buffers: `buffer` lies in it.
  int32_t buffer_index = -1;
};

// What a storage can do and needs, known once it is opened: it shapes the device's parameters,
// its ublk flags and its queues' rings.
struct StorageTraits {
  bool discard = true;
  bool write_zeroes = true;
  bool volatile_cache = true;           // FLUSH and FUA mean something
  uint64_t max_write_zeroes_bytes = 0;  // 0: the device default
  bool big_ring_entries = false;        // the backend's SQEs need IORING_SETUP_SQE128 + CQE32
  unsigned max_sqes_per_io = 1;         // backend SQEs one ublk request may need at once
  bool zero_copy = false;               // serves I/O from a registered buffer index (BlockIo)
  bool registered_buffers = false;      // in copy mode, wants the tag buffers registered too
};

// Returned instead of a result when the I/O went into the ring and completes later.
inline constexpr int32_t kInFlight = std::numeric_limits<int32_t>::min();

// One per queue, used only by that queue's thread. Results are what the block layer gets:
// bytes transferred (>= 0) or -errno.
class Backend {
 public:
  virtual ~Backend() = default;
  // Files to register in the queue's ring (in this order, starting at some index).
  virtual std::vector<int> Files() const { return {}; }
  // Called once on the queue thread before any I/O; `first_file` is the index of Files()[0].
  virtual absl::Status Attach(Ring& ring, int first_file) = 0;
  // Starts an I/O for `tag`. No allocation, lock or blocking call here.
  virtual int32_t Submit(uint16_t tag, const BlockIo& io) = 0;
  // A CQE whose user_data says kBackend for `tag`: the final result or kInFlight again.
  virtual int32_t OnCompletion(uint16_t tag, const io_uring_cqe& cqe) = 0;
};

// What the device is backed by, opened once per device; hands out one Backend per queue.
class Storage {
 public:
  virtual ~Storage() = default;
  virtual absl::StatusOr<std::unique_ptr<Backend>> NewQueueBackend(uint16_t queue_depth) = 0;
  virtual StorageTraits traits() const { return {}; }
  // The device could not be created: remove what opening the storage created (a new file).
  virtual void AbandonCreated() {}
};

// Opens and validates the configured backend (see FileStorage::Open for the file rules).
absl::StatusOr<std::unique_ptr<Storage>> OpenStorage(const DeviceConfig& config);

}  // namespace blk::server
