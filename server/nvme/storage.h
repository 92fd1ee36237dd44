// A volume on an NVMe namespace, served through io_uring passthrough on its generic char device.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "common/unique_fd.h"
#include "server/backend.h"
#include "server/backend_config.h"
#include "server/nvme/command.h"
#include "server/ublk/device_config.h"

namespace blk::server {

class NvmeStorage final : public Storage {
 public:
  // Opens the char device (a block device, another file or a missing path: InvalidArgument naming
  // it), identifies the namespace (metadata formats and inactive namespaces refused) and places
  // the volume: config.size_bytes at nvme.offset_bytes, both multiples of the LBA size, inside
  // the namespace, with a logical block size no smaller than the LBA size.
  static absl::StatusOr<std::unique_ptr<NvmeStorage>> Open(const NvmeBackendConfig& nvme,
                                                           const DeviceConfig& config);
  absl::StatusOr<std::unique_ptr<Backend>> NewQueueBackend(uint16_t queue_depth) override;
  StorageTraits traits() const override;
  // Identifies the namespace again (it may have grown) and raises the extent every queue checks
  // its requests against; the rules and errors are nvme::GrownSizeBlocks's (beyond the
  // namespace: FailedPrecondition naming its size). Overlap with other volumes on the namespace is
  // the caller's to check.
  absl::Status Grow(uint64_t size_bytes) override;

  const nvme::NamespaceTarget& target() const { return target_; }

 private:
  NvmeStorage(UniqueFd fd, std::string path, const nvme::NamespaceTarget& target,
              const DeviceConfig& config, std::shared_ptr<NvmeStats> stats,
              uint32_t path_failover_ms)
      : fd_(std::move(fd)),
        path_(std::move(path)),
        target_(target),
        size_blocks_(std::make_shared<std::atomic<uint64_t>>(target.size_blocks)),
        config_(config),
        stats_(std::move(stats)),
        path_failover_ms_(path_failover_ms) {}

  UniqueFd fd_;
  std::string path_;
  nvme::NamespaceTarget target_;  // size_blocks as at Open; the queues read size_blocks_
  std::shared_ptr<std::atomic<uint64_t>> size_blocks_;
  DeviceConfig config_;
  std::shared_ptr<NvmeStats> stats_;
  uint32_t path_failover_ms_;
};

// What a namespace offers a volume, for checks before a device is created. Opens `path` like
// NvmeStorage::Open and issues Identify.
struct NvmeNamespaceInfo {
  uint64_t size_bytes = 0;
  uint32_t lba_bytes = 0;
  bool deallocated_reads_zeroes = false;
};
absl::StatusOr<NvmeNamespaceInfo> ProbeNvmeNamespace(const std::string& path);

}  // namespace blk::server
