#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace blk::csi {

// Where a StorageClass's backend puts each volume's id, so that every claim gets a backing of
// its own: "file:///var/lib/blk/pool/{volume}.img" (a file pool: one file per volume),
// "nbd://server/{volume}" (one export per volume, e.g. nbdkit's file plugin with dir=).
inline constexpr char kVolumePlaceholder[] = "{volume}";

// The backend URI of volume `volume_id` of a class whose backend is `class_backend`: every
// placeholder replaced by the id. "null://" (no data) as it is. INVALID_ARGUMENT for a class
// whose every volume would land on the same backing (no placeholder: two claims would be two
// file systems over one file or export), and for nvme:// and nvme-tcp:// (a namespace path, or a
// subsystem NQN and nsid, name one namespace; NVMe volumes are PersistentVolumes made by hand).
absl::StatusOr<std::string> BackendForVolume(absl::string_view class_backend,
                                             absl::string_view volume_id);

}  // namespace blk::csi
