#include "agent/volumes/volume_limits.h"

#include "absl/strings/str_cat.h"

namespace blk::agent {

absl::Status CheckVolumeFits(const v1::Volume& spec, const VolumeEntries& volumes,
                             const VolumeLimits& limits) {
  if (volumes.size() >= limits.max_volumes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("volume limit reached: this agent already holds ", volumes.size(),
                     " volumes (blkagent --max-volumes ", limits.max_volumes, ")"));
  }
  uint64_t queue_threads = 0;
  for (const auto& [id, entry] : volumes) queue_threads += entry.volume.queues();
  if (queue_threads + spec.queues() > limits.max_queue_threads) {
    return absl::ResourceExhaustedError(
        absl::StrCat("queue thread limit reached: volume '", spec.id(), "' needs ", spec.queues(),
                     " queue threads and ", queue_threads, " of ", limits.max_queue_threads,
                     " are taken (blkagent --max-queue-threads ", limits.max_queue_threads, ")"));
  }
  return absl::OkStatus();
}

}  // namespace blk::agent
