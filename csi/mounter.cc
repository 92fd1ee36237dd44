#include "csi/mounter.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "csi/mount_table.h"
#include "csi/signature_reads.h"

namespace blk::csi {
namespace {

struct CommandResult {
  int exit_status = 0;
  std::string output;  // stdout and stderr
};

// Runs argv[0] (looked up in PATH) and collects its output.
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, "pipe2");
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    return absl::ErrnoToStatus(err, "fork");
  }
  if (pid == 0) {
    // No answer to a prompt (mkfs asks before it writes over a signature): it gives up.
    const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::dup2(pipe_fds[1], STDERR_FILENO);
    ::execvp(args[0], args.data());
    _exit(127);
  }
  ::close(pipe_fds[1]);
  CommandResult result;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(pipe_fds[0], buffer, sizeof(buffer))) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    result.output.append(buffer, static_cast<size_t>(n));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return absl::ErrnoToStatus(errno, "waitpid");
  }
  result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (result.exit_status == 127) {
    return absl::FailedPreconditionError(absl::StrCat(argv[0], " cannot be run (not in PATH?)"));
  }
  return result;
}

struct MountOptions {
  unsigned long flags = 0;
  std::vector<std::string> data;
};

MountOptions ToMountOptions(const std::vector<std::string>& options) {
  static const std::pair<const char*, unsigned long> kFlags[] = {
      {"ro", MS_RDONLY},         {"noatime", MS_NOATIME},  {"nodiratime", MS_NODIRATIME},
      {"relatime", MS_RELATIME}, {"nodev", MS_NODEV},      {"nosuid", MS_NOSUID},
      {"noexec", MS_NOEXEC},     {"sync", MS_SYNCHRONOUS}, {"dirsync", MS_DIRSYNC},
  };
  MountOptions result;
  for (const std::string& option : options) {
    bool known = false;
    for (const auto& [name, flag] : kFlags) {
      if (option == name) {
        result.flags |= flag;
        known = true;
      }
    }
    if (!known && option != "rw" && option != "defaults") result.data.push_back(option);
  }
  return result;
}

std::string MajorMinor(dev_t dev) { return absl::StrCat(major(dev), ":", minor(dev)); }

}  // namespace

std::string DeviceContents::Describe() const {
  if (ambivalent) return "several signatures (see wipefs -n)";
  std::string text = type;
  if (!partition_table.empty()) {
    absl::StrAppend(&text, text.empty() ? "" : " and ", "a ", partition_table, " partition table");
  }
  return text.empty() ? "nothing" : text;
}

absl::StatusOr<DeviceContents> Mounter::Probe(const std::string& device) const {
  // blkid's "nothing found" also means "could not read": only trusted for a device that reads.
  if (absl::Status readable = ReadWhereSignaturesLive(device); !readable.ok()) return readable;
  absl::StatusOr<CommandResult> result = RunCommand({"blkid", "-p", "-o", "export", device});
  if (!result.ok()) return result.status();
  DeviceContents contents;
  // blkid exits 2 when it finds nothing, 8 when the signatures it found contradict each other.
  if (result->exit_status == 2) return contents;
  if (result->exit_status == 8) {
    contents.ambivalent = true;
    return contents;
  }
  if (result->exit_status != 0) {
    return absl::InternalError(absl::StrCat("blkid ", device, " failed (exit status ",
                                            result->exit_status, "): ", result->output));
  }
  for (absl::string_view line : absl::StrSplit(result->output, '\n')) {
    if (absl::ConsumePrefix(&line, "TYPE=")) contents.type = std::string(line);
    if (absl::ConsumePrefix(&line, "PTTYPE=")) contents.partition_table = std::string(line);
  }
  return contents;
}

absl::Status Mounter::MakeFilesystem(const std::string& device, const std::string& fs_type) const {
  // Never forced (-F, -f): blk-csi formats only what Probe found empty, and should a signature
  // have become readable since, mkfs refuses to write over it (mkfs.ext4 asks, and stdin gives
  // no answer; mkfs.xfs refuses outright).
  std::vector<std::string> argv = {absl::StrCat("mkfs.", fs_type), "-q", device};
  absl::StatusOr<CommandResult> result = RunCommand(argv);
  if (!result.ok()) return result.status();
  if (result->exit_status != 0) {
    return absl::InternalError(absl::StrCat(argv[0], " ", device, " failed (exit status ",
                                            result->exit_status, "): ", result->output));
  }
  return absl::OkStatus();
}

