#include "csi/mount_table.h"

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/mountinfo_escape.h"

namespace blk::csi {
absl::StatusOr<std::vector<MountEntry>> ParseMountInfo(absl::string_view text) {
  std::vector<MountEntry> entries;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    // id parent major:minor root mount-point options [optional...] - fstype source super-options
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
    size_t separator = 6;
    while (separator < fields.size() && fields[separator] != "-") ++separator;
    if (fields.size() < 6 || separator + 2 >= fields.size()) {
      return absl::InternalError(absl::StrCat("unexpected mountinfo line '", line, "'"));
    }
    MountEntry entry;
    entry.major_minor = std::string(fields[2]);
    entry.root = UnescapeMountInfoField(fields[3]);
    entry.mount_point = UnescapeMountInfoField(fields[4]);
    for (absl::string_view option : absl::StrSplit(fields[5], ',')) {
      if (option == "ro") entry.read_only = true;
    }
    entry.fs_type = std::string(fields[separator + 1]);
    entry.source = UnescapeMountInfoField(fields[separator + 2]);
    entries.push_back(std::move(entry));
  }
  return entries;
}

absl::StatusOr<std::vector<MountEntry>> ReadMountTable() {
  std::ifstream file("/proc/self/mountinfo");
  if (!file) return absl::InternalError("cannot read /proc/self/mountinfo");
  std::stringstream text;
  text << file.rdbuf();
  return ParseMountInfo(text.str());
}

}  // namespace blk::csi
