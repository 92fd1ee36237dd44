#pragma once

#include "agent/volume_device.h"
#include "server/device.h"

namespace blk::agent {

// Maps a volume spec onto the ublk data path's DeviceConfig.
server::DeviceConfig DeviceConfigFor(const v1::Volume& spec);

// Provisions real ublk devices through server::Device.
class UblkProvisioner final : public DeviceProvisioner {
 public:
  absl::StatusOr<std::unique_ptr<VolumeDevice>> Provision(const v1::Volume& spec,
                                                          int device_id) override;
  absl::StatusOr<std::unique_ptr<VolumeDevice>> Recover(const v1::Volume& spec,
                                                        int device_id) override;
  KernelDeviceState StateOf(int device_id) override;
  std::vector<int> KernelDeviceIds() override;
  absl::Status DeleteKernelDevice(int device_id) override;
};

}  // namespace blk::agent
