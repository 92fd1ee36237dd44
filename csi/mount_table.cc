#include "csi/mount_table.h"

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace blk::csi {
namespace {

// mountinfo writes space, tab, newline and backslash in paths as \ooo.
std::string Unescape(absl::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && field[i + 1] >= '0' && field[i + 1] <= '3' &&
        field[i + 2] >= '0' && field[i + 2] <= '7' && field[i + 3] >= '0' && field[i + 3] <= '7') {
      out.push_back(static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                                      (field[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(field[i]);
    }
  }
  return out;
}

}  // namespace

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
    entry.root = Unescape(fields[3]);
    entry.mount_point = Unescape(fields[4]);
    for (absl::string_view option : absl::StrSplit(fields[5], ',')) {
      if (option == "ro") entry.read_only = true;
    }
    entry.fs_type = std::string(fields[separator + 1]);
    entry.source = Unescape(fields[separator + 2]);
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
