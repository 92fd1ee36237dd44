#include "csi/volume_context.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/backend_uri.h"
#include "client/rate_limit_parse.h"
#include "client/size_parse.h"

namespace blk::csi {
namespace {

absl::Status BadValue(absl::string_view key, absl::string_view value, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("volume context ", key, "='", value, "': ", why));
}

absl::StatusOr<uint32_t> ParseUint(absl::string_view key, absl::string_view value, uint32_t min,
                                   uint32_t max) {
  uint32_t number = 0;
  if (!absl::SimpleAtoi(value, &number) || number < min || number > max) {
    return BadValue(key, value, absl::StrCat("want an integer in ", min, "..", max));
  }
  return number;
}

// Kubernetes quantities write binary units as "Gi"; blkctl's sizes take "G", "GiB" or "Gi".
absl::StatusOr<uint64_t> ParseContextSize(absl::string_view value) {
  absl::string_view text = value;
  std::string with_b;
  if (absl::EndsWith(text, "i")) {
    with_b = absl::StrCat(text, "B");
    text = with_b;
  }
  absl::StatusOr<uint64_t> size = blk::client::ParseSize(text);
  if (!size.ok()) return BadValue(kSizeKey, value, size.status().message());
  return size;
}

// The limit a key sets, nullptr for keys that are not limits.
blk::v1::RateLimit* LimitOf(absl::string_view key, blk::v1::VolumeLimits& limits) {
  if (key == kReadIopsKey) return limits.mutable_read_iops();
  if (key == kWriteIopsKey) return limits.mutable_write_iops();
  if (key == kIopsKey) return limits.mutable_total_iops();
  if (key == kReadBpsKey) return limits.mutable_read_bytes_per_second();
  if (key == kWriteBpsKey) return limits.mutable_write_bytes_per_second();
  if (key == kBpsKey) return limits.mutable_total_bytes_per_second();
  return nullptr;
}

// "SIZE[:BURST]" with Kubernetes' binary units ("Gi") as the bytes parser takes them ("GiB").
std::string WithBinaryUnits(absl::string_view value) {
  std::vector<std::string> parts = absl::StrSplit(value, absl::MaxSplits(':', 1));
  for (std::string& part : parts) {
    if (absl::EndsWith(part, "i")) part += "B";
  }
  return absl::StrJoin(parts, ":");
}

// Parses a limit key's value into its place in `limits`.
absl::Status SetLimit(absl::string_view key, absl::string_view value, blk::v1::RateLimit& limit) {
  const bool iops = key == kReadIopsKey || key == kWriteIopsKey || key == kIopsKey;
  absl::StatusOr<blk::v1::RateLimit> parsed =
      iops ? blk::client::ParseIopsLimit(value)
           : blk::client::ParseBytesLimit(WithBinaryUnits(value));
  if (!parsed.ok()) return BadValue(key, value, parsed.status().message());
  limit = *parsed;
  return absl::OkStatus();
}

std::string LimitKeys() {
  return absl::StrCat(kReadIopsKey, ", ", kWriteIopsKey, ", ", kIopsKey, ", ", kReadBpsKey, ", ",
                      kWriteBpsKey, ", ", kBpsKey);
}

}  // namespace

absl::Status CheckMutableParameters(const std::map<std::string, std::string>& parameters) {
  blk::v1::VolumeLimits limits;
  for (const auto& [key, value] : parameters) {
    if (absl::StrContains(key, '/')) continue;
    blk::v1::RateLimit* limit = LimitOf(key, limits);
    if (limit == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("mutable parameter '", key,
                                                     "' is not one blk-csi can change (only the "
                                                     "limits: ",
                                                     LimitKeys(), ")"));
    }
    if (absl::Status set = SetLimit(key, value, *limit); !set.ok()) return set;
  }
  return absl::OkStatus();
}

absl::StatusOr<blk::v1::Volume> VolumeFromContext(
    absl::string_view volume_id, const std::map<std::string, std::string>& context) {
  const auto backend = context.find(kBackendKey);
  if (backend == context.end() || backend->second.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("volume context has no '", kBackendKey,
                     "' (a backend URI such as file:///var/lib/blk/a.img or nbd://host/export)"));
  }
  absl::StatusOr<blk::v1::Volume> volume = blk::client::ParseBackendUri(backend->second);
  if (!volume.ok()) return BadValue(kBackendKey, backend->second, volume.status().message());
  volume->set_id(std::string(volume_id));

  for (const auto& [key, value] : context) {
    if (key == kBackendKey || absl::StrContains(key, '/')) continue;
    if (key == kSizeKey) {
      absl::StatusOr<uint64_t> size = ParseContextSize(value);
      if (!size.ok()) return size.status();
      volume->set_size_bytes(*size);
    } else if (key == kQueuesKey) {
      absl::StatusOr<uint32_t> queues = ParseUint(key, value, 1, 4096);
      if (!queues.ok()) return queues.status();
      volume->set_queues(*queues);
    } else if (key == kRqAffinityKey) {
      absl::StatusOr<uint32_t> rq_affinity = ParseUint(key, value, 0, 2);
      if (!rq_affinity.ok()) return rq_affinity.status();
      volume->set_rq_affinity(*rq_affinity);
    } else if (key == kPlacementKey) {
      volume->set_placement(value);
    } else if (blk::v1::RateLimit* limit = LimitOf(key, *volume->mutable_limits())) {
      if (absl::Status set = SetLimit(key, value, *limit); !set.ok()) return set;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "volume context has an unknown key '", key, "' (known: ", kBackendKey, ", ", kSizeKey,
          ", ", kQueuesKey, ", ", kRqAffinityKey, ", ", kPlacementKey, ", ", LimitKeys(), ")"));
    }
  }
  return volume;
}

}  // namespace blk::csi
