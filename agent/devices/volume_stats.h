#pragma once

#include <string>

#include "blk/v1/volume.pb.h"
#include "server/ublk/device.h"

namespace blk::agent {

// The I/O statistics of one device, summed over its queues at this moment. The one place both
// GetVolumeStats and the /metrics series come from, so the two cannot disagree.
v1::VolumeStats SnapshotVolumeStats(const std::string& volume_id, const server::Device& device);

}  // namespace blk::agent
