#include "agent/volumes/nvme_volume.h"

#include "absl/strings/str_cat.h"

namespace blk::agent {

NvmeNamespaceProbe RealNvmeNamespaceProbe() {
  return [](const std::string& path) { return server::ProbeNvmeNamespace(path); };
}

absl::Status ResolveNvmeVolume(v1::Volume& spec, const NvmeNamespaceProbe& probe) {
  const std::string& path = spec.nvme().path();
  const v1::NvmeFabric& fabric = spec.nvme().fabric();
  const std::string where =
      spec.nvme().has_fabric()
          ? absl::StrCat("nsid ", fabric.nsid(), " of ", fabric.subsystem_nqn(), " (", path, ")")
          : path;
  absl::StatusOr<server::NvmeNamespaceInfo> info = probe(path);
  if (!info.ok()) {
    return absl::Status(info.status().code(),
                        absl::StrCat("volume.nvme.path: ", info.status().message()));
  }
  const uint64_t lba = info->lba_bytes;
  if (spec.logical_block_size() == 0) spec.set_logical_block_size(info->lba_bytes);
  if (spec.logical_block_size() < lba) {
    return absl::InvalidArgumentError(
        absl::StrCat("volume.logical_block_size: ", spec.logical_block_size(),
                     " is smaller than the LBA size ", lba, " of the namespace at ", where));
  }
  const uint64_t offset = spec.nvme().offset_bytes();
  if (offset % lba != 0) {
    return absl::InvalidArgumentError(absl::StrCat("volume.nvme.offset_bytes: ", offset,
                                                   " is not a multiple of the LBA size ", lba,
                                                   " of the namespace at ", where));
  }
  if (offset >= info->size_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("volume.nvme.offset_bytes: ", offset,
                                                   " is not inside the namespace at ", where, " (",
                                                   info->size_bytes, " bytes)"));
  }
  const uint64_t room = info->size_bytes - offset;
  if (spec.size_bytes() == 0) {
    spec.set_size_bytes(room - room % spec.logical_block_size());
  }
  if (spec.size_bytes() > room) {
    return absl::InvalidArgumentError(
        absl::StrCat("volume.size_bytes: ", spec.size_bytes(), " bytes at offset ", offset,
                     " do not fit in the namespace at ", where, " (", info->size_bytes, " bytes, ",
                     room, " from the offset on)"));
  }
  return absl::OkStatus();
}

}  // namespace blk::agent
