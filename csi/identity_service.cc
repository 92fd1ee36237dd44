#include "csi/identity_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "csi/grpc_status.h"
#include "csi/version.h"

namespace blk::csi {

IdentityService::IdentityService(std::string driver_name, bool serves_controller,
                                 blk::client::VolumeClient& agent)
    : driver_name_(std::move(driver_name)), serves_controller_(serves_controller), agent_(agent) {}

grpc::Status IdentityService::GetPluginInfo(grpc::ServerContext*,
                                            const ::csi::v1::GetPluginInfoRequest*,
                                            ::csi::v1::GetPluginInfoResponse* response) {
  response->set_name(driver_name_);
  response->set_vendor_version(kCsiVersion);
  return grpc::Status::OK;
}

grpc::Status IdentityService::GetPluginCapabilities(
    grpc::ServerContext*, const ::csi::v1::GetPluginCapabilitiesRequest*,
    ::csi::v1::GetPluginCapabilitiesResponse* response) {
  if (!serves_controller_) return grpc::Status::OK;
  using Service = ::csi::v1::PluginCapability::Service;
  for (Service::Type type :
       {Service::CONTROLLER_SERVICE, Service::VOLUME_ACCESSIBILITY_CONSTRAINTS}) {
    response->add_capabilities()->mutable_service()->set_type(type);
  }
  return grpc::Status::OK;
}

grpc::Status IdentityService::Probe(grpc::ServerContext*, const ::csi::v1::ProbeRequest*,
                                    ::csi::v1::ProbeResponse* response) {
  absl::StatusOr<blk::v1::GetNodeInfoResponse> info = agent_.GetNodeInfo({});
  if (!info.ok()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("blkagent does not answer: ", info.status().message()));
  }
  if (!info->ublk_available()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "blkagent runs but ublk is not available on this node (ublk_drv?)");
  }
  response->mutable_ready()->set_value(true);
  return grpc::Status::OK;
}

}  // namespace blk::csi
