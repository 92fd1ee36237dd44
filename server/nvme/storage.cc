#include "server/nvme/storage.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "server/nvme/admin.h"
#include "server/nvme/backend.h"

namespace blk::server {
namespace {

absl::Status PathError(const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("nvme backend ", path, ": ", what));
}

absl::StatusOr<UniqueFd> OpenNamespace(const std::string& path, bool read_only) {
  if (path.empty() || path.front() != '/') return PathError(path, "the path must be absolute");
  struct stat st {};
  // Whatever errno says, a namespace path that cannot be used is a problem of the volume's spec.
  if (::stat(path.c_str(), &st) != 0) {
    return absl::InvalidArgumentError(
        absl::ErrnoToStatus(errno, absl::StrCat("nvme backend ", path)).message());
  }
  if (S_ISBLK(st.st_mode)) {
    return PathError(path,
                     "is a block device; NVMe volumes use the namespace's generic char device "
                     "(/dev/ngXnY, e.g. /dev/ng0n1 for /dev/nvme0n1)");
  }
  if (!S_ISCHR(st.st_mode)) {
    return PathError(path, "is not a character device (expected /dev/ngXnY)");
  }
  UniqueFd fd(::open(path.c_str(), (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC));
  if (!fd.valid()) {
    return absl::InvalidArgumentError(
        absl::ErrnoToStatus(errno, absl::StrCat("nvme backend ", path, ": open")).message());
  }
  return fd;
}

absl::StatusOr<nvme::NamespaceProfile> Identify(const std::string& path, int fd) {
  absl::StatusOr<nvme::NamespaceProfile> profile = nvme::IdentifyNamespace(fd);
  if (!profile.ok()) {
    return absl::Status(profile.status().code(),
                        absl::StrCat("nvme backend ", path, ": ", profile.status().message()));
  }
  return profile;
}

}  // namespace

absl::StatusOr<std::unique_ptr<NvmeStorage>> NvmeStorage::Open(const NvmeBackendConfig& nvme,
                                                               const DeviceConfig& config) {
  absl::StatusOr<UniqueFd> fd = OpenNamespace(nvme.path, config.read_only);
  if (!fd.ok()) return fd.status();
  absl::StatusOr<nvme::NamespaceProfile> profile = Identify(nvme.path, fd->get());
  if (!profile.ok()) return profile.status();
  if (config.logical_block_size < profile->format.lba_bytes) {
    return PathError(nvme.path,
                     absl::StrCat("the volume's logical block size of ", config.logical_block_size,
                                  " bytes is smaller than the namespace's LBA size of ",
                                  profile->format.lba_bytes, " bytes"));
  }
  absl::StatusOr<nvme::NamespaceTarget> target =
      nvme::MakeNamespaceTarget(*profile, nvme.offset_bytes, config.size_bytes);
  if (!target.ok()) return PathError(nvme.path, target.status().message());
  return std::unique_ptr<NvmeStorage>(new NvmeStorage(std::move(*fd), nvme.path, *target, config,
                                                      nvme.stats, nvme.path_failover_ms));
}

StorageTraits NvmeStorage::traits() const {
  StorageTraits traits;
  traits.discard = target_.dataset_management;
  traits.write_zeroes = target_.write_zeroes;
  traits.volatile_cache = target_.volatile_write_cache;
  // Write Zeroes carries no data, so MDTS does not bound it; requests within one command's NLB
  // reach keep the per-tag command arrays small.
  traits.max_write_zeroes_bytes =
      target_.write_zeroes ? uint64_t{nvme::kMaxBlocksPerCommand} << target_.lba_shift : 0;
  traits.big_ring_entries = true;
  traits.zero_copy = true;
  traits.registered_buffers = true;
  // Data requests split at MDTS; a discard is one DSM, a write-zeroes one command (see above).
  traits.max_sqes_per_io = nvme::MaxCommandsPerRequest(target_, config_.max_io_bytes);
  return traits;
}

absl::Status NvmeStorage::Grow(uint64_t size_bytes) {
  absl::StatusOr<nvme::NamespaceProfile> profile = Identify(path_, fd_.get());
  if (!profile.ok()) return profile.status();
  nvme::NamespaceTarget current = target_;
  current.size_blocks = size_blocks_->load(std::memory_order_relaxed);
  absl::StatusOr<uint64_t> blocks =
      nvme::GrownSizeBlocks(current, profile->format.size_bytes(), size_bytes);
  if (!blocks.ok()) {
    return absl::Status(blocks.status().code(),
                        absl::StrCat("nvme backend ", path_, ": ", blocks.status().message()));
  }
  // Before the kernel grows the device: no request beyond the old end comes earlier.
  size_blocks_->store(*blocks, std::memory_order_release);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Backend>> NvmeStorage::NewQueueBackend(uint16_t queue_depth) {
  return std::make_unique<NvmeBackend>(fd_.get(), target_, queue_depth, config_.max_io_bytes,
                                       stats_, size_blocks_, path_failover_ms_);
}

absl::StatusOr<NvmeNamespaceInfo> ProbeNvmeNamespace(const std::string& path) {
  absl::StatusOr<UniqueFd> fd = OpenNamespace(path, /*read_only=*/true);
  if (!fd.ok()) return fd.status();
  absl::StatusOr<nvme::NamespaceProfile> profile = Identify(path, fd->get());
  if (!profile.ok()) return profile.status();
  NvmeNamespaceInfo info;
  info.size_bytes = profile->format.size_bytes();
  info.lba_bytes = profile->format.lba_bytes;
  info.deallocated_reads_zeroes = profile->format.deallocated_reads_zeroes;
  return info;
}

}  // namespace blk::server
