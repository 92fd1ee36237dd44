#include "agent/volumes/file_dirs.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <memory>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace blk::agent {

namespace {

// realpath(3): every symlink and ".." resolved; nullopt with errno when it cannot be.
std::optional<std::string> RealPath(const std::string& path) {
  const std::unique_ptr<char, decltype(&::free)> real(::realpath(path.c_str(), nullptr), &::free);
  if (!real) return std::nullopt;
  return std::string(real.get());
}

// The real path `path` names: its own when it exists; else its directory's real path and its
// name (the file a create makes there).
absl::StatusOr<std::string> RealPathOf(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    std::optional<std::string> real = RealPath(path);
    if (!real) {
      return absl::ErrnoToStatus(
          errno, absl::StrCat("cannot resolve '", path, "' (",
                              S_ISLNK(st.st_mode) ? "a dangling symlink" : "unresolvable", ")"));
    }
    return *real;
  }
  const std::filesystem::path lexical(path);
  std::optional<std::string> parent = RealPath(lexical.parent_path().string());
  if (!parent) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("cannot resolve directory '", lexical.parent_path().string(), "'"));
  }
  return (std::filesystem::path(*parent) / lexical.filename()).string();
}

bool IsUnder(const std::string& real, const std::string& dir) {
  if (dir == "/") return true;
  return real == dir || absl::StartsWith(real, absl::StrCat(dir, "/"));
}

}  // namespace

absl::StatusOr<FileDirs> FileDirs::Parse(const std::vector<std::string>& dirs,
                                         const std::string& flag) {
  for (const std::string& dir : dirs) {
    if (dir.empty() || dir.front() != '/') {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": '", dir, "' is not an absolute directory"));
    }
  }
  return FileDirs(dirs);
}

absl::Status FileDirs::Admit(const std::string& path) const {
  if (dirs_.empty()) return absl::OkStatus();
  const std::string allowed = absl::StrCat(" (--file-dirs: ", absl::StrJoin(dirs_, ","), ")");
  absl::StatusOr<std::string> real = RealPathOf(path);
  if (!real.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("volume.file.path: ", real.status().message(),
                     ", so it cannot be checked to lie in an allowed directory", allowed));
  }
  for (const std::string& dir : dirs_) {
    std::optional<std::string> real_dir = RealPath(dir);
    if (real_dir && IsUnder(*real, *real_dir)) return absl::OkStatus();
  }
  const std::string seen = *real == path ? "" : absl::StrCat(" (really '", *real, "')");
  return absl::InvalidArgumentError(absl::StrCat(
      "volume.file.path: '", path, "'", seen, " is outside the agent's file directories", allowed));
}

}  // namespace blk::agent
