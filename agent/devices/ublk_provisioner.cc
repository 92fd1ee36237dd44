#include "agent/devices/ublk_provisioner.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "agent/devices/volume_io_limits.h"
#include "agent/devices/volume_stats.h"
#include "server/local/file_backend.h"
#include "server/ublk/stop_guard.h"
#include "spdlog/spdlog.h"

namespace blk::agent {
namespace {

class UblkVolumeDevice final : public VolumeDevice {
 public:
  UblkVolumeDevice(std::unique_ptr<server::Device> device, const server::DeviceConfig& config)
      : device_(std::move(device)) {
    if (const auto* nbd = std::get_if<server::NbdBackendConfig>(&config.backend)) nbd_ = nbd->stats;
    if (const auto* file = std::get_if<server::FileBackendConfig>(&config.backend)) {
      file_ = file->stats;
      file_path_ = file->path;
    }
    if (const auto* nvme = std::get_if<server::NvmeBackendConfig>(&config.backend)) {
      nvme_ = nvme->stats;
      nvme_path_ = nvme->path;
    }
  }
  int id() const override { return device_->id(); }
  BackendFaults backend_faults() const override {
    if (nvme_) {
      return {.io_timeouts = nvme_->failover_timeouts.load(std::memory_order_relaxed),
              .nvme_failovers = nvme_->failovers.load(std::memory_order_relaxed)};
    }
    if (!nbd_) return {};
    return {.reconnects = nbd_->reconnects.load(std::memory_order_relaxed),
            .server_errors = nbd_->server_errors.load(std::memory_order_relaxed),
            .protocol_errors = nbd_->protocol_errors.load(std::memory_order_relaxed),
            .io_timeouts = nbd_->timeouts.load(std::memory_order_relaxed),
            .unflushed_losses = nbd_->unflushed_losses.load(std::memory_order_relaxed)};
  }
  std::string backend_lost() const override {
    if (!nvme_) return {};
    const uint64_t failed = nvme_->gone_errors.load(std::memory_order_relaxed);
    if (failed == 0) return {};
    const int32_t result = nvme_->gone_result.load(std::memory_order_relaxed);
    const std::string answer = result < 0 ? absl::StrCat(std::strerror(-result), " (", result, ")")
                                          : absl::StrCat("NVMe status 0x", absl::Hex(result));
    return absl::StrCat("NVMe namespace ", nvme_path_, " is gone: ", failed,
                        " requests failed with EIO (the kernel answered ", answer, ")");
  }
  std::string backing_shortfall(uint64_t volume_bytes) const override {
    if (!file_) return {};
    const uint64_t failed = file_->reads_past_end.load(std::memory_order_relaxed);
    if (failed == 0) return {};
    absl::StatusOr<std::optional<uint64_t>> size = server::ExistingBackingSize(file_path_);
    std::string now;
    if (!size.ok()) {
      now = std::string(size.status().message());
    } else if (!size->has_value()) {
      now = absl::StrCat("backing file ", file_path_, " is missing");
    } else if (**size >= volume_bytes) {
      return {};  // extended back: reads past the old end work again
    } else {
      now = absl::StrCat("backing file ", file_path_, " has ", **size, " bytes, fewer than the ",
                         volume_bytes, " of the volume");
    }
    return absl::StrCat(now, ": ", failed, failed == 1 ? " read" : " reads",
                        " past its end failed with EIO");
  }
  std::string block_path() const override { return device_->block_path(); }
  absl::StatusOr<v1::VolumeStats> Stats(const std::string& volume_id) const override {
    if (!device_->config().io_stats) {
      return absl::FailedPreconditionError(
          "I/O statistics are off on this agent (blkagent --metrics-address off)");
    }
    return SnapshotVolumeStats(volume_id, *device_);
  }
  absl::StatusOr<uint32_t> RqAffinity() const override { return device_->RqAffinity(); }
  absl::Status SetRqAffinity(uint32_t value) override { return device_->SetRqAffinity(value); }
  absl::Status SetLimits(const server::IoLimits& limits) override {
    return device_->SetLimits(limits);
  }
  server::ThrottleCounts throttle_counts() const override { return device_->throttle_counts(); }
  absl::Status Resize(uint64_t size_bytes) override { return device_->Resize(size_bytes); }
  bool RqAffinityRedirected() const override { return device_->rq_affinity_redirected(); }
  std::string copy_mode() const override { return device_->copy_mode(); }
  std::string io_mode() const override { return device_->io_mode(); }
  absl::Status Stop(bool force) override { return device_->Stop(force); }
  absl::Status Detach() override { return device_->Detach(); }

