#pragma once

#include <cstdint>
#include <string>

#include "cli/volume_client.h"
#include "csi/v1/csi.grpc.pb.h"

namespace blk::csi {

// What CreateVolume provisions when the request gives no capacity_range and the
// StorageClass no size, for the backends that have no size of their own (file,
// null). An nbd or nvme volume then takes the export's / namespace's size.
inline constexpr int64_t kDefaultCapacityBytes = int64_t{1} << 30;  // 1 GiB

// CSI Controller, for dynamic provisioning next to the node plugin (the
// csi-provisioner sidecar runs in the node pod with --node-deployment, so this
// node's controller provisions the volumes of the pods scheduled to it).
// CreateVolume only describes a volume: its id (from the name), its volume
// context (the StorageClass parameters, checked with the node's own parser,
// plus the size) and its topology (this node). NodeStageVolume creates the
// agent volume from that context and NodeUnstageVolume deletes it, so
// DeleteVolume has nothing to remove. No attach (ControllerPublish).
//
// The controller keeps no state: every answer is derived from the request
// alone, so the same request always gets the same answer (the spec's
// idempotency) and a restart loses nothing. The only state of record is the
// agent's, asked read-only: a volume of that id already staged on this node
// with another size makes CreateVolume ALREADY_EXISTS, and DeleteVolume of a
// volume still staged is FAILED_PRECONDITION.
class ControllerService final : public ::csi::v1::Controller::Service {
 public:
  ControllerService(std::string node_id, std::string topology_key, blk::cli::VolumeClient& agent);

  grpc::Status CreateVolume(grpc::ServerContext* context,
                            const ::csi::v1::CreateVolumeRequest* request,
                            ::csi::v1::CreateVolumeResponse* response) override;
  grpc::Status DeleteVolume(grpc::ServerContext* context,
                            const ::csi::v1::DeleteVolumeRequest* request,
                            ::csi::v1::DeleteVolumeResponse* response) override;
  grpc::Status ValidateVolumeCapabilities(
      grpc::ServerContext* context, const ::csi::v1::ValidateVolumeCapabilitiesRequest* request,
      ::csi::v1::ValidateVolumeCapabilitiesResponse* response) override;
  grpc::Status ControllerGetCapabilities(
      grpc::ServerContext* context, const ::csi::v1::ControllerGetCapabilitiesRequest* request,
      ::csi::v1::ControllerGetCapabilitiesResponse* response) override;

 private:
  // OK when the requisite topologies (if any) include this node.
  grpc::Status CheckTopology(const ::csi::v1::CreateVolumeRequest& request) const;

  const std::string node_id_;
  const std::string topology_key_;
  blk::cli::VolumeClient& agent_;
};

}  // namespace blk::csi
