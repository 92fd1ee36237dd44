#include "server/ublk/numa_nodes.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "common/read_file.h"
#include "server/ublk/cpu_list.h"

namespace blk::server {

std::vector<cpu_set_t> NumaNodeCpus(const std::string& node_dir) {
  std::vector<cpu_set_t> nodes;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(node_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (!absl::StartsWith(name, "node") || name.size() == 4 ||
        name.find_first_not_of("0123456789", 4) != std::string::npos) {
      continue;
    }
    absl::StatusOr<std::string> text = ReadFileToString(entry.path() / "cpulist");
    if (!text.ok()) continue;
    const absl::string_view list = absl::StripAsciiWhitespace(*text);
    absl::StatusOr<std::vector<int>> cpus =
        ParseCpuList(std::string_view(list.data(), list.size()));
    if (cpus.ok()) nodes.push_back(CpuSetOf(*cpus));
  }
  return nodes;
}

}  // namespace blk::server
