#include "server/ublk/queue_sysfs.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/unique_fd.h"

namespace blk::server {

std::string UblkQueueSysfsDir(uint32_t dev_id) {
  return absl::StrCat("/sys/block/ublkb", dev_id, "/queue");
}

absl::Status WriteQueueAttribute(const std::string& queue_dir, const char* name,
                                 std::string_view value) {
  const std::string path = absl::StrCat(queue_dir, "/", name);
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
  std::string text(value);
  text += '\n';
  // sysfs takes a store in one write; a short write did not happen.
  if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    return absl::ErrnoToStatus(errno, absl::StrCat("write ", path));
  }
  return absl::OkStatus();
}

absl::Status WriteQueueAttribute(const std::string& queue_dir, const char* name, uint32_t value) {
  return WriteQueueAttribute(queue_dir, name, absl::StrCat(value));
}

absl::StatusOr<uint32_t> ReadQueueAttribute(const std::string& queue_dir, const char* name) {
  const std::string path = absl::StrCat(queue_dir, "/", name);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
  char text[24];
  const ssize_t n = ::read(fd.get(), text, sizeof(text) - 1);
  if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat("read ", path));
  uint32_t value = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(absl::string_view(text, n)), &value)) {
    return absl::DataLossError(absl::StrCat(path, " does not hold a number"));
  }
  return value;
}

}  // namespace blk::server
