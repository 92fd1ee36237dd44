#include "agent/service_notifier.h"

#include <initializer_list>
#include <vector>

#include "gtest/gtest.h"

namespace blk::agent {
namespace {

std::vector<v1::Volume> VolumesIn(std::initializer_list<v1::VolumeState> states) {
  std::vector<v1::Volume> volumes;
  for (v1::VolumeState state : states) volumes.emplace_back().mutable_status()->set_state(state);
  return volumes;
}

TEST(ServingStatusTest, NoVolumes) { EXPECT_EQ(ServingStatus({}), "serving; 0 volumes recovered"); }

TEST(ServingStatusTest, OneVolume) {
  EXPECT_EQ(ServingStatus(VolumesIn({v1::VOLUME_STATE_LIVE})),
            "serving; 1 volume recovered (1 live)");
}

TEST(ServingStatusTest, CountsEachState) {
  EXPECT_EQ(ServingStatus(VolumesIn(
                {v1::VOLUME_STATE_LIVE, v1::VOLUME_STATE_DEGRADED, v1::VOLUME_STATE_LIVE})),
            "serving; 3 volumes recovered (1 degraded, 2 live)");
}

}  // namespace
}  // namespace blk::agent
