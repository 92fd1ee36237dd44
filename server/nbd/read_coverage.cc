#include "server/nbd/read_coverage.h"

namespace blk::server::nbd {

ReadCoverage::Claim ReadCoverage::Add(uint32_t begin, uint32_t end) {
  // The usual reply: each chunk starts where the previous one ended.
  if (count_ > 0 && ranges_[count_ - 1].end == begin) {
    ranges_[count_ - 1].end = end;
    bytes_ += end - begin;
    return Claim::kAdded;
  }
  size_t left = 0;  // the first range that does not end before `begin`
  while (left < count_ && ranges_[left].end < begin) ++left;
  const bool joins_left = left < count_ && ranges_[left].end == begin;
  const size_t right = joins_left ? left + 1 : left;  // the first range that ends after `begin`
  if (right < count_ && ranges_[right].begin < end) return Claim::kOverlap;
  const bool joins_right = right < count_ && ranges_[right].begin == end;

  if (joins_left && joins_right) {
    ranges_[left].end = ranges_[right].end;
    for (size_t i = right; i + 1 < count_; ++i) ranges_[i] = ranges_[i + 1];
    --count_;
  } else if (joins_left) {
    ranges_[left].end = end;
  } else if (joins_right) {
    ranges_[right].begin = begin;
  } else {
    if (count_ == kMaxRanges) return Claim::kTooFragmented;
    for (size_t i = count_; i > right; --i) ranges_[i] = ranges_[i - 1];
    ranges_[right] = Range{begin, end};
    ++count_;
  }
  bytes_ += end - begin;
  return Claim::kAdded;
}

bool ReadCoverage::Covers(uint32_t length) const {
  if (length == 0) return count_ == 0;
  return count_ == 1 && ranges_[0].begin == 0 && ranges_[0].end == length;
}

}  // namespace blk::server::nbd