 private:
  std::unique_ptr<server::Device> device_;
  std::shared_ptr<server::nbd::Stats> nbd_;
  std::shared_ptr<server::NvmeStats> nvme_;
  std::shared_ptr<server::FileStats> file_;
  std::string file_path_;
  std::string nvme_path_;
};

}  // namespace

server::DeviceConfig DeviceConfigFor(const v1::Volume& spec) {
  server::DeviceConfig config;
  config.size_bytes = spec.size_bytes();
  config.logical_block_size = spec.logical_block_size();
  config.queues = static_cast<uint16_t>(spec.queues());
  config.queue_depth = static_cast<uint16_t>(spec.queue_depth());
  config.read_only = spec.read_only();
  config.fail_fast = spec.fail_fast();
  // Validated before: a placement that does not parse cannot get here.
  config.placement =
      server::ParseQueuePlacement(spec.placement()).value_or(server::QueuePlacement{});
  config.poll = spec.poll();
  config.limits = IoLimitsOf(spec.limits());
  switch (spec.backend_case()) {
    case v1::Volume::kFile:
      config.backend =
          server::FileBackendConfig{spec.file().path(), std::make_shared<server::FileStats>()};
      break;
    case v1::Volume::kNbd: {
      // 0 seconds means the default, as in the proto.
      const uint32_t seconds =
          spec.nbd().io_timeout_seconds() == 0 ? 30 : spec.nbd().io_timeout_seconds();
      config.backend = server::NbdBackendConfig{spec.nbd().uri(), seconds * 1000,
                                                std::make_shared<server::nbd::Stats>()};
      break;
    }
    case v1::Volume::kNvme:
      config.backend = server::NvmeBackendConfig{spec.nvme().path(), spec.nvme().offset_bytes(),
                                                 std::make_shared<server::NvmeStats>()};
      break;
    case v1::Volume::kNull:
    case v1::Volume::BACKEND_NOT_SET:
      config.backend = server::NullBackendConfig{};
      break;
  }
  return config;
}

UblkProvisioner::UblkProvisioner(bool io_stats, bool zero_copy, uint64_t rq_affinity_flag,
                                 std::chrono::milliseconds nbd_connect_timeout, bool batch_io,
                                 bool io_limits)
    : io_stats_(io_stats),
      zero_copy_(zero_copy),
      batch_io_(batch_io),
      io_limits_(io_limits),
      rq_affinity_flag_(rq_affinity_flag),
      nbd_connect_timeout_(nbd_connect_timeout) {}

absl::StatusOr<server::DeviceConfig> UblkProvisioner::ConfigFor(const v1::Volume& spec,
                                                                FabricNeed need) const {
  server::DeviceConfig config = DeviceConfigFor(spec);
  if (!io_limits_ && !config.limits.unlimited()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "volume '", spec.id(), "' has I/O limits, which are off on this agent (--io-limits off)"));
  }
  if (spec.has_nvme() && spec.nvme().has_fabric()) {
    absl::StatusOr<FabricAttachment> attached = fabric_attacher_(spec.nvme().fabric(), need);
    if (!attached.ok()) return attached.status();
    auto& nvme = std::get<server::NvmeBackendConfig>(config.backend);
    nvme.path = attached->head_path;
    nvme.path_failover_ms = FabricIoTimeoutMs(spec.nvme().fabric());
  }
  config.io_stats = io_stats_;
  config.zero_copy = zero_copy_;
  config.batch_io = batch_io_;
  config.io_limits = io_limits_;
  config.rq_affinity_flag = rq_affinity_flag_;
  if (auto* nbd = std::get_if<server::NbdBackendConfig>(&config.backend)) {
    nbd->connect_timeout_ms = static_cast<uint32_t>(nbd_connect_timeout_.count());
  }
  return config;
}

