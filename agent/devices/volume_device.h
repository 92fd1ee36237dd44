#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "agent/devices/reconcile.h"
#include "blk/v1/volume.pb.h"
#include "server/qos/io_limits.h"

namespace blk::agent {

// What went wrong with a volume's backend since its device came up (NBD; all 0 elsewhere).
struct BackendFaults {
  uint64_t reconnects = 0;
  uint64_t server_errors = 0;
  uint64_t protocol_errors = 0;
  uint64_t io_timeouts = 0;
  uint64_t unflushed_losses = 0;
  uint64_t nvme_failovers = 0;  // NVMe/TCP: commands resubmitted on another path
};

// The block device that serves one volume, as the volume table sees it.
class VolumeDevice {
 public:
  virtual ~VolumeDevice() = default;
  virtual int id() const = 0;
  virtual std::string block_path() const = 0;
  virtual BackendFaults backend_faults() const { return {}; }
  // Why the backend can serve no more I/O (an NVMe namespace that went away), "" while it can.
  virtual std::string backend_lost() const { return {}; }
  // Why the backing cannot hold the whole volume of `volume_bytes` right now (a file truncated
  // under it, whose reads past its end failed with EIO), "" while it can.
  virtual std::string backing_shortfall(uint64_t /*volume_bytes*/) const { return {}; }
  // I/O statistics since the device came up (see SnapshotVolumeStats); FailedPrecondition when
  // the device keeps none. Called with the volume table locked: no waiting.
  virtual absl::StatusOr<v1::VolumeStats> Stats(const std::string& volume_id) const {
    return absl::FailedPreconditionError(
        absl::StrCat("volume '", volume_id, "': its device keeps no I/O statistics"));
  }
  // The block queue's rq_affinity (0..2), read from the kernel now.
  virtual absl::StatusOr<uint32_t> RqAffinity() const {
    return absl::UnimplementedError("this device has no block queue settings");
  }
  virtual absl::Status SetRqAffinity(uint32_t /*value*/) {
    return absl::UnimplementedError("this device has no block queue settings");
  }
  // Replaces the device's I/O limits while it serves I/O; see server::Device::SetLimits.
  virtual absl::Status SetLimits(const server::IoLimits& /*limits*/) {
    return absl::UnimplementedError("this device has no I/O limits");
  }
  // What the limits held back since the device came up.
  virtual server::ThrottleCounts throttle_counts() const { return {}; }
  // Grows the device (and its backend) to `size_bytes` while it serves I/O; see
  // server::Device::Resize.
  virtual absl::Status Resize(uint64_t /*size_bytes*/) {
    return absl::FailedPreconditionError("this device cannot be resized");
  }
  // Whether the kernel completes requests where rq_affinity says
  // (UBLK_F_SUPPORT_RQ_AFFINITY offered and granted).
  virtual bool RqAffinityRedirected() const { return false; }
  // "copy" or "zero_copy" (see VolumeStatus.copy_mode).
  virtual std::string copy_mode() const { return "copy"; }
  // "classic" or "batch" (see VolumeStatus.io_mode).
  virtual std::string io_mode() const { return "classic"; }
  // force=false refuses (FAILED_PRECONDITION) while the device is open.
  virtual absl::Status Stop(bool force) = 0;
  // Leaves the kernel device in place for the next agent (upgrade, restart); left even when an
  // error says something went wrong on the way.
  virtual absl::Status Detach() = 0;
};

// Turns a validated, normalized volume spec into a running device, and shows
// the kernel's side of things for reconciling at start.
class DeviceProvisioner {
 public:
  virtual ~DeviceProvisioner() = default;
  // device_id: the kernel id to use; -1 lets the kernel choose. `fresh`: a new volume, whose
  // backing may be made; otherwise one served before (a restore after a reboot, a retry),
  // whose data must be there: a missing backing file is an error, never re-created empty.
  virtual absl::StatusOr<std::unique_ptr<VolumeDevice>> Provision(const v1::Volume& spec,
                                                                  int device_id, bool fresh) = 0;
  // Takes over a device a previous agent left (killed, or exited for an upgrade).
  virtual absl::StatusOr<std::unique_ptr<VolumeDevice>> Recover(const v1::Volume& spec,
                                                                int device_id) = 0;
  virtual KernelDeviceState StateOf(int device_id) = 0;
  // Every ublk device id the kernel has, ours or not.
  virtual std::vector<int> KernelDeviceIds() = 0;
  // Removes a kernel device nothing serves: one that never started (a crash between ADD_DEV and
  // START_DEV), or a degraded volume's that a previous agent left. Without `force`, a started
  // device that is open is refused (FAILED_PRECONDITION naming its openers) and left as it is.
  virtual absl::Status DeleteKernelDevice(int device_id, bool force) = 0;
};

}  // namespace blk::agent
