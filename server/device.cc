#include "server/device.h"

#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/device_params.h"
#include "server/opener.h"

namespace blk::server {
namespace {

// devtmpfs creates /dev/ublkcN during ADD_DEV; with udev managing /dev it may take a moment.
constexpr auto kCharDeviceDeadline = std::chrono::seconds(10);

absl::StatusOr<UniqueFd> OpenCharDevice(const std::string& path) {
  const auto deadline = std::chrono::steady_clock::now() + kCharDeviceDeadline;
  while (true) {
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
    if (fd.valid()) return fd;
    const int err = errno;
    if (err != ENOENT || std::chrono::steady_clock::now() >= deadline) {
      return absl::InternalError(absl::StrCat("open ", path, ": ", strerrordesc_np(err)));
    }
    ::poll(nullptr, 0, 10);  // the node appears asynchronously; nothing to wait on but time
  }
}

// major:minor of the started disk, from sysfs (present with or without udev).
absl::StatusOr<DeviceNumber> DiskNumber(uint32_t dev_id) {
  const std::string path = absl::StrCat("/sys/block/ublkb", dev_id, "/dev");
  std::ifstream in(path);
  unsigned major = 0;
  unsigned minor = 0;
  char colon = 0;
  if (!(in >> major >> colon >> minor) || colon != ':') {
    return absl::NotFoundError(absl::StrCat("cannot read ", path));
  }
  return DeviceNumber{major, minor, /*block=*/true};
}

}  // namespace

Device::Device(const DeviceConfig& config, std::unique_ptr<ControlDevice> control,
               std::unique_ptr<Storage> storage, uint32_t dev_id)
    : config_(config), control_(std::move(control)), storage_(std::move(storage)), dev_id_(dev_id) {
  kernel_features_ = control_->features();
}

std::string Device::block_path() const { return absl::StrCat("/dev/ublkb", dev_id_); }
std::string Device::char_path() const { return absl::StrCat("/dev/ublkc", dev_id_); }

absl::StatusOr<std::unique_ptr<Device>> Device::Create(const DeviceConfig& config) {
  if (absl::Status valid = ValidateDeviceConfig(config); !valid.ok()) return valid;
  absl::StatusOr<std::unique_ptr<Storage>> storage = OpenStorage(config);
  if (!storage.ok()) return storage.status();
  absl::StatusOr<std::unique_ptr<ControlDevice>> control = ControlDevice::Open();
  if (!control.ok()) {
    (*storage)->AbandonCreated();
    return control.status();
  }

  const uint64_t flags = ChooseDeviceFlags((*control)->features(), config);
  absl::StatusOr<abi::CtrlDevInfo> info = (*control)->AddDev(BuildDevInfo(config, flags));
  if (!info.ok()) {
    (*storage)->AbandonCreated();
    return info.status();
  }

  // From here the kernel device exists: the Device owns it, and its destructor removes it.
  std::unique_ptr<Device> device(
      new Device(config, std::move(*control), std::move(*storage), info->dev_id));
  device->device_flags_ = flags;
  absl::Status started = device->StartQueuesAndDevice(info->max_io_buf_bytes);
  if (!started.ok()) {
    device->Stop(/*force=*/true).IgnoreError();
    device->storage_->AbandonCreated();
    return absl::Status(started.code(),
                        absl::StrCat("ublk device ", device->id(), ": ", started.message()));
  }
  return device;
}

absl::Status Device::StartQueuesAndDevice(uint32_t max_io_buf_bytes) {
  // The kernel may lower the buffer size it accepts; the per-tag buffers follow its value.
  const uint32_t max_io_bytes = std::min(max_io_buf_bytes, config_.max_io_bytes);
  if (absl::Status s = control_->SetParams(dev_id_, BuildParams(config_, max_io_bytes)); !s.ok()) {
    return s;
  }
  absl::StatusOr<UniqueFd> char_fd = OpenCharDevice(char_path());
  if (!char_fd.ok()) return char_fd.status();
  char_fd_ = std::move(*char_fd);

  for (uint16_t q = 0; q < config_.queues; ++q) {
    QueueSetup setup;
    setup.queue_id = q;
    setup.depth = config_.queue_depth;
    setup.max_io_bytes = max_io_bytes;
    setup.char_fd = char_fd_.get();
    setup.ioctl_encoding = (device_flags_ & abi::kFCmdIoctlEncode) != 0;
    absl::StatusOr<cpu_set_t> cpus = control_->GetQueueAffinity(dev_id_, q);
    if (!cpus.ok()) return cpus.status();
    setup.cpus = *cpus;
    absl::StatusOr<std::unique_ptr<Backend>> backend =
        storage_->NewQueueBackend(config_.queue_depth);
    if (!backend.ok()) return backend.status();
    setup.backend = std::move(*backend);
    absl::StatusOr<std::unique_ptr<Queue>> queue = Queue::Start(std::move(setup));
    if (!queue.ok()) return queue.status();
    queues_.push_back(std::move(*queue));
  }
  // Every queue has a fetch pending for every tag, so START_DEV does not wait forever.
  if (absl::Status s = control_->StartDev(dev_id_, ::getpid()); !s.ok()) return s;
  started_ = true;
  return absl::OkStatus();
}

Device::~Device() { Stop(/*force=*/true).IgnoreError(); }

absl::Status Device::RefuseIfOpen() {
  absl::StatusOr<DeviceNumber> number = DiskNumber(dev_id_);
  std::vector<std::string> openers;
  if (number.ok()) openers = FindOpeners(*number, absl::StrCat("ublkb", dev_id_));

  if (kernel_features_ & abi::kFSafeStopDev) {
    // The kernel decides atomically: stopped now, or EBUSY and untouched.
    absl::Status tried = control_->TryStopDev(dev_id_);
    if (tried.ok()) return absl::OkStatus();
    if (tried.code() != absl::StatusCode::kFailedPrecondition) return tried;
    if (openers.empty()) openers.push_back("an opener the scan did not find (kernel says busy)");
  }
  if (openers.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      block_path(), " is in use by ", absl::StrJoin(openers, ", "), "; stop it with force"));
}

absl::Status Device::Stop(bool force) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (deleted_) return absl::OkStatus();
  if (started_) {
    if (!force) {
      if (absl::Status refused = RefuseIfOpen(); !refused.ok()) return refused;
    }
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
  // covers kernels (and failed starts) where it does not.
  for (auto& queue : queues_) queue->RequestStop();
  for (auto& queue : queues_) queue->Join();
  queues_.clear();
  // The waiting DEL_DEV returns only once every reference is gone, our /dev/ublkcN included.
  char_fd_.Reset();
  absl::Status deleted = control_->DelDev(dev_id_, wait_for_delete);
  if (!deleted.ok() && deleted.code() != absl::StatusCode::kNotFound) return deleted;
  deleted_ = true;
  return absl::OkStatus();
}

}  // namespace blk::server
