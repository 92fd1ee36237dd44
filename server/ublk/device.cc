#include "server/ublk/device.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/monotonic_clock.h"
#include "server/qos/throttling_backend.h"
#include "server/ublk/abi.h"
#include "server/ublk/cpu_list.h"
#include "server/ublk/numa_nodes.h"
#include "server/ublk/params.h"
#include "server/ublk/placement.h"
#include "server/ublk/stop_guard.h"

namespace blk::server {
namespace {

// devtmpfs creates /dev/ublkcN during ADD_DEV; with udev managing /dev it may take a moment.
constexpr auto kCharDeviceDeadline = std::chrono::seconds(10);

// Kernels before 6.15 (see OldServerExitHandling) notice a dead server whose queue holds every
// request, as after a detach under full load, only when one of those requests times out: with
// the block layer's default of 30 s the next server's recovery waits that long. While the server
// lives, those kernels re-arm a request's timer when it expires, so a short one costs nothing.
constexpr uint32_t kOldKernelRequestTimeoutMs = 2000;

// The kernel needs a moment after a server died before a device can be recovered: it notices the
// exit, quiesces the queue and releases the old /dev/ublkcN (until then open() says EBUSY).
constexpr auto kRecoveryDeadline = std::chrono::seconds(30);

absl::StatusOr<UniqueFd> OpenCharDevice(const std::string& path) {
  const auto deadline = std::chrono::steady_clock::now() + kCharDeviceDeadline;
  while (true) {
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
    if (fd.valid()) return fd;
    const int err = errno;
    // EBUSY: a previous server's descriptor is still being released (recovery).
    if ((err != ENOENT && err != EBUSY) || std::chrono::steady_clock::now() >= deadline) {
      return absl::ErrnoToStatus(err, absl::StrCat("open ", path));
    }
    ::poll(nullptr, 0, 10);  // the node appears asynchronously; nothing to wait on but time
  }
}

const char* StateName(uint16_t state) {
  switch (state) {
    case abi::kDevStateDead:
      return "DEAD";
    case abi::kDevStateLive:
      return "LIVE";
    case abi::kDevStateQuiesced:
      return "QUIESCED";
    case abi::kDevStateFailIo:
      return "FAIL_IO";
    default:
      return "unknown";
  }
}

// Polls GET_DEV_INFO until the device waits for a new server (QUIESCED, or FAIL_IO for fail-fast
// devices), and runs START_USER_RECOVERY, which older kernels refuse (EBUSY) a little longer.
absl::StatusOr<abi::CtrlDevInfo> BeginRecovery(ControlDevice& control, uint32_t dev_id) {
  const auto deadline = std::chrono::steady_clock::now() + kRecoveryDeadline;
  while (true) {
    absl::StatusOr<abi::CtrlDevInfo> info = control.GetDevInfo(dev_id);
    if (!info.ok()) return info.status();
    if ((info->flags & abi::kFUserRecovery) == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("ublk device ", dev_id, " was created without user recovery"));
    }
    if (info->state == abi::kDevStateDead) {
      return absl::FailedPreconditionError(
          absl::StrCat("ublk device ", dev_id, " is not started (state DEAD)"));
    }
    absl::Status started = absl::OkStatus();
    // Kernels differ in when they report QUIESCED after the server died; a LIVE device whose
    // server process is gone is worth a try too. Refusals just mean "not yet".
    const bool server_gone =
        info->ublksrv_pid <= 0 || (::kill(info->ublksrv_pid, 0) != 0 && errno == ESRCH);
    if (info->state == abi::kDevStateQuiesced || info->state == abi::kDevStateFailIo ||
        (info->state == abi::kDevStateLive && server_gone)) {
      started = control.StartUserRecovery(dev_id);
      if (started.ok()) return info;
      if (started.code() == absl::StatusCode::kNotFound) return started;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return absl::FailedPreconditionError(
          absl::StrCat("ublk device ", dev_id, " did not become recoverable within ",
                       std::chrono::duration_cast<std::chrono::seconds>(kRecoveryDeadline).count(),
                       "s (state ", StateName(info->state), ", server pid ", info->ublksrv_pid,
                       started.ok() ? "" : absl::StrCat(", ", started.message()), ")"));
    }
    ::poll(nullptr, 0, 50);  // the kernel gives no event for "server gone"; poll its state
  }
}

}  // namespace

