#include "server/ublk/rq_affinity.h"

#include "absl/strings/str_cat.h"
#include "server/ublk/queue_sysfs.h"

namespace blk::server {

absl::Status WriteRqAffinity(const std::string& queue_dir, uint32_t value) {
  if (value > kMaxRqAffinity) {
    return absl::InvalidArgumentError(absl::StrCat("rq_affinity must be 0, 1 or 2, got ", value));
  }
  return WriteQueueAttribute(queue_dir, "rq_affinity", value);
}

absl::StatusOr<uint32_t> ReadRqAffinity(const std::string& queue_dir) {
  return ReadQueueAttribute(queue_dir, "rq_affinity");
}

}  // namespace blk::server
