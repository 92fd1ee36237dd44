#pragma once

#include <string_view>

namespace blk {

// A lowercase ASCII letter or digit.
inline bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// A DNS label (RFC 1123): 1-63 of [a-z0-9-], starting and ending with a letter or digit. Volume ids
// are DNS labels.
inline bool IsDnsLabel(std::string_view text) {
  if (text.empty() || text.size() > 63) return false;
  if (!IsLowerAlnum(text.front()) || !IsLowerAlnum(text.back())) return false;
  for (char c : text) {
    if (!IsLowerAlnum(c) && c != '-') return false;
  }
  return true;
}

}  // namespace blk
