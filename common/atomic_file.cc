#include "common/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace blk {

absl::Status SyncDirectoryOf(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("open directory ", dir));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return absl::ErrnoToStatus(errno, absl::StrCat("fsync directory ", dir));
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, std::string_view contents) {
  const std::string temp = absl::StrCat(path, ".tmp");
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("create ", temp));
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + written, contents.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      absl::Status error = absl::ErrnoToStatus(errno, absl::StrCat("write ", temp));
      ::close(fd);
      ::unlink(temp.c_str());
      return error;
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    absl::Status error = absl::ErrnoToStatus(errno, absl::StrCat("fsync ", temp));
    ::close(fd);
    ::unlink(temp.c_str());
    return error;
  }
  ::close(fd);
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    absl::Status error = absl::ErrnoToStatus(errno, absl::StrCat("rename to ", path));
    ::unlink(temp.c_str());
    return error;
  }
  return SyncDirectoryOf(path);
}

absl::Status RemoveFileDurably(const std::string& path) {
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::ErrnoToStatus(errno, absl::StrCat("remove ", path));
  }
  return SyncDirectoryOf(path);
}

}  // namespace blk
