// Bringing a volume's device up against what the kernel has: recover a device a previous agent
// left, re-create a missing one under its old number, remove a half-created one first. The
// decisions are DecideRestore's (agent/devices/reconcile.h); this carries them out.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/devices/volume_device.h"
#include "blk/v1/volume.pb.h"

namespace blk::agent {

class DeviceReconciler {
 public:
  // Picks and records a free kernel id in place of `taken_id`, which another program took.
  using ChooseFreeId = std::function<absl::StatusOr<int>(int taken_id)>;

  explicit DeviceReconciler(DeviceProvisioner& provisioner) : provisioner_(provisioner) {}

  // A running device for `spec` under `device_id` (updated when another id had to be chosen).
  // A `fresh` volume's id was just chosen among the free ones: nothing to reconcile. Blocking
  // (a recovery waits for the old server, an NBD dial may take its timeout): call without locks.
  absl::StatusOr<std::unique_ptr<VolumeDevice>> BringUp(const v1::Volume& spec, int& device_id,
                                                        bool fresh,
                                                        const ChooseFreeId& choose_free_id);

  // ublk devices the kernel has that are not in `ours`: never touched, only reported.
  std::vector<int> UnknownKernelDevices(const std::set<int>& ours);

 private:
  DeviceProvisioner& provisioner_;
};

}  // namespace blk::agent
