#include "csi/kubelet_paths.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace blk::csi {
namespace {

// Opens `name` (one component) below `dir` as O_PATH without following a symbolic link.
int OpenComponent(int dir, const std::string& name) {
  open_how how{};
  how.flags = O_PATH | O_CLOEXEC | O_NOFOLLOW;
  how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH;
  return static_cast<int>(::syscall(SYS_openat2, dir, name.c_str(), &how, sizeof(how)));
}

absl::Status Refused(const std::string& path, const std::string& why) {
  return absl::FailedPreconditionError(absl::StrCat(path, ": ", why));
}

// The components of a path that KubeletPaths::Check accepted, below the root.
std::vector<std::string> Below(const std::string& root, const std::string& path) {
  absl::string_view rest(path);
  rest.remove_prefix(root == "/" ? 1 : root.size() + 1);
  return absl::StrSplit(rest, '/');
}

}  // namespace

KubeletPaths::KubeletPaths(std::string root) : root_(std::move(root)) {
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
}

absl::Status KubeletPaths::Check(const std::string& path, const char* field) const {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(field, " is required"));
  if (path.front() != '/') {
    return absl::InvalidArgumentError(absl::StrCat(field, " must be absolute, not '", path, "'"));
  }
  const std::string prefix = root_ == "/" ? "/" : root_ + "/";
  if (!absl::StartsWith(path, prefix) || path.size() == prefix.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " '", path, "' is not below the kubelet root ", root_));
  }
  for (absl::string_view part : absl::StrSplit(absl::string_view(path).substr(1), '/')) {
    if (part.empty() || part == "." || part == "..") {
      return absl::InvalidArgumentError(absl::StrCat(
          field, " '", path, "' is not a normal path (empty, '.' or '..' components)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<UniqueFd> KubeletPaths::OpenParent(const std::string& path, bool create,
                                                  std::string* leaf) const {
  UniqueFd dir(::open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid()) {
    return absl::ErrnoToStatus(errno, absl::StrCat("kubelet root ", root_));
  }
  std::vector<std::string> parts = Below(root_, path);
  *leaf = parts.back();
  parts.pop_back();
  std::string reached = root_;
  for (const std::string& part : parts) {
    absl::StrAppend(&reached, "/", part);
    if (create && ::mkdirat(dir.get(), part.c_str(), 0750) != 0 && errno != EEXIST) {
      return absl::ErrnoToStatus(errno, absl::StrCat("mkdir ", reached));
    }
    UniqueFd next(OpenComponent(dir.get(), part));
    if (!next.valid()) {
      if (errno == ELOOP) return Refused(path, absl::StrCat(reached, " is a symbolic link"));
      return absl::ErrnoToStatus(errno, reached);
    }
    struct stat st;
    if (::fstat(next.get(), &st) != 0) return absl::ErrnoToStatus(errno, reached);
    if (S_ISLNK(st.st_mode)) return Refused(path, absl::StrCat(reached, " is a symbolic link"));
    if (!S_ISDIR(st.st_mode)) return Refused(path, absl::StrCat(reached, " is not a directory"));
    dir = std::move(next);
  }
  return dir;
}

absl::Status KubeletPaths::Create(const std::string& path, bool as_file) const {
  std::string leaf;
  absl::StatusOr<UniqueFd> parent = OpenParent(path, /*create=*/true, &leaf);
  if (!parent.ok()) return parent.status();
  if (as_file) {
    const int fd = ::openat(parent->get(), leaf.c_str(),
                            O_CREAT | O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
    if (fd >= 0) {
      ::close(fd);
      return absl::OkStatus();
    }
    // EISDIR, ELOOP (a symlink), EACCES...: something else is there; Open below says what.
    if (errno != EISDIR && errno != ELOOP && errno != ENXIO && errno != EACCES) {
      return absl::ErrnoToStatus(errno, absl::StrCat("create ", path));
    }
  } else if (::mkdirat(parent->get(), leaf.c_str(), 0750) != 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(errno, absl::StrCat("mkdir ", path));
  }
  absl::StatusOr<UniqueFd> made = Open(path);
  if (!made.ok()) return made.status();
  struct stat st;
  if (::fstat(made->get(), &st) != 0) return absl::ErrnoToStatus(errno, path);
  if (!as_file && !S_ISDIR(st.st_mode)) return Refused(path, "exists and is not a directory");
  if (as_file && S_ISDIR(st.st_mode)) return Refused(path, "exists and is a directory");
  return absl::OkStatus();
}

absl::StatusOr<UniqueFd> KubeletPaths::Open(const std::string& path) const {
  std::string leaf;
  absl::StatusOr<UniqueFd> parent = OpenParent(path, /*create=*/false, &leaf);
  if (!parent.ok()) return parent.status();
  UniqueFd fd(OpenComponent(parent->get(), leaf));
  if (!fd.valid()) {
    if (errno == ELOOP) return Refused(path, "is a symbolic link");
    return absl::ErrnoToStatus(errno, path);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return absl::ErrnoToStatus(errno, path);
  if (S_ISLNK(st.st_mode)) return Refused(path, "is a symbolic link");
  return fd;
}

absl::Status KubeletPaths::Remove(const std::string& path) const {
  std::string leaf;
  absl::StatusOr<UniqueFd> parent = OpenParent(path, /*create=*/false, &leaf);
  if (!parent.ok()) {
    return absl::IsNotFound(parent.status()) ? absl::OkStatus() : parent.status();
  }
  // unlinkat never follows the last component: a symbolic link there goes, not its target.
  if (::unlinkat(parent->get(), leaf.c_str(), 0) == 0 || errno == ENOENT) return absl::OkStatus();
  if (errno == EISDIR &&
      (::unlinkat(parent->get(), leaf.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT)) {
    return absl::OkStatus();
  }
  return absl::ErrnoToStatus(errno, absl::StrCat("remove ", path));
}

}  // namespace blk::csi
