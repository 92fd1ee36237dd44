#include "agent/volumes/spec_resolver.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/volumes/volume_validation.h"
#include "server/local/file_backend.h"
#include "spdlog/spdlog.h"

namespace blk::agent {

SpecResolver::SpecResolver(NbdSizeProbe nbd_probe, NvmeNamespaceProbe nvme_probe,
                           FabricAttacher fabric_attacher)
    : nbd_probe_(std::move(nbd_probe)),
      nvme_probe_(std::move(nvme_probe)),
      fabric_attacher_(std::move(fabric_attacher)) {}

absl::Status SpecResolver::Resolve(v1::Volume& spec, const v1::Volume* existing,
                                   bool size_is_minimum) const {
  if (spec.has_nvme()) return ResolveNvme(spec, existing);
  if (size_is_minimum) return ResolveMinimumSize(spec, existing);
  if (spec.size_bytes() == 0) return ResolveNbdSize(spec, existing);
  return absl::OkStatus();
}

absl::Status SpecResolver::ResolveMinimumSize(v1::Volume& spec, const v1::Volume* existing) const {
  if (existing != nullptr) {
    if (existing->size_bytes() >= spec.size_bytes()) spec.set_size_bytes(existing->size_bytes());
    return absl::OkStatus();
  }
  const uint64_t block_size = spec.logical_block_size();
  uint64_t backing = 0;
  if (spec.has_nbd()) {
    absl::StatusOr<uint64_t> size =
        ResolveNbdVolumeSize(spec.id(), spec.nbd().uri(), block_size, nbd_probe_);
    if (!size.ok()) return size.status();
    backing = *size;
  } else if (spec.has_file()) {
    absl::StatusOr<std::optional<uint64_t>> size = server::ExistingBackingSize(spec.file().path());
    if (!size.ok()) {
      return absl::Status(size.status().code(),
                          absl::StrCat("volume.file.path: ", size.status().message()));
    }
    if (size->has_value()) backing = **size - **size % block_size;
  }
  if (backing > spec.size_bytes()) {
    spdlog::info("volume {}: size {} bytes, its backing's, above the {} bytes asked for", spec.id(),
                 backing, spec.size_bytes());
    spec.set_size_bytes(backing);
  }
  return ValidateVolumeSpec(spec);
}

absl::Status SpecResolver::ResolveNbdSize(v1::Volume& spec, const v1::Volume* existing) const {
  if (existing != nullptr) {
    spec.set_size_bytes(existing->size_bytes());
    return absl::OkStatus();
  }
  absl::StatusOr<uint64_t> size =
      ResolveNbdVolumeSize(spec.id(), spec.nbd().uri(), spec.logical_block_size(), nbd_probe_);
  if (!size.ok()) return size.status();
  spec.set_size_bytes(*size);
  return ValidateVolumeSpec(spec);
}

absl::Status SpecResolver::ResolveNvme(v1::Volume& spec, const v1::Volume* existing) const {
  v1::NvmeBackend& nvme = *spec.mutable_nvme();
  if (existing != nullptr) {
    if (spec.size_bytes() == 0) spec.set_size_bytes(existing->size_bytes());
    if (spec.logical_block_size() == 0) {
      spec.set_logical_block_size(existing->logical_block_size());
    }
    // A fabric volume's outputs are the existing volume's, whatever the request echoed back.
    if (nvme.has_fabric() && existing->has_nvme()) {
      nvme.set_path(existing->nvme().path());
      *nvme.mutable_fabric()->mutable_agent_connected_paths() =
          existing->nvme().fabric().agent_connected_paths();
    }
    return absl::OkStatus();
  }
  std::vector<std::string> connected;
  if (nvme.has_fabric()) {
    nvme.mutable_fabric()->clear_agent_connected_paths();
    absl::StatusOr<FabricAttachment> attached =
        fabric_attacher_(nvme.fabric(), FabricNeed::kEveryPath);
    if (!attached.ok()) return attached.status();
    nvme.set_path(attached->head_path);
    connected = attached->made;
    for (const std::string& path : connected)
      nvme.mutable_fabric()->add_agent_connected_paths(path);
  }
  absl::Status resolved = ResolveNvmeVolume(spec, nvme_probe_);
  if (resolved.ok()) resolved = ValidateVolumeSpec(spec);
  if (!resolved.ok() && !connected.empty()) DisconnectFabricPaths(nvme.fabric(), connected);
  return resolved;
}

}  // namespace blk::agent