Device::Device(const DeviceConfig& config, std::unique_ptr<ControlDevice> control,
               std::unique_ptr<Storage> storage, uint32_t dev_id)
    : config_(config),
      queue_stats_(new QueueStats[config.queues]),
      limiter_(std::make_shared<Limiter>(config.limits, config.max_io_bytes)),
      control_(std::move(control)),
      storage_(std::move(storage)),
      dev_id_(dev_id) {
  kernel_features_ = control_->features();
}

absl::Status Device::SetLimits(const IoLimits& limits) {
  if (!config_.io_limits && !limits.unlimited()) {
    return absl::FailedPreconditionError(
        "I/O limits are off for this device (blkagent --io-limits off)");
  }
  limiter_->Set(limits, MonotonicNs());
  return absl::OkStatus();
}

std::string Device::block_path() const { return absl::StrCat("/dev/ublkb", dev_id_); }
std::string Device::char_path() const { return absl::StrCat("/dev/ublkc", dev_id_); }

absl::StatusOr<std::unique_ptr<Device>> Device::Create(const DeviceConfig& config, uint32_t dev_id,
                                                       OpenPurpose purpose) {
  if (absl::Status valid = ValidateDeviceConfig(config); !valid.ok()) return valid;
  absl::StatusOr<std::unique_ptr<Storage>> storage = OpenStorage(config, purpose);
  if (!storage.ok()) return storage.status();
  absl::StatusOr<std::unique_ptr<ControlDevice>> control = ControlDevice::Open();
  if (!control.ok()) {
    (*storage)->AbandonCreated();
    return control.status();
  }

  const uint64_t flags = ChooseDeviceFlags((*control)->features(), config, (*storage)->traits());
  absl::StatusOr<abi::CtrlDevInfo> info = (*control)->AddDev(BuildDevInfo(config, flags, dev_id));
  if (!info.ok()) {
    (*storage)->AbandonCreated();
    return info.status();
  }

  // From here the kernel device exists: the Device owns it, and its destructor removes it.
  std::unique_ptr<Device> device(
      new Device(config, std::move(*control), std::move(*storage), info->dev_id));
  device->device_flags_ = flags;
  // The kernel may lower the buffer size it accepts; the per-tag buffers follow its value.
  const uint32_t max_io_bytes = std::min(info->max_io_buf_bytes, config.max_io_bytes);
  absl::Status started = device->control_->SetParams(
      device->dev_id_, BuildParams(config, max_io_bytes, device->storage_->traits()));
  if (started.ok()) started = device->StartNew(max_io_bytes);
  if (!started.ok()) {
    device->Stop(/*force=*/true).IgnoreError();
    device->storage_->AbandonCreated();
    return absl::Status(started.code(),
                        absl::StrCat("ublk device ", device->id(), ": ", started.message()));
  }
  return device;
}

absl::StatusOr<std::unique_ptr<Device>> Device::Recover(uint32_t dev_id,
                                                        const DeviceConfig& config) {
  if (absl::Status valid = ValidateDeviceConfig(config); !valid.ok()) return valid;
  absl::StatusOr<std::unique_ptr<ControlDevice>> control = ControlDevice::Open();
  if (!control.ok()) return control.status();
  // The kernel's geometry wins over the spec's, for the storage (an NBD storage opens a
  // connection per queue) as for the queues: both must match what ADD_DEV allocated.
  absl::StatusOr<abi::CtrlDevInfo> kernel_info = (*control)->GetDevInfo(dev_id);
  if (!kernel_info.ok()) return kernel_info.status();
  const DeviceConfig kernel_config = RecoveryConfig(config, *kernel_info);
  if (absl::Status valid = ValidateDeviceConfig(kernel_config); !valid.ok()) {
    return absl::Status(valid.code(), absl::StrCat("recover ublk device ", dev_id,
                                                   ": the kernel's geometry: ", valid.message()));
  }
  absl::StatusOr<std::unique_ptr<Storage>> storage =
      OpenStorage(kernel_config, OpenPurpose::kRecover);
  if (!storage.ok()) {
    return absl::Status(storage.status().code(), absl::StrCat("recover ublk device ", dev_id, ": ",
                                                              storage.status().message()));
  }
  absl::StatusOr<abi::CtrlDevInfo> info = BeginRecovery(**control, dev_id);
  if (!info.ok()) return info.status();

  std::unique_ptr<Device> device(
      new Device(kernel_config, std::move(*control), std::move(*storage), dev_id));
  device->device_flags_ = info->flags;
  const uint32_t max_io_bytes = std::min(info->max_io_buf_bytes, config.max_io_bytes);
  absl::Status recovered = device->EndRecovery(max_io_bytes);
  if (!recovered.ok()) {
    // Leave the device quiesced: its I/O waits for a later attempt instead of failing.
    device->Detach().IgnoreError();  // the error returned says more
    return absl::Status(recovered.code(),
                        absl::StrCat("recover ublk device ", dev_id, ": ", recovered.message()));
  }
  return device;
}

