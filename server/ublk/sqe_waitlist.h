// Work that found its ring's submission queue full (Ring::GetSqe gave nullptr) waits here, by id
// (a tag, a slot), and is tried again on a later loop turn rather than dropped or failed. Fixed
// capacity: no allocation after construction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace blk::server {

class SqeWaitlist {
 public:
  explicit SqeWaitlist(size_t capacity = 0) : ids_(capacity), waiting_(capacity, false) {}

  bool empty() const { return count_ == 0; }
  size_t size() const { return count_; }

  // `id` < capacity. An id already waiting keeps its place.
  void Add(uint32_t id) {
    if (id >= ids_.size() || waiting_[id]) return;
    waiting_[id] = true;
    ids_[(head_ + count_) % ids_.size()] = id;
    ++count_;
  }

  // Calls try_again(id) for the waiting ids in order until one returns false (still no SQE): that
  // one and those after it wait on.
  template <typename TryAgain>
  void RetryEach(TryAgain&& try_again) {
    while (count_ > 0) {
      const uint32_t id = ids_[head_];
      if (!try_again(id)) return;
      waiting_[id] = false;
      head_ = (head_ + 1) % ids_.size();
      --count_;
    }
  }

 private:
  std::vector<uint32_t> ids_;
  std::vector<bool> waiting_;
  size_t head_ = 0;
  size_t count_ = 0;
};

}  // namespace blk::server
