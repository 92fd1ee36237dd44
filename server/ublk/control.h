#pragma once

#include <liburing.h>
#include <sched.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/unique_fd.h"
#include "server/ublk/abi.h"

namespace blk::server {

inline constexpr char kUblkControlPath[] = "/dev/ublk-control";

// /dev/ublk-control: issues control commands one at a time as URING_CMDs on a private 128-byte-SQE
// ring. Not thread-safe; each owner (one Device, one probe) has its own.
class ControlDevice {
 public:
  // Opens the control device and asks GET_FEATURES. Kernels before 6.5 lack GET_FEATURES: their
  // features are 0 and commands use the legacy opcodes.
  static absl::StatusOr<std::unique_ptr<ControlDevice>> Open();
  ~ControlDevice();
  ControlDevice(const ControlDevice&) = delete;
  ControlDevice& operator=(const ControlDevice&) = delete;

  uint64_t features() const { return features_; }
  bool uses_ioctl_encoding() const { return (features_ & abi::kFCmdIoctlEncode) != 0; }

  // dev_id in `info` may be UINT32_MAX to let the kernel choose. Returns the kernel's view.
  absl::StatusOr<abi::CtrlDevInfo> AddDev(const abi::CtrlDevInfo& info);
  absl::Status SetParams(uint32_t dev_id, const abi::Params& params);
  absl::StatusOr<cpu_set_t> GetQueueAffinity(uint32_t dev_id, uint16_t queue);
  absl::StatusOr<abi::CtrlDevInfo> GetDevInfo(uint32_t dev_id);
  // Blocks until every queue has a FETCH_REQ pending for every tag.
  absl::Status StartDev(uint32_t dev_id, pid_t server_pid);
  absl::Status StopDev(uint32_t dev_id);
  // User recovery (UBLK_F_USER_RECOVERY): START on a quiesced device whose server is gone, then a
  // new server opens /dev/ublkcN and fetches on every tag, then END (blocks until every queue has
  // fetched, like START_DEV) makes the device live again with `server_pid` as its server.
  absl::Status StartUserRecovery(uint32_t dev_id);
  absl::Status EndUserRecovery(uint32_t dev_id, pid_t server_pid);
  // Only with UBLK_F_SAFE_STOP_DEV: FailedPrecondition when the block device is open.
  absl::Status TryStopDev(uint32_t dev_id);
  // Only with UBLK_F_UPDATE_SIZE (6.14+): sets a started device's capacity to `sectors` (512-byte
  // units) and tells the block layer, which announces it to users (a KOBJ_CHANGE uevent).
  absl::Status UpdateSize(uint32_t dev_id, uint64_t sectors);
  // Removes the device. With `wait`, returns once every reference is gone (including openers of
  // /dev/ublkbN and /dev/ublkcN), so the id is free again. Without, uses DEL_DEV_ASYNC (6.9+)
  // where the kernel has it: the nodes vanish at once and the id is freed when the last opener
  // closes; older kernels only have the waiting form.
  absl::Status DelDev(uint32_t dev_id, bool wait);

 private:
  ControlDevice(UniqueFd fd, io_uring ring) : fd_(std::move(fd)), ring_(ring) {}
  // Returns the completion's result (>= 0) or an error naming the command and the errno.
  absl::StatusOr<int> Execute(const char* name, uint32_t legacy_op, uint32_t ioctl_op,
                              abi::CtrlCmd cmd);

  UniqueFd fd_;
  io_uring ring_;
  uint64_t features_ = 0;
};

// A CtrlCmd addressed to a device (queue_id = none).
abi::CtrlCmd DeviceCmd(uint32_t dev_id);

}  // namespace blk::server