absl::StatusOr<std::unique_ptr<VolumeDevice>> UblkProvisioner::Provision(const v1::Volume& spec,
                                                                         int device_id,
                                                                         bool fresh) {
  const uint32_t id = device_id < 0 ? server::kAnyDeviceId : static_cast<uint32_t>(device_id);
  absl::StatusOr<server::DeviceConfig> config =
      ConfigFor(spec, fresh ? FabricNeed::kEveryPath : FabricNeed::kAnyPath);
  if (!config.ok()) return config.status();
  absl::StatusOr<std::unique_ptr<server::Device>> device = server::Device::Create(
      *config, id, fresh ? server::OpenPurpose::kCreate : server::OpenPurpose::kReopen);
  if (!device.ok()) return device.status();
  return std::make_unique<UblkVolumeDevice>(std::move(*device), *config);
}

absl::StatusOr<std::unique_ptr<VolumeDevice>> UblkProvisioner::Recover(const v1::Volume& spec,
                                                                       int device_id) {
  absl::StatusOr<server::DeviceConfig> attached = ConfigFor(spec, FabricNeed::kAnyPath);
  if (!attached.ok()) return attached.status();
  const server::DeviceConfig& config = *attached;
  absl::StatusOr<std::unique_ptr<server::Device>> device =
      server::Device::Recover(static_cast<uint32_t>(device_id), config);
  if (!device.ok()) return device.status();
  // The kernel's geometry wins (the device's queues are what ADD_DEV made); a spec that says
  // otherwise is worth a line, not a failed recovery.
  if (const std::string differences = server::GeometryDisagreement(config, (*device)->config());
      !differences.empty()) {
    spdlog::warn(
        "volume {}: ublk device {} recovered with the kernel's geometry, not the spec's: {}",
        spec.id(), device_id, differences);
  }
  return std::make_unique<UblkVolumeDevice>(std::move(*device), config);
}

KernelDeviceState UblkProvisioner::StateOf(int device_id) {
  absl::StatusOr<std::unique_ptr<server::ControlDevice>> control = server::ControlDevice::Open();
  if (!control.ok()) return KernelDeviceState::kUnknown;
  absl::StatusOr<server::abi::CtrlDevInfo> info =
      (*control)->GetDevInfo(static_cast<uint32_t>(device_id));
  if (!info.ok()) {
    return info.status().code() == absl::StatusCode::kNotFound ? KernelDeviceState::kAbsent
                                                               : KernelDeviceState::kUnknown;
  }
  switch (info->state) {
    case server::abi::kDevStateDead:
      return KernelDeviceState::kDead;
    case server::abi::kDevStateLive:
      return KernelDeviceState::kLive;
    case server::abi::kDevStateQuiesced:
      return KernelDeviceState::kQuiesced;
    case server::abi::kDevStateFailIo:
      return KernelDeviceState::kFailIo;
    default:
      return KernelDeviceState::kUnknown;
  }
}

std::vector<int> UblkProvisioner::KernelDeviceIds() {
  // /dev/ublkcN exists from ADD_DEV to DEL_DEV, started or not.
  std::vector<int> ids;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/dev", error)) {
    const std::string file_name = entry.path().filename().string();
    absl::string_view name = file_name;
    int id = 0;
    if (absl::ConsumePrefix(&name, "ublkc") && absl::SimpleAtoi(name, &id)) ids.push_back(id);
  }
  return ids;
}

absl::Status UblkProvisioner::DeleteKernelDevice(int device_id, bool force) {
  absl::StatusOr<std::unique_ptr<server::ControlDevice>> control = server::ControlDevice::Open();
  if (!control.ok()) return control.status();
  absl::StatusOr<server::abi::CtrlDevInfo> info =
      (*control)->GetDevInfo(static_cast<uint32_t>(device_id));
  if (!info.ok()) {
    return info.status().code() == absl::StatusCode::kNotFound ? absl::OkStatus() : info.status();
  }
  // A device that never started has no openers: wait, so its id is free for the re-create. One
  // that did may be held open by an application whose I/O would hang the wait.
  const bool wait = info->state == server::abi::kDevStateDead;
  if (!wait) {
    if (!force) {
      absl::Status refused = server::RefuseStopIfOpen(**control, static_cast<uint32_t>(device_id),
                                                      (*control)->features());
      if (!refused.ok()) return refused;
    }
    absl::Status stopped = (*control)->StopDev(static_cast<uint32_t>(device_id));
    if (!stopped.ok() && stopped.code() != absl::StatusCode::kNotFound) return stopped;
  }
  absl::Status deleted = (*control)->DelDev(static_cast<uint32_t>(device_id), wait);
  if (deleted.code() == absl::StatusCode::kNotFound) return absl::OkStatus();
  return deleted;
}

}  // namespace blk::agent