absl::Status Device::StartNew(uint32_t max_io_bytes) {
  absl::MutexLock lock(&mutex_);
  absl::Status started = StartQueues(max_io_bytes);
  // Every queue has a fetch pending for every tag, so START_DEV does not wait forever.
  if (started.ok()) started = control_->StartDev(dev_id_, ::getpid());
  if (started.ok()) started_ = true;
  if (started.ok()) started = LimitRequestTimeout();
  if (started.ok()) started = DropIoScheduler();
  return started;
}

absl::Status Device::DropIoScheduler() const {
  return WriteQueueAttribute(UblkQueueSysfsDir(dev_id_), "scheduler", "none");
}

absl::Status Device::LimitRequestTimeout() const {
  if (!OldServerExitHandling()) return absl::OkStatus();
  return WriteQueueAttribute(UblkQueueSysfsDir(dev_id_), "io_timeout", kOldKernelRequestTimeoutMs);
}

absl::Status Device::EndRecovery(uint32_t max_io_bytes) {
  absl::MutexLock lock(&mutex_);
  absl::Status recovered = StartQueues(max_io_bytes);
  if (recovered.ok()) recovered = control_->EndUserRecovery(dev_id_, ::getpid());
  if (recovered.ok()) started_ = true;
  return recovered;
}

absl::Status Device::StartQueues(uint32_t max_io_bytes) {
  absl::StatusOr<UniqueFd> char_fd = OpenCharDevice(char_path());
  if (!char_fd.ok()) return char_fd.status();
  char_fd_ = std::move(*char_fd);

  const std::vector<int> allowed = AllowedCpus();
  const std::vector<cpu_set_t> numa_nodes = NumaNodeCpus();
  for (uint16_t q = 0; q < config_.queues; ++q) {
    QueueSetup setup;
    setup.device_id = dev_id_;
    setup.queue_id = q;
    setup.depth = config_.queue_depth;
    setup.max_io_bytes = max_io_bytes;
    setup.char_fd = char_fd_.get();
    setup.ioctl_encoding = (device_flags_ & abi::kFCmdIoctlEncode) != 0;
    setup.storage = storage_->traits();
    setup.read_only = config_.read_only;
    // The kernel's flags decide (a recovered device keeps the mode it was created with).
    setup.auto_buf_reg = (device_flags_ & abi::kFAutoBufReg) != 0;
    setup.poll = config_.poll;
    setup.batch_io = (device_flags_ & abi::kFBatchIo) != 0;
    setup.cancel_races_dispatch = OldServerExitHandling();
    absl::StatusOr<cpu_set_t> cpus = control_->GetQueueAffinity(dev_id_, q);
    if (!cpus.ok()) return cpus.status();
    setup.hctx_cpus = *cpus;
    setup.thread_cpus = QueueThreadCpus(config_.placement, q, *cpus, allowed, numa_nodes);
    queue_stats_[q].hctx_cpus = setup.hctx_cpus;
    queue_stats_[q].thread_cpus = setup.thread_cpus;
    setup.stats = &queue_stats_[q];
    setup.count_io = config_.io_stats;
    absl::StatusOr<std::unique_ptr<Backend>> backend =
        storage_->NewQueueBackend(config_.queue_depth);
    if (!backend.ok()) return backend.status();
    setup.backend = std::move(*backend);
    if (config_.io_limits) {
      setup.backend = std::make_unique<ThrottlingBackend>(std::move(setup.backend), limiter_,
                                                          config_.queue_depth);
    }
    absl::StatusOr<std::unique_ptr<Queue>> queue = Queue::Start(std::move(setup));
    if (!queue.ok()) return queue.status();
    queues_.push_back(std::move(*queue));
  }
  return absl::OkStatus();
}

Device::~Device() { Stop(/*force=*/true).IgnoreError(); }

