#include "common/read_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/unique_fd.h"

namespace blk {

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return absl::ErrnoToStatus(errno, path);
  std::string contents;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n == 0) return contents;
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat(path, " (read)"));
    }
    contents.append(buffer, static_cast<size_t>(n));
  }
}

}  // namespace blk
