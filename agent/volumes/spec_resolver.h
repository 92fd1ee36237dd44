// What a CreateVolume request may leave out and only the backend can tell: an NBD export's size,
// an NVMe namespace's size and block size.
#pragma once

#include "absl/status/status.h"
#include "agent/devices/nvme_fabric.h"
#include "agent/volumes/nbd_export_size.h"
#include "agent/volumes/nvme_volume.h"
#include "blk/v1/volume.pb.h"

namespace blk::agent {

class SpecResolver {
 public:
  // `nbd_probe` learns the size of an NBD export; `nvme_probe` identifies an NVMe namespace;
  // `fabric_attacher` connects a fabric namespace's controllers and finds its head.
  explicit SpecResolver(NbdSizeProbe nbd_probe = RealNbdSizeProbe(),
                        NvmeNamespaceProbe nvme_probe = RealNvmeNamespaceProbe(),
                        FabricAttacher fabric_attacher = RealFabricAttacher());

  // Fills in a normalized, validated spec: an NBD spec without a size gets the export's, an nvme
  // spec its size and block size from the namespace (which is also checked to hold the volume).
  // When `existing` (the volume already under that id) is given, its values are taken instead and
  // nothing is probed: a repeated request gets the existing volume whatever it resolved to, and
  // any other difference is still reported by the caller's comparison. Probes block (a handshake,
  // a device command): call without locks held.
  //
  // A new fabric volume's paths are connected here (all of them, or the request fails and what
  // was connected is disconnected); its nvme.path becomes the namespace's head and
  // fabric.agent_connected_paths the paths connected now.
  //
  // With `size_is_minimum` (CreateVolumeRequest.size_is_minimum) the spec's size is a floor: a
  // new file or nbd volume takes its backing's size when that is larger (a missing file: the
  // spec's), and an existing volume at least that large lends its size.
  absl::Status Resolve(v1::Volume& spec, const v1::Volume* existing,
                       bool size_is_minimum = false) const;

 private:
  absl::Status ResolveMinimumSize(v1::Volume& spec, const v1::Volume* existing) const;
  absl::Status ResolveNbdSize(v1::Volume& spec, const v1::Volume* existing) const;
  absl::Status ResolveNvme(v1::Volume& spec, const v1::Volume* existing) const;

  NbdSizeProbe nbd_probe_;
  NvmeNamespaceProbe nvme_probe_;
  FabricAttacher fabric_attacher_;
};

}  // namespace blk::agent
