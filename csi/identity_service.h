#pragma once

#include <string>

#include "client/volume_client.h"
#include "csi/v1/csi.grpc.pb.h"

namespace blk::csi {

// CSI Identity: who the plugin is, what it serves, and whether the agent
// behind it answers.
class IdentityService final : public ::csi::v1::Identity::Service {
 public:
  // `serves_controller`: the Controller service is served too (blk-csi --controller).
  IdentityService(std::string driver_name, bool serves_controller,
                  blk::client::VolumeClient& agent);

  grpc::Status GetPluginInfo(grpc::ServerContext* context,
                             const ::csi::v1::GetPluginInfoRequest* request,
                             ::csi::v1::GetPluginInfoResponse* response) override;
  // With the controller: CONTROLLER_SERVICE and VOLUME_ACCESSIBILITY_CONSTRAINTS
  // (a volume is reachable from its node only); a node plugin alone has none.
  grpc::Status GetPluginCapabilities(grpc::ServerContext* context,
                                     const ::csi::v1::GetPluginCapabilitiesRequest* request,
                                     ::csi::v1::GetPluginCapabilitiesResponse* response) override;
  // Ready when the agent answers and ublk is available; FAILED_PRECONDITION
  // (the spec's "unhealthy") otherwise.
  grpc::Status Probe(grpc::ServerContext* context, const ::csi::v1::ProbeRequest* request,
                     ::csi::v1::ProbeResponse* response) override;

 private:
  const std::string driver_name_;
  const bool serves_controller_;
  blk::client::VolumeClient& agent_;
};

}  // namespace blk::csi
