#include "agent/volumes/backing_conflict.h"

#include <sys/stat.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace blk::agent {
namespace {

// One backing under two names (a symbolic link, a hard link, '..', a /dev/disk/by-id alias, another
// node of the same device): device nodes compared by device number, files by inode.
bool SameBacking(const std::string& a, const std::string& b) {
  if (a == b) return true;
  struct stat sa {};
  struct stat sb {};
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
  if (S_ISCHR(sa.st_mode) || S_ISBLK(sa.st_mode)) {
    return (sa.st_mode & S_IFMT) == (sb.st_mode & S_IFMT) && sa.st_rdev == sb.st_rdev;
  }
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// Whether two nvme specs name the same namespace: a remote one by subsystem and nsid, whatever
// multipath head it has on this host; a local one by its char device, which may also be the head
// of a remote namespace (nvme.path of a fabric volume is the one the agent found, empty until it
// looked).
bool SameNamespace(const v1::NvmeBackend& a, const v1::NvmeBackend& b) {
  if (a.has_fabric() && b.has_fabric()) {
    return a.fabric().subsystem_nqn() == b.fabric().subsystem_nqn() &&
           a.fabric().nsid() == b.fabric().nsid();
  }
  return !a.path().empty() && !b.path().empty() && SameBacking(a.path(), b.path());
}

// Whether two nvme specs name the same namespace and their byte ranges intersect.
bool NvmeVolumesOverlap(const v1::Volume& a, const v1::Volume& b) {
  if (!SameNamespace(a.nvme(), b.nvme())) return false;
  const uint64_t a_start = a.nvme().offset_bytes();
  const uint64_t b_start = b.nvme().offset_bytes();
  return a_start < b_start + b.size_bytes() && b_start < a_start + a.size_bytes();
}

std::string NamespaceName(const v1::NvmeBackend& nvme) {
  if (!nvme.has_fabric()) return nvme.path();
  return absl::StrCat("namespace ", nvme.fabric().nsid(), " of ", nvme.fabric().subsystem_nqn(),
                      nvme.path().empty() ? "" : absl::StrCat(" (", nvme.path(), ")"));
}

absl::Status CheckNvmeRangeIsFree(const v1::Volume& spec, const VolumeEntries& volumes) {
  for (const auto& [id, entry] : volumes) {
    if (id == spec.id() || !entry.volume.has_nvme()) continue;
    // A volume growing counts with the size it grows to.
    v1::Volume taken = entry.volume;
    if (entry.growing_to_bytes > taken.size_bytes()) taken.set_size_bytes(entry.growing_to_bytes);
    if (!NvmeVolumesOverlap(spec, taken)) continue;
    const uint64_t start = spec.nvme().offset_bytes();
    const uint64_t other = taken.nvme().offset_bytes();
    return absl::FailedPreconditionError(
        absl::StrCat("volume.nvme: bytes [", start, ", ", start + spec.size_bytes(), ") of ",
                     NamespaceName(spec.nvme()), " overlap volume '", id, "' (bytes [", other, ", ",
                     other + taken.size_bytes(), ") of ", NamespaceName(taken.nvme()),
                     entry.growing_to_bytes > entry.volume.size_bytes() ? ", growing" : "", ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckFileIsFree(const v1::Volume& spec, const VolumeEntries& volumes) {
  for (const auto& [id, entry] : volumes) {
    if (id != spec.id() && entry.volume.backend_case() == v1::Volume::kFile &&
        SameBacking(entry.volume.file().path(), spec.file().path())) {
      const std::string& other = entry.volume.file().path();
      return absl::FailedPreconditionError(absl::StrCat(
          "volume.file.path: '", spec.file().path(), "' is already used by volume '", id, "'",
          other == spec.file().path() ? "" : absl::StrCat(" (as '", other, "')")));
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
