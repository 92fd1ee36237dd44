#include "server/ublk/control.h"

#include <fcntl.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "server/ublk/uring_cmd.h"

namespace blk::server {
namespace {

constexpr uint16_t kNoQueue = 0xffff;

}  // namespace

abi::CtrlCmd DeviceCmd(uint32_t dev_id) {
  abi::CtrlCmd cmd{};
  cmd.dev_id = dev_id;
  cmd.queue_id = kNoQueue;
  return cmd;
}

absl::StatusOr<std::unique_ptr<ControlDevice>> ControlDevice::Open() {
  UniqueFd fd(::open(kUblkControlPath, O_RDWR | O_CLOEXEC));
  if (!fd.valid()) {
    int err = errno;
    std::string hint = err == ENOENT ? " (is the ublk_drv module loaded?)" : "";
    return absl::ErrnoToStatus(err, absl::StrCat("open ", kUblkControlPath, hint));
  }
  io_uring ring;
  int rc = io_uring_queue_init(4, &ring, IORING_SETUP_SQE128);
  if (rc < 0) {
    return absl::ErrnoToStatus(-rc, "io_uring_queue_init(SQE128) for the ublk control device");
  }
  std::unique_ptr<ControlDevice> control(new ControlDevice(std::move(fd), ring));

  uint64_t features = 0;
  abi::CtrlCmd cmd = DeviceCmd(0);
  cmd.addr = reinterpret_cast<uint64_t>(&features);
  cmd.len = sizeof(features);
  // GET_FEATURES has only the ioctl encoding; older kernels reject it (EINVAL/EOPNOTSUPP), which
  // means "no optional features, legacy opcodes".
  absl::StatusOr<int> res =
      control->Execute("GET_FEATURES", abi::kUCmdGetFeatures, abi::kUCmdGetFeatures, cmd);
  control->features_ = res.ok() ? features : 0;
  return control;
}

ControlDevice::~ControlDevice() { io_uring_queue_exit(&ring_); }

absl::StatusOr<int> ControlDevice::Execute(const char* name, uint32_t legacy_op, uint32_t ioctl_op,
                                           abi::CtrlCmd cmd) {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) return absl::InternalError(absl::StrCat(name, ": control ring is full"));
  PrepUblkCtrlCmd(sqe, fd_.get(), uses_ioctl_encoding() ? ioctl_op : legacy_op, cmd);
  int rc = io_uring_submit(&ring_);
  if (rc < 0) return absl::ErrnoToStatus(-rc, absl::StrCat("submit ublk ", name));
  io_uring_cqe* cqe = nullptr;
  do {
    rc = io_uring_wait_cqe(&ring_, &cqe);
  } while (rc == -EINTR);
  if (rc < 0) return absl::ErrnoToStatus(-rc, absl::StrCat("wait for ublk ", name));
  int res = cqe->res;
  io_uring_cqe_seen(&ring_, cqe);
  if (res < 0) {
    return absl::ErrnoToStatus(-res, absl::StrCat("ublk ", name, " (dev ", cmd.dev_id, ")"));
  }
  return res;
}

absl::StatusOr<abi::CtrlDevInfo> ControlDevice::AddDev(const abi::CtrlDevInfo& info) {
  abi::CtrlDevInfo out = info;
  abi::CtrlCmd cmd = DeviceCmd(info.dev_id);
  cmd.addr = reinterpret_cast<uint64_t>(&out);
  cmd.len = sizeof(out);
  absl::StatusOr<int> res = Execute("ADD_DEV", abi::kCmdAddDev, abi::kUCmdAddDev, cmd);
  if (!res.ok()) return res.status();
  return out;
}

absl::Status ControlDevice::SetParams(uint32_t dev_id, const abi::Params& params) {
  abi::Params copy = params;
  copy.len = sizeof(copy);
  abi::CtrlCmd cmd = DeviceCmd(dev_id);
  cmd.addr = reinterpret_cast<uint64_t>(&copy);
  cmd.len = sizeof(copy);
  return Execute("SET_PARAMS", abi::kCmdSetParams, abi::kUCmdSetParams, cmd).status();
}

