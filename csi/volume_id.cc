#include "csi/volume_id.h"

#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace blk::csi {
namespace {

constexpr size_t kMaxIdLength = 63;
constexpr size_t kMaxPrefixLength = 40;

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

bool IsAgentVolumeId(absl::string_view id) {
  if (id.empty() || id.size() > kMaxIdLength) return false;
  if (!IsLowerAlnum(id.front()) || !IsLowerAlnum(id.back())) return false;
  for (char c : id) {
    if (!IsLowerAlnum(c) && c != '-') return false;
  }
  return true;
}

// 64-bit FNV-1a: stable across builds and hosts, unlike std::hash or absl::Hash.
uint64_t StableHash(absl::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

}  // namespace

std::string VolumeIdForName(absl::string_view name) {
  if (IsAgentVolumeId(name)) return std::string(name);
  std::string prefix;
  for (char c : name.substr(0, kMaxPrefixLength)) {
    const char lower = absl::ascii_tolower(static_cast<unsigned char>(c));
    prefix.push_back(IsLowerAlnum(lower) ? lower : '-');
  }
  absl::string_view trimmed = prefix;
  while (!trimmed.empty() && trimmed.front() == '-') trimmed.remove_prefix(1);
  while (!trimmed.empty() && trimmed.back() == '-') trimmed.remove_suffix(1);
  if (trimmed.empty()) trimmed = "blk";
  return absl::StrCat(trimmed, "-", absl::Hex(StableHash(name), absl::kZeroPad16));
}

}  // namespace blk::csi
