// Two volumes must not share their backing store: one file, or overlapping bytes of one NVMe
// namespace (a local one by its char device, a remote one by subsystem NQN and nsid).
#pragma once

#include "absl/status/status.h"
#include "agent/volumes/volume_entry.h"
#include "blk/v1/volume.pb.h"

namespace blk::agent {

// FAILED_PRECONDITION naming the field and the volume `spec` would share its backing with among
// `volumes`; OK when it shares none (null and NBD volumes never conflict).
absl::Status CheckBackingIsFree(const v1::Volume& spec, const VolumeEntries& volumes);

// For a volume growing in place, `grown` at its new size: FAILED_PRECONDITION when its bytes of
// an NVMe namespace would overlap another volume's (other backends never conflict by growing).
absl::Status CheckGrowthIsFree(const v1::Volume& grown, const VolumeEntries& volumes);

}  // namespace blk::agent
