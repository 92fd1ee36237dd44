// How much one agent serves at most: volumes, and ublk queue threads (one per queue of every
// volume it holds, live or waiting to come up).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "agent/volumes/volume_entry.h"
#include "blk/v1/volume.pb.h"

namespace blk::agent {

struct VolumeLimits {
  uint32_t max_volumes = 256;         // blkagent --max-volumes
  uint32_t max_queue_threads = 1024;  // blkagent --max-queue-threads
};

// RESOURCE_EXHAUSTED naming the limit the new volume `spec` (normalized) would pass on top of
// `volumes`; OK when it fits.
absl::Status CheckVolumeFits(const v1::Volume& spec, const VolumeEntries& volumes,
                             const VolumeLimits& limits);

}  // namespace blk::agent
