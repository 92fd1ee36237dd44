#pragma once

#include <chrono>
#include <cstdint>

#include "agent/devices/nvme_fabric.h"
#include "agent/devices/volume_device.h"
#include "server/backend_config.h"
#include "server/ublk/device.h"

namespace blk::agent {

// Maps a volume spec onto the ublk data path's DeviceConfig.
server::DeviceConfig DeviceConfigFor(const v1::Volume& spec);

// Provisions real ublk devices through server::Device.
class UblkProvisioner final : public DeviceProvisioner {
 public:
  // io_stats=false: the devices skip all per-I/O statistics work (blkagent --metrics-address off).
  // zero_copy=false: every device in copy mode, even where zero copy is possible.
  // rq_affinity_flag: DeviceConfig::rq_affinity_flag of every device (0: never asked for).
  // nbd_connect_timeout: NbdBackendConfig::connect_timeout_ms of every NBD volume.
  // batch_io=false: every new device uses the classic per-request commands, even where the
  // kernel offers UBLK_F_BATCH_IO.
  // io_limits=false: devices run without the throttling layer; volumes with limits are refused.
  explicit UblkProvisioner(bool io_stats = true, bool zero_copy = true,
                           uint64_t rq_affinity_flag = 0,
                           std::chrono::milliseconds nbd_connect_timeout =
                               std::chrono::milliseconds(server::kDefaultNbdConnectTimeoutMs),
                           bool batch_io = true, bool io_limits = true);
  absl::StatusOr<std::unique_ptr<VolumeDevice>> Provision(const v1::Volume& spec, int device_id,
                                                          bool fresh) override;
  absl::StatusOr<std::unique_ptr<VolumeDevice>> Recover(const v1::Volume& spec,
                                                        int device_id) override;
  KernelDeviceState StateOf(int device_id) override;
  std::vector<int> KernelDeviceIds() override;
  absl::Status DeleteKernelDevice(int device_id, bool force) override;

 private:
  // The device's configuration; a fabric volume's controllers are connected first (`need`) and
  // its namespace's current head is what the device serves.
  absl::StatusOr<server::DeviceConfig> ConfigFor(const v1::Volume& spec, FabricNeed need) const;

  bool io_stats_;
  bool zero_copy_;
  bool batch_io_;
  bool io_limits_;
  uint64_t rq_affinity_flag_;
  std::chrono::milliseconds nbd_connect_timeout_;
  FabricAttacher fabric_attacher_ = RealFabricAttacher();
};

}  // namespace blk::agent
