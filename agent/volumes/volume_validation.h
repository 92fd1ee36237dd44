#pragma once

#include "absl/status/status.h"
#include "blk/v1/volume.pb.h"
#include "google/protobuf/field_mask.pb.h"

namespace blk::agent {

inline constexpr uint32_t kDefaultLogicalBlockSize = 512;
inline constexpr uint32_t kDefaultQueues = 1;
inline constexpr uint32_t kDefaultQueueDepth = 128;
inline constexpr uint32_t kMaxQueues = 64;
// UBLK_MAX_QUEUE_DEPTH in the kernel.
inline constexpr uint32_t kMaxQueueDepth = 4096;
inline constexpr uint64_t kMaxSizeBytes = uint64_t{1} << 50;  // 1 PiB

// Fills in the documented defaults (block size except for nvme, queues, depth,
// placement "node", the io timeout of nbd and nvme-tcp volumes) and clears the
// output-only status, so that two requests meaning the same volume compare equal.
// The output-only fields of an nvme fabric (nvme.path, agent_connected_paths) stay:
// a restored record holds what the agent found.
v1::Volume NormalizeVolumeSpec(const v1::Volume& requested);

// Checks every field of a normalized spec. The error is INVALID_ARGUMENT with a
// message naming the field ("volume.size_bytes: ...") and the reason. A size of 0 is
// accepted only for an NBD volume ("the export's size") and an nvme volume ("the
// namespace's"), a logical block size of 0 only for an nvme volume ("the
// namespace's"). A placement CPU list may name only CPUs this process may run on.
// An nvme fabric's NQN and hosts may hold no ',', '=' or blank (they go into the
// option string written to /dev/nvme-fabrics); its output-only fields are not checked.
// Limits: rates up to 10,000,000 IOPS and 100e9 bytes per second; a burst only with a rate, at
// most an hour's worth of it, and for a bytes limit at least the largest request
// (DeviceConfig::max_io_bytes).
absl::Status ValidateVolumeSpec(const v1::Volume& spec);

// volume.rq_affinity, when set, is 0, 1 or 2 (part of ValidateVolumeSpec; also
// for UpdateVolume).
absl::Status ValidateRqAffinity(const v1::Volume& spec);

// An UpdateVolume request: a valid id, a mask naming only updatable fields (rq_affinity,
// limits), and valid values for them. INVALID_ARGUMENT naming the field otherwise.
absl::Status ValidateVolumeUpdate(const v1::Volume& changes,
                                  const google::protobuf::FieldMask& mask);

// A DNS label: 1-63 of [a-z0-9-], starting and ending with a letter or digit.
bool IsValidVolumeId(std::string_view id);

}  // namespace blk::agent
