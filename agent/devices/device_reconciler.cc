#include "agent/devices/device_reconciler.h"

#include "agent/devices/reconcile.h"
#include "spdlog/spdlog.h"

namespace blk::agent {

absl::StatusOr<std::unique_ptr<VolumeDevice>> DeviceReconciler::BringUp(
    const v1::Volume& spec, int& device_id, bool fresh, const ChooseFreeId& choose_free_id) {
  const KernelDeviceState state =
      device_id >= 0 && !fresh ? provisioner_.StateOf(device_id) : KernelDeviceState::kAbsent;
  const RestoreAction action = DecideRestore(device_id, state);
  if (action == RestoreAction::kRecover) {
    spdlog::info("volume {}: recovering ublk device {} (kernel state {})", spec.id(), device_id,
                 KernelDeviceStateName(state));
    return provisioner_.Recover(spec, device_id);
  }
  if (action == RestoreAction::kDeleteThenCreate) {
    spdlog::info("volume {}: removing half-created ublk device {}", spec.id(), device_id);
    if (absl::Status deleted = provisioner_.DeleteKernelDevice(device_id, /*force=*/false);
        !deleted.ok()) {
      return deleted;
    }
  }
  if (action != RestoreAction::kCreateWithAnyId) {
    absl::StatusOr<std::unique_ptr<VolumeDevice>> device =
        provisioner_.Provision(spec, device_id, fresh);
    if (device.ok() || device.status().code() != absl::StatusCode::kAlreadyExists) return device;
    spdlog::warn("volume {}: ublk device id {} was taken meanwhile; choosing another", spec.id(),
                 device_id);
  }
  // The new id is recorded before ADD_DEV: a crash in between leaves a device the next start
  // recognizes.
  absl::StatusOr<int> id = choose_free_id(device_id);
  if (!id.ok()) return id.status();
  device_id = *id;
  return provisioner_.Provision(spec, device_id, fresh);
}

std::vector<int> DeviceReconciler::UnknownKernelDevices(const std::set<int>& ours) {
  return UnknownDevices(provisioner_.KernelDeviceIds(), ours);
}

}  // namespace blk::agent