absl::StatusOr<cpu_set_t> ControlDevice::GetQueueAffinity(uint32_t dev_id, uint16_t queue) {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  abi::CtrlCmd cmd = DeviceCmd(dev_id);
  cmd.queue_id = queue;
  cmd.addr = reinterpret_cast<uint64_t>(&cpus);
  cmd.len = sizeof(cpus);
  // The queue is passed in data[0] as well: that is where the kernel reads it from.
  cmd.data[0] = queue;
  absl::StatusOr<int> res =
      Execute("GET_QUEUE_AFFINITY", abi::kCmdGetQueueAffinity, abi::kUCmdGetQueueAffinity, cmd);
  if (!res.ok()) return res.status();
  return cpus;
}

absl::StatusOr<abi::CtrlDevInfo> ControlDevice::GetDevInfo(uint32_t dev_id) {
  abi::CtrlDevInfo info{};
  abi::CtrlCmd cmd = DeviceCmd(dev_id);
  cmd.addr = reinterpret_cast<uint64_t>(&info);
  cmd.len = sizeof(info);
  absl::StatusOr<int> res = Execute("GET_DEV_INFO", abi::kCmdGetDevInfo, abi::kUCmdGetDevInfo, cmd);
  if (!res.ok()) return res.status();
  return info;
}

absl::Status ControlDevice::StartDev(uint32_t dev_id, pid_t server_pid) {
  abi::CtrlCmd cmd = DeviceCmd(dev_id);
  cmd.data[0] = static_cast<uint64_t>(server_pid);
  return Execute("START_DEV", abi::kCmdStartDev, abi::kUCmdStartDev, cmd).status();
}

absl::Status ControlDevice::StopDev(uint32_t dev_id) {
  return Execute("STOP_DEV", abi::kCmdStopDev, abi::kUCmdStopDev, DeviceCmd(dev_id)).status();
}

absl::Status ControlDevice::StartUserRecovery(uint32_t dev_id) {
  return Execute("START_USER_RECOVERY", abi::kCmdStartUserRecovery, abi::kUCmdStartUserRecovery,
                 DeviceCmd(dev_id))
      .status();
}

absl::Status ControlDevice::EndUserRecovery(uint32_t dev_id, pid_t server_pid) {
  abi::CtrlCmd cmd = DeviceCmd(dev_id);
  cmd.data[0] = static_cast<uint64_t>(server_pid);
  return Execute("END_USER_RECOVERY", abi::kCmdEndUserRecovery, abi::kUCmdEndUserRecovery, cmd)
      .status();
}

absl::Status ControlDevice::TryStopDev(uint32_t dev_id) {
  return Execute("TRY_STOP_DEV", abi::kUCmdTryStopDev, abi::kUCmdTryStopDev, DeviceCmd(dev_id))
      .status();
}

absl::Status ControlDevice::UpdateSize(uint32_t dev_id, uint64_t sectors) {
  abi::CtrlCmd cmd = DeviceCmd(dev_id);
  cmd.data[0] = sectors;
  // Only the ioctl encoding exists, as for TRY_STOP_DEV.
  return Execute("UPDATE_SIZE", abi::kUCmdUpdateSize, abi::kUCmdUpdateSize, cmd).status();
}

absl::Status ControlDevice::DelDev(uint32_t dev_id, bool wait) {
  if (!wait && uses_ioctl_encoding()) {
    absl::Status deleted =
        Execute("DEL_DEV_ASYNC", abi::kUCmdDelDevAsync, abi::kUCmdDelDevAsync, DeviceCmd(dev_id))
            .status();
    // Kernels before 6.9 do not know the command (EINVAL, or EOPNOTSUPP).
    if (deleted.code() != absl::StatusCode::kInvalidArgument &&
        deleted.code() != absl::StatusCode::kUnimplemented) {
      return deleted;
    }
  }
  return Execute("DEL_DEV", abi::kCmdDelDev, abi::kUCmdDelDev, DeviceCmd(dev_id)).status();
}

}  // namespace blk::server
