// What a backend sees: "here is an I/O for tag T"; it answers "tag T completed with result R"
// through the queue's Completer, at once or later, for any of its tags.
#pragma once

#include <liburing.h>

#include <cstdint>
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

// Hands a tag's result to its queue: "complete tag T with result R". Results are what the block
// layer gets: bytes transferred (>= 0) or -errno. A plain function and its context, so a call
// costs no allocation and no virtual dispatch; the queue makes it, tests make their own.
class Completer {
 public:
  using Function = void (*)(void* context, uint16_t tag, int32_t result);
  Completer() = default;
  Completer(Function function, void* context) : function_(function), context_(context) {}
  void Complete(uint16_t tag, int32_t result) const { function_(context_, tag, result); }

 private:
  Function function_ = nullptr;
  void* context_ = nullptr;
};

// One per queue, used only by that queue's thread. Every Submit ends in exactly one
// Completer::Complete for its tag, from Submit itself or from any later call on the queue thread.
class Backend {
 public:
  virtual ~Backend() = default;
  // Files to register in the queue's ring (in this order, starting at some index).
  virtual std::vector<int> Files() const { return {}; }
  // Called once on the queue thread before any I/O; `first_file` is the index of Files()[0].
  virtual absl::Status Attach(Ring& ring, int first_file, Completer completer) = 0;
  // Starts an I/O for `tag`. No allocation, lock or blocking call here. The queue has already
  // refused what the device cannot do (see AdmitIo): the op is one of read, write, flush,
  // discard, write-zeroes, and writes never reach a read-only device.
  virtual void Submit(uint16_t tag, const BlockIo& io) = 0;
  // A CQE whose user_data says kBackend for `tag`.
  virtual void OnCompletion(uint16_t tag, const io_uring_cqe& cqe) = 0;
  // Once per loop turn, after the turn's Submit and OnCompletion calls and before its SQEs are
  // submitted: a backend that gathers the turn's work (NBD sends) hands it over here.
  virtual void EndOfTurn() {}
  // The queue stops: requests the backend holds without having started them (over a limit) are
  // handed back through `released`, each instead of its completion (the result is ignored). The
  // queue leaves them with the kernel, which requeues them for the next server
  // (USER_RECOVERY_REISSUE) or fails them as the device goes. Requests under way complete as usual.
  virtual void ReleaseUnstarted(Completer /*released*/) {}
};

// What the device is backed by, opened once per device; hands out one Backend per queue.
class Storage {
 public:
  virtual ~Storage() = default;
  virtual absl::StatusOr<std::unique_ptr<Backend>> NewQueueBackend(uint16_t queue_depth) = 0;
  virtual StorageTraits traits() const { return {}; }
  // The device could not be created: remove what opening the storage created (a new file).
  virtual void AbandonCreated() {}
  // Makes the storage hold `size_bytes` (larger than the device's size) before the device grows:
  // FailedPrecondition when it cannot. Storage without a size of its own (null) holds anything.
  virtual absl::Status Grow(uint64_t /*size_bytes*/) { return absl::OkStatus(); }
};

// Why a storage is opened; each storage decides what that means for it.
enum class OpenPurpose {
  kCreate,   // for a new volume: what is missing may be made (a file storage creates its file)
  kReopen,   // for a volume served before whose device is gone (a reboot): its data must be
             // there, nothing is made (its file system may not be mounted yet)
  kRecover,  // for a device the kernel still holds: its data must be there, nothing is made
};

// Opens and validates the configured backend (see FileStorage::Open for the file rules).
absl::StatusOr<std::unique_ptr<Storage>> OpenStorage(const DeviceConfig& config,
                                                     OpenPurpose purpose);

}  // namespace blk::server
