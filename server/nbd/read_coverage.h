// Which bytes of a read request a structured reply has delivered so far. The NBD protocol lets a
// server send a read's OFFSET_DATA and OFFSET_HOLE chunks in any order but forbids chunks that
// overlap; a reply is complete only when its chunks cover the request exactly once. Summing chunk
// lengths cannot tell "each half once" from "one half twice", so the covered bytes are tracked as
// ranges.
#pragma once

#include <cstddef>
#include <cstdint>

namespace blk::server::nbd {

class ReadCoverage {
 public:
  // At most this many separate pieces (covered ranges with gaps between them) are tracked: a fixed
  // array, so a reply costs no allocation. In-order chunks, and chunks that extend a piece at
  // either end, keep a single piece; only a server that scatters more than this many disjoint
  // chunks before filling the gaps between them exceeds it, and its reply is refused.
  static constexpr size_t kMaxRanges = 16;

  enum class Claim : uint8_t {
    kAdded,
    kOverlap,        // some of the bytes were covered already
    kTooFragmented,  // the covered bytes would form more than kMaxRanges pieces
  };

  // Records bytes [begin, end) of the request (begin < end). Refused claims change nothing.
  Claim Add(uint32_t begin, uint32_t end);
  // Whether exactly [0, length) is covered.
  bool Covers(uint32_t length) const;
  uint32_t bytes() const { return bytes_; }

 private:
  struct Range {
    uint32_t begin;
    uint32_t end;
  };
  // Sorted, disjoint, and never adjacent (touching ranges are merged).
  Range ranges_[kMaxRanges] = {};
  uint8_t count_ = 0;
  uint32_t bytes_ = 0;
};

}  // namespace blk::server::nbd
