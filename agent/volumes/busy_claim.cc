#include "agent/volumes/busy_claim.h"

#include <cstdlib>
#include <utility>

namespace blk::agent {

BusyClaim::BusyClaim(absl::Mutex& mutex, VolumeEntries& entries, std::string id)
    : mutex_(mutex), entries_(&entries), id_(std::move(id)) {
  entries_->at(id_).busy = true;
}

BusyClaim::~BusyClaim() {
  absl::MutexLock lock(&mutex_);
  ReleaseLocked(mutex_);
}

void BusyClaim::ReleaseLocked(absl::Mutex& mutex) {
  if (&mutex != &mutex_) std::abort();  // a claim is released under its own table's lock
  mutex_.AssertHeld();
  if (!held_) return;
  held_ = false;
  auto it = entries_->find(id_);
  if (it != entries_->end()) it->second.busy = false;
}

}  // namespace blk::agent
