// Which volume answers for a controller the agent connected. Each fabric volume lists the paths
// of its subsystem whose controllers the agent made (NvmeFabric.agent_connected_paths); a new
// volume takes over the marks of the volumes already on its paths, so that the last one deleted
// disconnects them, and controllers someone else made are never marked.
#pragma once

#include <string>
#include <vector>

#include "agent/volumes/volume_entry.h"
#include "blk/v1/volume.pb.h"

namespace blk::agent {

// Adds to `spec`'s marks those of `volumes` on the same subsystem for paths `spec` also uses.
void InheritConnectedPaths(v1::Volume& spec, const VolumeEntries& volumes);

// Of `deleted`'s marked paths, those no volume in `volumes` uses any more: to disconnect.
std::vector<std::string> UnusedConnectedPaths(const v1::Volume& deleted,
                                              const VolumeEntries& volumes);

}  // namespace blk::agent
