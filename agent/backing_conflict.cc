#include "agent/backing_conflict.h"

#include "absl/strings/str_cat.h"
#include "agent/nvme_volume.h"

namespace blk::agent {
namespace {

absl::Status CheckNvmeRangeIsFree(const v1::Volume& spec, const VolumeEntries& volumes) {
  for (const auto& [id, entry] : volumes) {
    if (id == spec.id() || !NvmeVolumesOverlap(spec, entry.volume)) continue;
    const uint64_t start = spec.nvme().offset_bytes();
    const uint64_t other = entry.volume.nvme().offset_bytes();
    return absl::FailedPreconditionError(
        absl::StrCat("volume.nvme: bytes [", start, ", ", start + spec.size_bytes(), ") of ",
                     spec.nvme().path(), " overlap volume '", id, "' (bytes [", other, ", ",
                     other + entry.volume.size_bytes(), ") of ", entry.volume.nvme().path(), ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckFileIsFree(const v1::Volume& spec, const VolumeEntries& volumes) {
  for (const auto& [id, entry] : volumes) {
    if (entry.volume.backend_case() == v1::Volume::kFile &&
        entry.volume.file().path() == spec.file().path()) {
      return absl::FailedPreconditionError(absl::StrCat("volume.file.path: '", spec.file().path(),
                                                        "' is already used by volume '", id, "'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckBackingIsFree(const v1::Volume& spec, const VolumeEntries& volumes) {
  if (spec.has_nvme()) return CheckNvmeRangeIsFree(spec, volumes);
  if (spec.backend_case() == v1::Volume::kFile) return CheckFileIsFree(spec, volumes);
  return absl::OkStatus();
}

absl::Status CheckGrowthIsFree(const v1::Volume& grown, const VolumeEntries& volumes) {
  if (grown.has_nvme()) return CheckNvmeRangeIsFree(grown, volumes);
  return absl::OkStatus();
}

}  // namespace blk::agent
