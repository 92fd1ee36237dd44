#pragma once

#include "agent/volume_device.h"
#include "server/ublk/device.h"

namespace blk::agent {

// Maps a volume spec onto the ublk data path's DeviceConfig.
server::DeviceConfig DeviceConfigFor(const v1::Volume& spec);

// Provisions real ublk devices through server::Device.
class UblkProvisioner final : public DeviceProvisioner {
 public:
  // io_stats=false: the devices skip all per-I/O statistics work (blkagent --metrics-address off).
  // zero_copy=false: every device in copy mode, even where zero copy is possible.
  explicit UblkProvisioner(bool io_stats = true, bool zero_copy = true)
      : io_stats_(io_stats), zero_copy_(zero_copy) {}
  absl::StatusOr<std::unique_ptr<VolumeDevice>> Provision(const v1::Volume& spec,
                                                          int device_id) override;
  absl::StatusOr<std::unique_ptr<VolumeDevice>> Recover(const v1::Volume& spec,
                                                        int device_id) override;
  KernelDeviceState StateOf(int device_id) override;
  std::vector<int> KernelDeviceIds() override;
  absl::Status DeleteKernelDevice(int device_id) override;

 private:
  server::DeviceConfig ConfigFor(const v1::Volume& spec) const;

  bool io_stats_;
  bool zero_copy_;
};

}  // namespace blk::agent
