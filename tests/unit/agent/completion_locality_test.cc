#include "agent/metrics/completion_locality.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "agent/metrics/completion_locality_metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/temp_dir.h"

namespace blk::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseHctxCpuList, ReadsTheBlkMqSeparatorAndEmptyLists) {
  EXPECT_EQ(*ParseHctxCpuList("0, 1\n"), (CpuSet{0, 1}));
  EXPECT_EQ(*ParseHctxCpuList("3\n"), CpuSet{3});
  EXPECT_EQ(*ParseHctxCpuList("\n"), CpuSet{});
}

TEST(ParseHctxCpuList, RejectsGarbage) {
  EXPECT_FALSE(ParseHctxCpuList("a").ok());
  EXPECT_FALSE(ParseHctxCpuList("3-1").ok());
}

TEST(ClassifyCompletion, SameCpuWinsOverSharedHctx) {
  const std::vector<CpuSet> hctx = {{0, 1}, {2, 3}};
  EXPECT_EQ(ClassifyCompletion(1, 1, hctx), CompletionLocality::kSameCpu);
  EXPECT_EQ(ClassifyCompletion(0, 1, hctx), CompletionLocality::kSameHctxGroup);
  EXPECT_EQ(ClassifyCompletion(1, 2, hctx), CompletionLocality::kOther);
  EXPECT_EQ(ClassifyCompletion(1, 0, {}), CompletionLocality::kOther);
}

TEST(SumByLocality, AddsEveryPairToItsClass) {
  const std::vector<CpuSet> hctx = {{0}, {1}, {2, 3}};
  const LocalityTotals totals =
      SumByLocality({{0, 0, 5}, {1, 1, 7}, {1, 0, 11}, {2, 3, 13}, {3, 2, 17}}, hctx);
  EXPECT_EQ(totals.same_cpu, 12u);
  EXPECT_EQ(totals.same_hctx_group, 30u);
  EXPECT_EQ(totals.other, 11u);
}

class BlockDeviceTopologyTest : public ::testing::Test {
 protected:
  void Write(const std::string& relative, const std::string& text) {
    const std::filesystem::path path = std::filesystem::path(dir_.path()) / relative;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }
  testing::TempDir dir_;
};

TEST_F(BlockDeviceTopologyTest, ReadsDevAndEveryHctxCpuList) {
  Write("ublkb3/dev", "259:7\n");
  Write("ublkb3/mq/0/cpu_list", "0\n");
  Write("ublkb3/mq/1/cpu_list", "1, 2\n");
  absl::StatusOr<BlockDeviceTopology> topology = ReadBlockDeviceTopology("ublkb3", dir_.path());
  ASSERT_TRUE(topology.ok()) << topology.status();
  EXPECT_EQ(topology->kernel_dev, (259u << 20) | 7u);
  std::vector<CpuSet> hctx = topology->hctx_cpus;
  std::sort(hctx.begin(), hctx.end());
  EXPECT_THAT(hctx, ElementsAre(CpuSet{0}, CpuSet{1, 2}));
}

TEST_F(BlockDeviceTopologyTest, NamesAMissingDevice) {
  absl::StatusOr<BlockDeviceTopology> topology = ReadBlockDeviceTopology("nvme9n1", dir_.path());
  EXPECT_EQ(topology.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(topology.status().message(), HasSubstr("nvme9n1"));
}

TEST_F(BlockDeviceTopologyTest, RejectsABadDeviceNumber) {
  Write("nullb0/dev", "x:1\n");
  EXPECT_EQ(ReadBlockDeviceTopology("nullb0", dir_.path()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(BlockDeviceTopologyTest, RefusesPathsAsNames) {
  EXPECT_EQ(ReadBlockDeviceTopology("../etc", dir_.path()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(BlockDeviceName, AcceptsNamesAndDevPaths) {
  EXPECT_EQ(*BlockDeviceName("nvme0n1"), "nvme0n1");
  EXPECT_EQ(*BlockDeviceName("/dev/nullb0"), "nullb0");
}

TEST(BlockDeviceName, RejectsOtherPaths) {
  EXPECT_FALSE(BlockDeviceName("").ok());
  EXPECT_FALSE(BlockDeviceName("/dev/").ok());
  EXPECT_FALSE(BlockDeviceName("/tmp/x").ok());
  EXPECT_THAT(BlockDeviceName("a/b").status().message(), HasSubstr("'a/b'"));
}

}  // namespace
}  // namespace blk::agent
