#include "agent/ublk_provisioner.h"

namespace blk::agent {
namespace {

class UblkVolumeDevice final : public VolumeDevice {
 public:
  explicit UblkVolumeDevice(std::unique_ptr<server::Device> device) : device_(std::move(device)) {}
  int id() const override { return device_->id(); }
  std::string block_path() const override { return device_->block_path(); }
  absl::Status Stop(bool force) override { return device_->Stop(force); }

 private:
  std::unique_ptr<server::Device> device_;
};

}  // namespace

server::DeviceConfig DeviceConfigFor(const v1::Volume& spec) {
  server::DeviceConfig config;
  config.size_bytes = spec.size_bytes();
  config.logical_block_size = spec.logical_block_size();
  config.queues = static_cast<uint16_t>(spec.queues());
  config.queue_depth = static_cast<uint16_t>(spec.queue_depth());
  config.read_only = spec.read_only();
  switch (spec.backend_case()) {
    case v1::Volume::kFile:
      config.backend = server::FileBackendConfig{spec.file().path()};
      break;
    case v1::Volume::kNbd: {
      // 0 seconds means the default, as in the proto.
      const uint32_t seconds =
          spec.nbd().io_timeout_seconds() == 0 ? 30 : spec.nbd().io_timeout_seconds();
      config.backend = server::NbdBackendConfig{spec.nbd().uri(), seconds * 1000, nullptr};
      break;
    }
    case v1::Volume::kNull:
    case v1::Volume::BACKEND_NOT_SET:
      config.backend = server::NullBackendConfig{};
      break;
  }
  return config;
}

absl::StatusOr<std::unique_ptr<VolumeDevice>> UblkProvisioner::Provision(const v1::Volume& spec) {
  absl::StatusOr<std::unique_ptr<server::Device>> device =
      server::Device::Create(DeviceConfigFor(spec));
  if (!device.ok()) return device.status();
  return std::make_unique<UblkVolumeDevice>(std::move(*device));
}

}  // namespace blk::agent
