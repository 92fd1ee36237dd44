#include "csi/backing_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/unique_fd.h"

namespace blk::csi {

absl::Status CreateBackingFile(const std::string& path, int64_t size_bytes) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    if (errno == ENOENT || errno == ENOTDIR) {
      return absl::FailedPreconditionError(
          absl::StrCat("the pool directory of ", path, " is not there (not mounted yet?)"));
    }
    if (errno != EEXIST) return absl::ErrnoToStatus(errno, absl::StrCat("create ", path));
    struct stat existing {};
    if (::lstat(path.c_str(), &existing) == 0 && S_ISREG(existing.st_mode) &&
        existing.st_size == size_bytes) {
      return absl::OkStatus();
    }
    return absl::FailedPreconditionError(
        absl::StrCat(path, " exists already and is not the ", size_bytes,
                     "-byte file this volume would have: not handing it to a new volume"));
  }
  if (::ftruncate(fd.get(), size_bytes) != 0 || ::fsync(fd.get()) != 0) {
    absl::Status error = absl::ErrnoToStatus(errno, absl::StrCat("size ", path));
    ::unlink(path.c_str());
    return error;
  }
  return SyncDirectoryOf(path);
}

absl::Status RequireBackingFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return absl::OkStatus();
  if (errno != ENOENT) return absl::ErrnoToStatus(errno, absl::StrCat("backing file ", path));
  return absl::FailedPreconditionError(absl::StrCat(
      "backing file ", path,
      " is missing: blk-csi does not create it empty (is its file system mounted? a "
      "provisioned volume's file is made by CreateVolume, a PersistentVolume's by its maker)"));
}

}  // namespace blk::csi
