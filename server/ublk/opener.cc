#include "server/ublk/opener.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

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

void AddProcessOpeners(const DeviceNumber& device, const std::string& proc,
                       std::vector<std::string>& openers) {
  std::error_code ec;
  for (const fs::directory_entry& process : fs::directory_iterator(proc, ec)) {
    const std::string pid = process.path().filename().string();
    if (!IsNumber(pid)) continue;
    std::error_code fd_ec;
    for (const fs::directory_entry& fd : fs::directory_iterator(process.path() / "fd", fd_ec)) {
      struct stat st {};
      // stat follows the fd link to the opened inode; processes and fds vanish while we look.
      if (::stat(fd.path().c_str(), &st) != 0) continue;
      const bool type_matches = device.block ? S_ISBLK(st.st_mode) : S_ISCHR(st.st_mode);
      if (!type_matches || ::major(st.st_rdev) != device.major ||
          ::minor(st.st_rdev) != device.minor) {
        continue;
      }
      std::string comm = ReadFirstLine(process.path() / "comm");
      openers.push_back(absl::StrCat("pid ", pid, " (", comm.empty() ? "?" : comm, ")"));
      break;
    }
  }
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

std::vector<std::string> FindOpeners(const DeviceNumber& device, const std::string& disk_name,
                                     const OpenerSources& sources) {
  std::vector<std::string> openers;
  AddProcessOpeners(device, sources.proc, openers);

  std::error_code ec;
  for (const fs::directory_entry& holder :
       fs::directory_iterator(fs::path(sources.sys_block) / disk_name / "holders", ec)) {
    openers.push_back(absl::StrCat("holder ", holder.path().filename().string()));
  }

  std::ifstream in(sources.mountinfo);
  std::stringstream text;
  text << in.rdbuf();
  for (const std::string& mount : MountPointsOf(text.str(), device.major, device.minor)) {
    openers.push_back(absl::StrCat("mounted at ", mount));
  }
  return openers;
}

}  // namespace blk::server
