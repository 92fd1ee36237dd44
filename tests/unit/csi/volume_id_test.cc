#include "csi/volume_id.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace blk::csi {
namespace {

using ::testing::MatchesRegex;

TEST(VolumeIdTest, AValidAgentIdIsItself) {
  EXPECT_EQ(VolumeIdForName("pvc-0f3c9a7e-5b1d-4c2e-9a8f-1d2e3f4a5b6c"),
            "pvc-0f3c9a7e-5b1d-4c2e-9a8f-1d2e3f4a5b6c");
  EXPECT_EQ(VolumeIdForName("a"), "a");
}

TEST(VolumeIdTest, AnyOtherNameGetsAStableValidId) {
  const std::string long_name(100, 'x');
  const std::vector<std::string> names = {
      "Pvc-A", "-a-", "a_b", "ümlaut", "...", long_name, std::string(63, 'a') + "b"};
  for (const std::string& name : names) {
    const std::string id = VolumeIdForName(name);
    EXPECT_EQ(id, VolumeIdForName(name)) << name;
    EXPECT_LE(id.size(), 63u) << name;
    EXPECT_THAT(id, MatchesRegex("[a-z0-9]([-a-z0-9]*[a-z0-9])?")) << name;
    EXPECT_NE(id, name);
  }
  EXPECT_THAT(VolumeIdForName("Pvc-A"), MatchesRegex("pvc-a-[0-9a-f]{16}"));
  EXPECT_THAT(VolumeIdForName("..."), MatchesRegex("blk-[0-9a-f]{16}"));
  // Names the prefix cannot tell apart are still two ids.
  EXPECT_NE(VolumeIdForName("a_b"), VolumeIdForName("a.b"));
  EXPECT_NE(VolumeIdForName(long_name + "1"), VolumeIdForName(long_name + "2"));
}

}  // namespace
}  // namespace blk::csi