absl::Status Device::EndQueues() {
  // Queue 0 ends last: its backend may serve the other queues' I/O (an NBD connection they share),
  // so it keeps running until they got every answer and ended.
  for (size_t q = 1; q < queues_.size(); ++q) queues_[q]->RequestStop();
  for (size_t q = 1; q < queues_.size(); ++q) queues_[q]->Join();
  if (!queues_.empty()) {
    queues_[0]->RequestStop();
    queues_[0]->Join();
  }
  absl::Status ended = absl::OkStatus();
  for (const std::unique_ptr<Queue>& queue : queues_) ended.Update(queue->loop_status());
  queues_.clear();
  return ended;
}

absl::Status Device::Detach() {
  absl::MutexLock lock(&mutex_);
  if (released_) return absl::OkStatus();
  absl::Status ended = EndQueues();
  char_fd_.Reset();
  started_ = false;
  released_ = true;
  if (ended.ok()) return ended;
  return absl::Status(ended.code(), absl::StrCat("ublk device ", dev_id_, ": ", ended.message()));
}

absl::StatusOr<uint64_t> Device::KernelSizeBytes() const {
  const std::string path = absl::StrCat("/sys/block/ublkb", dev_id_, "/size");
  std::ifstream file(path);
  uint64_t sectors = 0;
  if (!(file >> sectors)) {
    return absl::FailedPreconditionError(absl::StrCat("cannot read ", path));
  }
  return sectors << abi::kSectorShift;
}

absl::Status Device::Resize(uint64_t size_bytes) {
  absl::MutexLock lock(&mutex_);
  if ((kernel_features_ & abi::kFUpdateSize) == 0) {
    return absl::FailedPreconditionError(
        "this kernel cannot resize a ublk device online: it lacks UBLK_F_UPDATE_SIZE (Linux "
        "6.14+)");
  }
  if (released_ || !started_) {
    return absl::FailedPreconditionError(
        absl::StrCat("ublk device ", dev_id_, " is not serving I/O"));
  }
  if (size_bytes == 0 || size_bytes % config_.logical_block_size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("size_bytes must be a positive multiple of the logical block size ",
                     config_.logical_block_size, ", got ", size_bytes));
  }
  absl::StatusOr<uint64_t> current = KernelSizeBytes();
  if (!current.ok()) return current.status();
  if (size_bytes == *current) return absl::OkStatus();
  if (size_bytes < *current) {
    return absl::InvalidArgumentError(
        absl::StrCat("ublk device ", dev_id_, " has ", *current, " bytes; shrinking it to ",
                     size_bytes, " would cut off data (only growing is supported)"));
  }
  if (absl::Status grown = storage_->Grow(size_bytes); !grown.ok()) return grown;
  return control_->UpdateSize(dev_id_, size_bytes >> abi::kSectorShift);
}

absl::Status Device::Stop(bool force) {
  absl::MutexLock lock(&mutex_);
  if (released_) return absl::OkStatus();
  if (started_) {
    if (!force) {
      if (absl::Status refused = RefuseStopIfOpen(*control_, dev_id_, kernel_features_);
          !refused.ok()) {
        return refused;
      }
    }
    // STOP_DEV waits for the requests it handed over: those a limit holds fail at once instead.
    if (force) limiter_->FailHeld();
    // Idempotent in the kernel: a device TRY_STOP already stopped is just DEAD.
    absl::Status stopped = control_->StopDev(dev_id_);
    if (!stopped.ok() && stopped.code() != absl::StatusCode::kNotFound) return stopped;
    started_ = false;
  }
  // A forced stop may leave openers behind; waiting for them would hang the caller.
  return TearDown(/*wait_for_delete=*/!force);
}

absl::Status Device::TearDown(bool wait_for_delete) {
  // After STOP_DEV no request is outstanding; the kernel aborts the fetches, and the stop signal
  // covers kernels (and failed starts) where it does not. How a queue ended no longer matters: the
  // device goes.
  EndQueues().IgnoreError();
  // The waiting DEL_DEV returns only once every reference is gone, our /dev/ublkcN included.
  char_fd_.Reset();
  absl::Status deleted = control_->DelDev(dev_id_, wait_for_delete);
  if (!deleted.ok() && deleted.code() != absl::StatusCode::kNotFound) return deleted;
  released_ = true;
  return absl::OkStatus();
}

}  // namespace blk::server
