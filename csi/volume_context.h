#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "blk/v1/volume.pb.h"

namespace blk::csi {

// The volume context keys (a StorageClass's parameters) blk-csi turns into an
// agent volume:
//   backend     REQUIRED: a backend URI as blkctl takes it ("file:///var/lib/a.img",
//               "nbd://host/export", "nvme:///dev/ng0n1?offset=1G",
//               "nvme-tcp://10.0.0.5/nqn.2014-08.org.example:array1?nsid=1&path=10.0.1.5",
//               "null://")
//   size        bytes or K/M/G/T ("10Gi" too, as Kubernetes writes it); optional
//               for nbd, nvme and nvme-tcp (the export's / namespace's size)
//   queues      ublk hardware queues (1..)
//   rqAffinity  0, 1 or 2
//   placement   "hctx", "spread" or a CPU list
//   readIops, writeIops, iops      I/O limits in operations per second, "N" or "N:BURST"
//   readBps, writeBps, bps         I/O limits in bytes per second, "SIZE" or "SIZE:BURST"
//                                  ("50M", "1Gi:2Gi"); as blkctl's --read-iops ... --bps
// Keys with a '/' (e.g. "csi.storage.k8s.io/pv/name", added by Kubernetes)
// are not ours and are ignored; any other key is refused, so that a typo in a
// StorageClass does not silently create a different volume.
inline constexpr char kBackendKey[] = "backend";
inline constexpr char kSizeKey[] = "size";
inline constexpr char kQueuesKey[] = "queues";
inline constexpr char kRqAffinityKey[] = "rqAffinity";
inline constexpr char kPlacementKey[] = "placement";
inline constexpr char kReadIopsKey[] = "readIops";
inline constexpr char kWriteIopsKey[] = "writeIops";
inline constexpr char kIopsKey[] = "iops";
inline constexpr char kReadBpsKey[] = "readBps";
inline constexpr char kWriteBpsKey[] = "writeBps";
inline constexpr char kBpsKey[] = "bps";

// The agent volume `volume_id` the context describes; INVALID_ARGUMENT naming
// the key on any bad value. The agent checks the id and the rest.
absl::StatusOr<blk::v1::Volume> VolumeFromContext(
    absl::string_view volume_id, const std::map<std::string, std::string>& context);

// A VolumeAttributesClass's parameters (CreateVolume's and ControllerModifyVolume's
// mutable_parameters) may set the limits and nothing else: INVALID_ARGUMENT naming the
// first other key or bad value. Keys with a '/' are ignored, as in a context.
absl::Status CheckMutableParameters(const std::map<std::string, std::string>& parameters);

}  // namespace blk::csi