absl::Status Mounter::GrowFilesystem(const std::string& device, const std::string& mount_path,
                                     const std::string& fs_type) const {
  std::vector<std::string> argv;
  if (fs_type == "ext4") {
    argv = {"resize2fs", device};
  } else if (fs_type == "xfs") {
    argv = {"xfs_growfs", mount_path};
  } else {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot grow the '", fs_type, "' file system on ", device, " (only ext4 and xfs)"));
  }
  absl::StatusOr<CommandResult> result = RunCommand(argv);
  if (!result.ok()) return result.status();
  if (result->exit_status != 0) {
    return absl::InternalError(absl::StrCat(argv[0], " ", argv[1], " failed (exit status ",
                                            result->exit_status, "): ", result->output));
  }
  return absl::OkStatus();
}

absl::Status Mounter::Mount(const std::string& device, const std::string& target,
                            const std::string& fs_type,
                            const std::vector<std::string>& flags) const {
  std::error_code error;
  std::filesystem::create_directories(target, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot create ", target, ": ", error.message()));
  }
  const MountOptions options = ToMountOptions(flags);
  const std::string data = absl::StrJoin(options.data, ",");
  if (::mount(device.c_str(), target.c_str(), fs_type.c_str(), options.flags,
              data.empty() ? nullptr : data.c_str()) != 0) {
    return absl::ErrnoToStatus(errno,
                               absl::StrCat("mount ", device, " (", fs_type, ") on ", target));
  }
  return absl::OkStatus();
}

absl::Status Mounter::BindMount(const std::string& source, const std::string& target,
                                bool read_only) const {
  if (::mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("bind mount ", source, " on ", target));
  }
  // A bind ignores MS_RDONLY; only a remount of the bind makes it read-only.
  if (read_only &&
      ::mount(nullptr, target.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0) {
    const int err = errno;
    ::umount2(target.c_str(), 0);
    return absl::ErrnoToStatus(err, absl::StrCat("remount read-only ", target));
  }
  return absl::OkStatus();
}

absl::Status Mounter::Unmount(const std::string& target) const {
  absl::StatusOr<bool> mounted = IsMountPoint(target);
  if (!mounted.ok()) return mounted.status();
  if (!*mounted) return absl::OkStatus();
  if (::umount2(target.c_str(), UMOUNT_NOFOLLOW) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("umount ", target));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> Mounter::IsMountPoint(const std::string& path) const {
  absl::StatusOr<std::vector<MountEntry>> table = ReadMountTable();
  if (!table.ok()) return table.status();
  for (const MountEntry& entry : *table) {
    if (entry.mount_point == path) return true;
  }
  return false;
}

absl::StatusOr<std::vector<std::string>> Mounter::MountsOf(const std::string& device,
                                                           const std::string& except) const {
  struct stat st;
  if (::stat(device.c_str(), &st) != 0) return absl::ErrnoToStatus(errno, device);
  const std::string device_number = MajorMinor(st.st_rdev);
  // A bind of the device node is a mount of the file system holding the node (devtmpfs),
  // rooted at the node.
  const std::string node_fs = MajorMinor(st.st_dev);
  const std::string node_name =
      absl::StrCat("/", std::filesystem::path(device).filename().string());
  absl::StatusOr<std::vector<MountEntry>> table = ReadMountTable();
  if (!table.ok()) return table.status();
  std::vector<std::string> mounts;
  for (const MountEntry& entry : *table) {
    if (entry.mount_point == except) continue;
    const bool file_system = entry.major_minor == device_number;
    const bool node_bind = entry.major_minor == node_fs && absl::EndsWith(entry.root, node_name);
    if (file_system || node_bind) mounts.push_back(entry.mount_point);
  }
  return mounts;
}

}  // namespace blk::csi
