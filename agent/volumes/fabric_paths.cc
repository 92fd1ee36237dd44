#include "agent/volumes/fabric_paths.h"

#include <algorithm>

namespace blk::agent {
namespace {

const v1::NvmeFabric* FabricOf(const v1::Volume& volume) {
  if (!volume.has_nvme() || !volume.nvme().has_fabric()) return nullptr;
  return &volume.nvme().fabric();
}

template <typename Paths>
bool Contains(const Paths& paths, const std::string& path) {
  return std::find(paths.begin(), paths.end(), path) != paths.end();
}

}  // namespace

void InheritConnectedPaths(v1::Volume& spec, const VolumeEntries& volumes) {
  if (FabricOf(spec) == nullptr) return;
  v1::NvmeFabric& fabric = *spec.mutable_nvme()->mutable_fabric();
  for (const auto& [id, entry] : volumes) {
    const v1::NvmeFabric* other = FabricOf(entry.volume);
    if (id == spec.id() || other == nullptr) continue;
    if (other->subsystem_nqn() != fabric.subsystem_nqn()) continue;
    for (const std::string& path : other->agent_connected_paths()) {
      if (Contains(fabric.paths(), path) && !Contains(fabric.agent_connected_paths(), path)) {
        fabric.add_agent_connected_paths(path);
      }
    }
  }
}

std::vector<std::string> UnusedConnectedPaths(const v1::Volume& deleted,
                                              const VolumeEntries& volumes) {
  const v1::NvmeFabric* fabric = FabricOf(deleted);
  if (fabric == nullptr) return {};
  std::vector<std::string> unused;
  for (const std::string& path : fabric->agent_connected_paths()) {
    const bool used = std::any_of(volumes.begin(), volumes.end(), [&](const auto& item) {
      const v1::NvmeFabric* other = FabricOf(item.second.volume);
      return item.first != deleted.id() && other != nullptr &&
             other->subsystem_nqn() == fabric->subsystem_nqn() && Contains(other->paths(), path);
    });
    if (!used) unused.push_back(path);
  }
  return unused;
}

}  // namespace blk::agent
