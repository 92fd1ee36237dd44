#pragma once

#include <sched.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/unique_fd.h"
#include "server/backend.h"
#include "server/backend_config.h"
#include "server/qos/limiter.h"
#include "server/ublk/control.h"
#include "server/ublk/device_config.h"
#include "server/ublk/params.h"
#include "server/ublk/queue.h"
#include "server/ublk/queue_stats.h"
#include "server/ublk/queue_sysfs.h"
#include "server/ublk/rq_affinity.h"

namespace blk::server {

// One ublk block device (/dev/ublkbN) and the threads that serve it. Owning a Device means the
// kernel device exists; destroying it stops and deletes the kernel device.
class Device {
 public:
  // Opens/validates the backend first (file: created sparse at size_bytes if missing; an existing
  // regular file or block device smaller than size_bytes, or a missing parent directory:
  // InvalidArgument), then ADD_DEV, SET_PARAMS, queue threads, START_DEV. On any failure
  // everything is undone (device deleted, threads joined) and the error returned.
  // `dev_id`: the kernel id to ask for (kAnyDeviceId: the kernel picks); taken: FailedPrecondition.
  // `purpose` kReopen: the volume was served before (its device is gone), so a missing backing
  // file is an error, never re-created empty.
  static absl::StatusOr<std::unique_ptr<Device>> Create(const DeviceConfig& config,
                                                        uint32_t dev_id = kAnyDeviceId,
                                                        OpenPurpose purpose = OpenPurpose::kCreate);
  // Takes over device `dev_id` left by a server that exited or was killed (user recovery): waits
  // (bounded) for the kernel to quiesce it, re-opens the backend (a missing backing file is an
  // error, never re-created empty), START_USER_RECOVERY, queue threads, END_USER_RECOVERY. The
  // storage and the queues take the kernel device's queue count and depth (RecoveryConfig), not
  // `config`'s: config() says what runs. Queued
  // I/O then resumes. NotFound when there is no such device; FailedPrecondition when it cannot be
  // recovered (never started, created without recovery, or still served). On failure the kernel
  // device is left as it was, for a later attempt.
  static absl::StatusOr<std::unique_ptr<Device>> Recover(uint32_t dev_id,
                                                         const DeviceConfig& config);
  ~Device();  // Stop(/*force=*/true) unless stopped or detached
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  int id() const { return static_cast<int>(dev_id_); }
  std::string block_path() const;  // "/dev/ublkbN"
  std::string char_path() const;   // "/dev/ublkcN"

  // force=false: refused with FailedPrecondition naming the opener (pid and command, holder or
  // mount point) while the block device is open; the device keeps working. force=true: stops
  // regardless; openers get I/O errors. Then the queue threads end and the device is deleted.
  // Idempotent.
  absl::Status Stop(bool force);
  // Lets go of the device without stopping it (agent upgrade): the queue threads end and
  // /dev/ublkcN is closed; with user recovery the kernel quiesces the device and holds its I/O for
  // the next server's Recover. Idempotent. An error says how a queue ended early (the device is
  // detached all the same).
  absl::Status Detach();

  // Grows the started device to `size_bytes` while it serves I/O: the storage first
  // (Storage::Grow), then UPDATE_SIZE. The kernel's current capacity is the size compared with:
  // the same is OK and changes nothing, smaller or not a multiple of the logical block size is
  // InvalidArgument. FailedPrecondition when the kernel lacks UBLK_F_UPDATE_SIZE (before 6.14),
  // the device is not started, or the storage cannot hold the new size.
  absl::Status Resize(uint64_t size_bytes);
  // The block device's capacity in bytes, from sysfs (/sys/block/ublkbN/size).
  absl::StatusOr<uint64_t> KernelSizeBytes() const;

  // The block queue's rq_affinity in sysfs (the device must be started).
  absl::Status SetRqAffinity(uint32_t value) const {
    return WriteRqAffinity(UblkQueueSysfsDir(dev_id_), value);
  }
  absl::StatusOr<uint32_t> RqAffinity() const { return ReadRqAffinity(UblkQueueSysfsDir(dev_id_)); }
  // Whether the kernel completes requests where rq_affinity says (SUPPORT_RQ_AFFINITY).
  bool rq_affinity_redirected() const {
    return RqAffinityRedirected(kernel_features_, device_flags_, config_.rq_affinity_flag);
  }

