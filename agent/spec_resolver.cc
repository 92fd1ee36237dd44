#include "agent/spec_resolver.h"

#include <utility>

#include "agent/volume_validation.h"

namespace blk::agent {

SpecResolver::SpecResolver(NbdSizeProbe nbd_probe, NvmeNamespaceProbe nvme_probe)
    : nbd_probe_(std::move(nbd_probe)), nvme_probe_(std::move(nvme_probe)) {}

absl::Status SpecResolver::Resolve(v1::Volume& spec, const v1::Volume* existing) const {
  if (spec.has_nvme()) return ResolveNvme(spec, existing);
  if (spec.size_bytes() == 0) return ResolveNbdSize(spec, existing);
  return absl::OkStatus();
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
  if (existing != nullptr) {
    if (spec.size_bytes() == 0) spec.set_size_bytes(existing->size_bytes());
    if (spec.logical_block_size() == 0) {
      spec.set_logical_block_size(existing->logical_block_size());
    }
    return absl::OkStatus();
  }
  if (absl::Status resolved = ResolveNvmeVolume(spec, nvme_probe_); !resolved.ok()) {
    return resolved;
  }
  return ValidateVolumeSpec(spec);
}

}  // namespace blk::agent
