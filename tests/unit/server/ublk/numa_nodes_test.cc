#include "server/ublk/numa_nodes.h"

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/ublk/cpu_list.h"
#include "tests/unit/temp_dir.h"

namespace blk::server {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(NumaNodeCpus, ReadsEachNodesCpuListLeavingOutNodesWithoutCpus) {
  blk::testing::TempDir sysfs;
  const auto node = [&](const std::string& name, const std::string& cpulist) {
    std::filesystem::create_directory(sysfs.path() + "/" + name);
    std::ofstream(sysfs.path() + "/" + name + "/cpulist") << cpulist;
  };
  node("node0", "0-1,4\n");
  node("node1", "2-3\n");
  node("node2", "\n");       // memory only
  node("nodex", "9\n");      // not a node
  node("has_cpu", "0-3\n");  // a sysfs file's name, not a node
  std::vector<std::vector<int>> cpus;
  for (const cpu_set_t& set : NumaNodeCpus(sysfs.path())) cpus.push_back(CpusOf(set));
  EXPECT_THAT(cpus, ::testing::UnorderedElementsAre(ElementsAre(0, 1, 4), ElementsAre(2, 3)));
}

TEST(NumaNodeCpus, IsEmptyWithoutTheDirectory) {
  EXPECT_THAT(NumaNodeCpus("/nonexistent/blk-test/node"), IsEmpty());
}

}  // namespace
}  // namespace blk::server
