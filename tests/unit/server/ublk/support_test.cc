#include "server/ublk/support.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/ublk/abi.h"

namespace blk::server {
namespace {

using ::testing::ElementsAre;

TEST(UblkFeatureNames, NamesTheFeaturesOfKernel6_12) {
  EXPECT_THAT(UblkFeatureNames(0x1fe),
              ElementsAre("COMP_IN_TASK", "NEED_GET_DATA", "USER_RECOVERY", "USER_RECOVERY_REISSUE",
                          "UNPRIVILEGED_DEV", "CMD_IOCTL_ENCODE", "USER_COPY", "ZONED"));
}

TEST(UblkFeatureNames, NamesEveryFeatureOfKernel7_3) {
  std::vector<std::string> names = UblkFeatureNames(0x1fffff);
  ASSERT_EQ(names.size(), 21u);
  EXPECT_EQ(names.front(), "ZERO_COPY");
  EXPECT_EQ(names[11], "AUTO_BUF_REG");
  EXPECT_EQ(names[15], "BATCH_IO");
  EXPECT_EQ(names[17], "SAFE_STOP_DEV");
  for (const std::string& name : names) EXPECT_EQ(name.find("BIT_"), std::string::npos) << name;
}

TEST(UblkFeatureNames, UnknownBitsAreNamedByNumber) {
  EXPECT_THAT(UblkFeatureNames((1ULL << 40) | 1), ElementsAre("ZERO_COPY", "BIT_40"));
}

TEST(UblkFeatureNames, EveryKnownFeatureHasAName) {
  std::vector<std::string> names = UblkFeatureNames(abi::kFKnownFeatures);
  EXPECT_EQ(names.size(), abi::kKnownFeatureBits);
  for (const std::string& name : names) EXPECT_EQ(name.find("BIT_"), std::string::npos) << name;
  EXPECT_THAT(UblkFeatureNames(uint64_t{1} << abi::kKnownFeatureBits), ElementsAre("BIT_21"));
}

TEST(UblkFeatureNames, NoFeaturesNoNames) { EXPECT_TRUE(UblkFeatureNames(0).empty()); }

TEST(ProbeUblk, ExplainsWhyWhenTheControlDeviceIsMissing) {
  UblkSupport support = ProbeUblk();
  if (support.control_available) GTEST_SKIP() << "this machine has ublk";
  EXPECT_NE(support.error.find("/dev/ublk-control"), std::string::npos) << support.error;
  EXPECT_EQ(support.features, 0u);
}

}  // namespace
}  // namespace blk::server
