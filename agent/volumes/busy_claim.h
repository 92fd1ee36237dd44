#pragma once

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/volumes/volume_entry.h"

namespace blk::agent {

// An operation's hold on one volume: while it lives the entry is busy, so a second operation on
// the same volume is refused (ABORTED) and the retry thread leaves it alone, while the table's
// mutex is free for every other caller. The destructor takes the mutex and clears the flag, on
// every return path, unless the claim was released under the mutex already.
class BusyClaim {
 public:
  // The entry `id` must exist and not be busy.
  BusyClaim(absl::Mutex& mutex, VolumeEntries& entries, std::string id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex);
  ~BusyClaim() ABSL_LOCKS_EXCLUDED(mutex_);
  BusyClaim(const BusyClaim&) = delete;
  BusyClaim& operator=(const BusyClaim&) = delete;

  // Ends the claim now, by a caller that holds `mutex`, the claim's (recording the outcome under
  // it). Also right before the entry is erased.
  void ReleaseLocked(absl::Mutex& mutex) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex);

 private:
  absl::Mutex& mutex_;
  VolumeEntries* const entries_ ABSL_PT_GUARDED_BY(mutex_);
  const std::string id_;
  bool held_ ABSL_GUARDED_BY(mutex_) = true;
};

}  // namespace blk::agent
