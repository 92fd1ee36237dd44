#include "agent/volumes/volume_validation.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/dns_label.h"
#include "server/nbd/uri.h"
#include "server/ublk/cpu_list.h"
#include "server/ublk/placement.h"
#include "server/ublk/rq_affinity.h"

namespace blk::agent {
namespace {

constexpr uint32_t kDefaultNbdIoTimeoutSeconds = 30;
constexpr uint32_t kMaxNbdIoTimeoutSeconds = 24 * 3600;

absl::Status Invalid(absl::string_view field, absl::string_view reason) {
  return absl::InvalidArgumentError(absl::StrCat("volume.", field, ": ", reason));
}

absl::Status ValidateFileBackend(const v1::FileBackend& file) {
  const std::string& path = file.path();
  if (path.empty()) return Invalid("file.path", "is required");
  if (path.front() != '/')
    return Invalid("file.path", absl::StrCat("'", path, "' is not absolute"));
  if (path.find('\0') != std::string::npos) return Invalid("file.path", "contains a NUL byte");
  if (path.back() == '/')
    return Invalid("file.path", absl::StrCat("'", path, "' names a directory"));

  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  struct stat st {};
  if (::stat(parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Invalid("file.path", absl::StrCat("directory '", parent.string(), "' does not exist"));
  }
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
    return Invalid("file.path",
                   absl::StrCat("'", path, "' is neither a regular file nor a block device"));
  }
  return absl::OkStatus();
}

absl::Status ValidateNbdBackend(const v1::NbdBackend& nbd) {
  if (nbd.uri().empty()) return Invalid("nbd.uri", "is required");
  absl::StatusOr<server::nbd::Address> address = server::nbd::ParseUri(nbd.uri());
  if (!address.ok()) return Invalid("nbd.uri", address.status().message());
  if (nbd.io_timeout_seconds() > kMaxNbdIoTimeoutSeconds) {
    return Invalid("nbd.io_timeout_seconds",
                   absl::StrCat(nbd.io_timeout_seconds(), " exceeds the maximum of ",
                                kMaxNbdIoTimeoutSeconds));
  }
  return absl::OkStatus();
}

absl::Status ValidatePlacement(const std::string& text) {
  absl::StatusOr<server::QueuePlacement> placement = server::ParseQueuePlacement(text);
  if (!placement.ok()) return Invalid("placement", placement.status().message());
  const std::vector<int> allowed = server::AllowedCpus();
  for (int cpu : placement->cpus) {
    if (!std::binary_search(allowed.begin(), allowed.end(), cpu)) {
      return Invalid("placement", absl::StrCat("CPU ", cpu, " is not one this agent may use (",
                                               server::FormatCpuList(allowed), ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateNvmeBackend(const v1::NvmeBackend& nvme) {
  const std::string& path = nvme.path();
  if (path.empty()) return Invalid("nvme.path", "is required (the namespace's /dev/ngXnY)");
  if (path.front() != '/') {
    return Invalid("nvme.path", absl::StrCat("'", path, "' is not absolute"));
  }
  if (path.find('\0') != std::string::npos) return Invalid("nvme.path", "contains a NUL byte");
  // The namespace's LBA size is checked when the namespace is probed; 512 is every format's unit.
  if (nvme.offset_bytes() % 512 != 0) {
    return Invalid("nvme.offset_bytes",
                   absl::StrCat(nvme.offset_bytes(), " is not a multiple of 512"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateRqAffinity(const v1::Volume& spec) {
  if (spec.has_rq_affinity() && spec.rq_affinity() > server::kMaxRqAffinity) {
    return Invalid("rq_affinity", absl::StrCat(spec.rq_affinity(), " is not 0, 1 or 2"));
  }
  return absl::OkStatus();
}

bool IsValidVolumeId(std::string_view id) { return IsDnsLabel(id); }

v1::Volume NormalizeVolumeSpec(const v1::Volume& requested) {
  v1::Volume spec = requested;
  spec.clear_status();
  // An nvme volume's default block size is its namespace's, filled in once it is probed.
  if (spec.logical_block_size() == 0 && !spec.has_nvme()) {
    spec.set_logical_block_size(kDefaultLogicalBlockSize);
  }
  if (spec.queues() == 0) spec.set_queues(kDefaultQueues);
  if (spec.queue_depth() == 0) spec.set_queue_depth(kDefaultQueueDepth);
  if (spec.has_nbd() && spec.nbd().io_timeout_seconds() == 0) {
    spec.mutable_nbd()->set_io_timeout_seconds(kDefaultNbdIoTimeoutSeconds);
  }
  // "", "hctx" mean the same, and so do "0-1" and "1,0"; text that does not parse is left for
  // validation to report.
  absl::StatusOr<server::QueuePlacement> placement = server::ParseQueuePlacement(spec.placement());
  if (placement.ok()) spec.set_placement(server::FormatQueuePlacement(*placement));
  return spec;
}

absl::Status ValidateVolumeSpec(const v1::Volume& spec) {
  if (!IsValidVolumeId(spec.id())) {
    return Invalid("id",
                   absl::StrCat("'", spec.id(),
                                "' is not a DNS label (1-63 lowercase letters, digits or '-', "
                                "starting and ending with a letter or digit)"));
  }
  // An nvme volume without a block size takes its namespace's (resolved before provisioning).
  const bool nvme = spec.backend_case() == v1::Volume::kNvme;
  const uint32_t block_size = spec.logical_block_size();
  if (block_size != 512 && block_size != 4096 && !(nvme && block_size == 0)) {
    return Invalid("logical_block_size", absl::StrCat(block_size, " is not 512 or 4096"));
  }
  // An NBD volume without a size takes the export's, an nvme one the namespace's (resolved
  // before provisioning).
  if (spec.size_bytes() == 0 && spec.backend_case() != v1::Volume::kNbd && !nvme) {
    return Invalid("size_bytes", "must be greater than 0 (only nbd and nvme volumes may omit it)");
  }
  if (block_size != 0 && spec.size_bytes() % block_size != 0) {
    return Invalid("size_bytes",
                   absl::StrCat(spec.size_bytes(), " is not a multiple of the logical block size ",
                                block_size));
  }
  if (spec.size_bytes() > kMaxSizeBytes) {
    return Invalid("size_bytes", absl::StrCat(spec.size_bytes(), " exceeds the maximum of ",
                                              kMaxSizeBytes, " (1 PiB)"));
  }
  if (spec.queues() > kMaxQueues) {
    return Invalid("queues", absl::StrCat(spec.queues(), " exceeds the maximum of ", kMaxQueues));
  }
  if (spec.queue_depth() > kMaxQueueDepth) {
    return Invalid("queue_depth",
                   absl::StrCat(spec.queue_depth(), " exceeds the maximum of ", kMaxQueueDepth));
  }
  if (absl::Status valid = ValidateRqAffinity(spec); !valid.ok()) return valid;
  if (absl::Status valid = ValidatePlacement(spec.placement()); !valid.ok()) return valid;
  switch (spec.backend_case()) {
    case v1::Volume::kNull:
      return absl::OkStatus();
    case v1::Volume::kFile:
      return ValidateFileBackend(spec.file());
    case v1::Volume::kNbd:
      return ValidateNbdBackend(spec.nbd());
    case v1::Volume::kNvme:
      return ValidateNvmeBackend(spec.nvme());
    case v1::Volume::BACKEND_NOT_SET:
      break;
  }
  return Invalid("backend", "is required (one of: null, file, nbd, nvme)");
}

namespace {

// The fields UpdateVolume may change.
constexpr const char* kUpdatable[] = {"rq_affinity"};

}  // namespace

absl::Status ValidateVolumeUpdate(const v1::Volume& changes,
                                  const google::protobuf::FieldMask& mask) {
  if (!IsValidVolumeId(changes.id())) {
    return absl::InvalidArgumentError(
        absl::StrCat("volume.id: '", changes.id(), "' is not a valid volume id"));
  }
  if (mask.paths_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "update_mask: names no field (updatable: ", absl::StrJoin(kUpdatable, ", "), ")"));
  }
  for (const std::string& path : mask.paths()) {
    if (std::find_if(std::begin(kUpdatable), std::end(kUpdatable), [&](const char* updatable) {
          return path == updatable;
        }) == std::end(kUpdatable)) {
      return absl::InvalidArgumentError(
          absl::StrCat("update_mask: '", path,
                       "' cannot be updated (updatable: ", absl::StrJoin(kUpdatable, ", "), ")"));
    }
  }
  if (!changes.has_rq_affinity()) {
    return absl::InvalidArgumentError(
        "volume.rq_affinity: must be set (0, 1 or 2) when update_mask names it");
  }
  return ValidateRqAffinity(changes);
}

}  // namespace blk::agent
