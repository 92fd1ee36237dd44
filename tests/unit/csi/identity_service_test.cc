#include "csi/identity_service.h"

#include <vector>

#include "absl/time/time.h"
#include "client/agent_address.h"
#include "client/volume_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace blk::csi {
namespace {

using Service = ::csi::v1::PluginCapability::Service;

std::vector<Service::Type> ServiceCapabilities(bool serves_controller) {
  blk::client::VolumeClient agent(blk::client::UnixAgentAddress("/nonexistent/blkagent.sock"),
                                  absl::Seconds(5));
  IdentityService identity("blk.csi.storage", serves_controller, agent);
  ::csi::v1::GetPluginCapabilitiesRequest request;
  ::csi::v1::GetPluginCapabilitiesResponse response;
  EXPECT_TRUE(identity.GetPluginCapabilities(nullptr, &request, &response).ok());
  std::vector<Service::Type> types;
  for (const auto& capability : response.capabilities()) {
    types.push_back(capability.service().type());
  }
  return types;
}

TEST(IdentityServiceTest, ANodePluginAloneHasNoCapabilities) {
  EXPECT_THAT(ServiceCapabilities(false), ::testing::IsEmpty());
}

TEST(IdentityServiceTest, WithTheControllerItsVolumesAreTopologyConstrained) {
  EXPECT_THAT(ServiceCapabilities(true),
              ::testing::UnorderedElementsAre(Service::CONTROLLER_SERVICE,
                                              Service::VOLUME_ACCESSIBILITY_CONSTRAINTS));
}

}  // namespace
}  // namespace blk::csi
