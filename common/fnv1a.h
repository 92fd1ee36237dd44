#pragma once

#include <cstdint>
#include <string_view>

namespace blk {

// 64-bit FNV-1a: stable across builds and hosts (unlike std::hash or absl::Hash), detects
// corruption, not tampering.
inline uint64_t Fnv1a64(std::string_view data) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : data) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

}  // namespace blk
