// A ublk disk's request queue attributes in sysfs (/sys/block/ublkbN/queue/<name>): one value
// each (a number, or a word such as the scheduler's name), stored by one write.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace blk::server {

// "/sys/block/ublkbN/queue".
std::string UblkQueueSysfsDir(uint32_t dev_id);

// Writes `value` to <queue_dir>/<name>; errors name the file.
absl::Status WriteQueueAttribute(const std::string& queue_dir, const char* name,
                                 std::string_view value);
absl::Status WriteQueueAttribute(const std::string& queue_dir, const char* name, uint32_t value);
absl::StatusOr<uint32_t> ReadQueueAttribute(const std::string& queue_dir, const char* name);

}  // namespace blk::server
