#include "csi/volume_id.h"

#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/dns_label.h"
#include "common/fnv1a.h"

namespace blk::csi {
namespace {

constexpr size_t kMaxPrefixLength = 40;

}  // namespace

std::string VolumeIdForName(absl::string_view name) {
  if (IsDnsLabel(std::string_view(name.data(), name.size()))) return std::string(name);
  std::string prefix;
  for (char c : name.substr(0, kMaxPrefixLength)) {
    const char lower = absl::ascii_tolower(static_cast<unsigned char>(c));
    prefix.push_back(IsLowerAlnum(lower) ? lower : '-');
  }
  absl::string_view trimmed = prefix;
  while (!trimmed.empty() && trimmed.front() == '-') trimmed.remove_prefix(1);
  while (!trimmed.empty() && trimmed.back() == '-') trimmed.remove_suffix(1);
  if (trimmed.empty()) trimmed = "blk";
  return absl::StrCat(
      trimmed, "-",
      absl::Hex(Fnv1a64(std::string_view(name.data(), name.size())), absl::kZeroPad16));
}

}  // namespace blk::csi
