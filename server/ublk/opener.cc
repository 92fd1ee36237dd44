#include "server/ublk/opener.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/mountinfo_escape.h"

namespace blk::server {
namespace {

namespace fs = std::filesystem;

std::string ReadFirstLine(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

bool IsNumber(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::string ProcessName(const fs::path& process) {
  const std::string comm = ReadFirstLine(process / "comm");
  return absl::StrCat("pid ", process.filename().string(), " (", comm.empty() ? "?" : comm, ")");
}

std::vector<fs::path> Processes(const std::string& proc) {
  std::vector<fs::path> processes;
  std::error_code ec;
  for (const fs::directory_entry& process : fs::directory_iterator(proc, ec)) {
    if (IsNumber(process.path().filename().string())) processes.push_back(process.path());
  }
  // By pid: the oldest process of a namespace names it.
  std::sort(processes.begin(), processes.end(), [](const fs::path& a, const fs::path& b) {
    const std::string x = a.filename().string();
    const std::string y = b.filename().string();
    return x.size() != y.size() ? x.size() < y.size() : x < y;  // digits only
  });
  return processes;
}

void AddProcessOpeners(const DeviceNumber& device, const std::vector<fs::path>& processes,
                       std::vector<std::string>& openers) {
  for (const fs::path& process : processes) {
    std::error_code fd_ec;
    for (const fs::directory_entry& fd : fs::directory_iterator(process / "fd", fd_ec)) {
      struct stat st {};
      // stat follows the fd link to the opened inode; processes and fds vanish while we look.
      if (::stat(fd.path().c_str(), &st) != 0) continue;
      const bool type_matches = device.block ? S_ISBLK(st.st_mode) : S_ISCHR(st.st_mode);
      if (!type_matches || ::major(st.st_rdev) != device.major ||
          ::minor(st.st_rdev) != device.minor) {
        continue;
      }
      openers.push_back(ProcessName(process));
      break;
    }
  }
}

// The mounts of the device in every mount namespace some process is in, each namespace read once
// (through its first process's mountinfo); those outside the agent's own name that process.
void AddMountOpeners(const DeviceNumber& device, const std::string& proc,
                     const std::vector<fs::path>& processes, std::vector<std::string>& openers) {
  struct stat own {};
  const bool own_known = ::stat((fs::path(proc) / "self/ns/mnt").c_str(), &own) == 0;
  std::set<std::pair<dev_t, ino_t>> seen;
  for (const fs::path& process : processes) {
    struct stat ns {};
    // Processes vanish while we look, and their namespaces may be closed to us.
    if (::stat((process / "ns/mnt").c_str(), &ns) != 0) continue;
    if (!seen.insert({ns.st_dev, ns.st_ino}).second) continue;
    std::ifstream in(process / "mountinfo");
    std::stringstream text;
    text << in.rdbuf();
    const bool own_namespace = own_known && ns.st_dev == own.st_dev && ns.st_ino == own.st_ino;
    for (const std::string& mount : MountPointsOf(text.str(), device.major, device.minor)) {
      openers.push_back(own_namespace
                            ? absl::StrCat("mounted at ", mount)
                            : absl::StrCat("mounted at ", mount, " in the mount namespace of ",
                                           ProcessName(process)));
    }
  }
}

std::string BlindSpot(const OpenerSources& sources) {
  struct stat ns {};
  if (::stat((fs::path(sources.proc) / "self/ns/pid").c_str(), &ns) == 0 &&
      ns.st_ino == sources.host_pid_namespace_inode) {
    return "";
  }
  return "the agent does not run in the host's PID namespace, so processes and mounts of other "
         "containers are hidden from it (run it with the host's: hostPID in Kubernetes)";
}

}  // namespace

std::vector<std::string> MountPointsOf(absl::string_view mountinfo, unsigned major,
                                       unsigned minor) {
  // Fields: mount-id parent-id major:minor root mount-point options ...
  const std::string wanted = absl::StrCat(major, ":", minor);
  std::vector<std::string> mounts;
  for (absl::string_view line : absl::StrSplit(mountinfo, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.size() < 5 || fields[2] != wanted) continue;
    mounts.push_back(UnescapeMountInfoField(fields[4]));
  }
  return mounts;
}

Openers FindOpeners(const DeviceNumber& device, const std::string& disk_name,
                    const OpenerSources& sources) {
  Openers openers;
  const std::vector<fs::path> processes = Processes(sources.proc);
  AddProcessOpeners(device, processes, openers.found);

  std::error_code ec;
  for (const fs::directory_entry& holder :
       fs::directory_iterator(fs::path(sources.sys_block) / disk_name / "holders", ec)) {
    openers.found.push_back(absl::StrCat("holder ", holder.path().filename().string()));
  }

  AddMountOpeners(device, sources.proc, processes, openers.found);
  openers.blind_spot = BlindSpot(sources);
  return openers;
}

}  // namespace blk::server