  // The device's I/O limits, changed while its queues run: requests not yet admitted see them at
  // once, those waiting within ThrottlingBackend::kMaxWaitMs. Always OK (the type is valid).
  absl::Status SetLimits(const IoLimits& limits);
  IoLimits limits() const { return limiter_->limits(); }
  ThrottleCounts throttle_counts() const { return limiter_->counts(); }

  uint64_t kernel_features() const { return kernel_features_; }
  uint64_t device_flags() const { return device_flags_; }  // what ADD_DEV asked for
  // "zero_copy" (UBLK_F_AUTO_BUF_REG) or "copy".
  const char* copy_mode() const { return CopyModeName(device_flags_); }
  // "batch" (UBLK_F_BATCH_IO) or "classic"; a recovered device keeps the mode it was created with.
  const char* io_mode() const { return IoModeName(device_flags_); }
  const DeviceConfig& config() const { return config_; }
  // What each queue publishes; readable from any thread without waiting, also while the device
  // stops and after it stopped.
  size_t queue_count() const { return config_.queues; }
  const QueueStats& queue_stats(size_t queue) const { return queue_stats_[queue]; }
  const IoCounters& queue_counters(size_t queue) const { return queue_stats_[queue].counters; }
  const cpu_set_t& queue_hctx_cpus(size_t queue) const { return queue_stats_[queue].hctx_cpus; }
  const cpu_set_t& queue_thread_cpus(size_t queue) const { return queue_stats_[queue].thread_cpus; }

 private:
  Device(const DeviceConfig& config, std::unique_ptr<ControlDevice> control,
         std::unique_ptr<Storage> storage, uint32_t dev_id);
  // Starts the queues, then START_DEV (Create) or END_USER_RECOVERY (Recover).
  absl::Status StartNew(uint32_t max_io_bytes);
  absl::Status EndRecovery(uint32_t max_io_bytes);
  // Opens /dev/ublkcN and starts one thread per queue, each with a FETCH pending for every tag.
  absl::Status StartQueues(uint32_t max_io_bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Before 6.15 the kernel handles a server's exit in two ways later kernels do not: it may cancel
  // a fetch while a request is being handed to it (QueueSetup::cancel_races_dispatch), and finds a
  // dead server that holds every request only by their timeout. UBLK_F_QUIESCE (6.16) is the
  // first feature bit after those fixes, so this is never true together with BATCH_IO (7.0).
  bool OldServerExitHandling() const { return (kernel_features_ & abi::kFQuiesce) == 0; }
  // On those kernels: the block queue's request timeout (io_timeout) to
  // kOldKernelRequestTimeoutMs, so a detach under full load is recoverable that soon. Set when
  // the device is created and kept by the kernel across recoveries; not while recovering: a
  // store to a queue attribute freezes the queue, which waits for every request the device holds.
  // (A device an earlier agent created keeps the default.)
  absl::Status LimitRequestTimeout() const;
  // The disk's I/O scheduler to "none": the kernel gives a single-queue disk mq-deadline, which
  // runs every request that was not plugged through a kblockd worker, one more thread to wake per
  // request on its way to the queue thread; the backend (an NVMe device, a remote server, a
  // file's own disk) orders and merges I/O itself. Set at creation, like the request timeout.
  absl::Status DropIoScheduler() const;
  // Asks every queue thread to end and waits for them, queue 0 last; the first queue's reason to
  // have ended early, if any (Queue::loop_status).
  absl::Status EndQueues() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Ends the queue threads, closes /dev/ublkcN and deletes the kernel device; waits for the
  // deletion to finish only when nobody can still hold the device open.
  absl::Status TearDown(bool wait_for_delete) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  // Serialises starting, stopping and detaching (the control device is used under it too).
  absl::Mutex mutex_;
  DeviceConfig config_;
  // Declared before queues_: the queue threads write into it until they are joined.
  std::unique_ptr<QueueStats[]> queue_stats_;
  // Shared by every queue's ThrottlingBackend.
  std::shared_ptr<Limiter> limiter_;
  std::unique_ptr<ControlDevice> control_;
  std::unique_ptr<Storage> storage_;
  uint32_t dev_id_;
  uint64_t kernel_features_ = 0;
  uint64_t device_flags_ = 0;
  UniqueFd char_fd_ ABSL_GUARDED_BY(mutex_);
  std::vector<std::unique_ptr<Queue>> queues_ ABSL_GUARDED_BY(mutex_);
  bool started_ ABSL_GUARDED_BY(mutex_) = false;
  // Deleted or detached: the kernel device is no longer ours.
  bool released_ ABSL_GUARDED_BY(mutex_) = false;
};

}  // namespace blk::server
