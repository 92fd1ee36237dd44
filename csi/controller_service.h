#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "client/volume_client.h"
#include "csi/provisioned_volumes.h"
#include "csi/v1/csi.grpc.pb.h"

namespace blk::csi {

// What CreateVolume provisions when the request gives no capacity_range and the
// StorageClass no size, for the backends that have no size of their own (file,
// null). An nbd or nvme volume then takes the export's / namespace's size.
inline constexpr int64_t kDefaultCapacityBytes = int64_t{1} << 30;  // 1 GiB

// CSI Controller, for dynamic provisioning next to the node plugin (the
// csi-provisioner sidecar runs in the node pod with --node-deployment, so this
// node's controller provisions the volumes of the pods scheduled to it).
// CreateVolume gives every volume a backing of its own: the StorageClass's
// backend with the volume's id in place of {volume} (backing_template.h) — for
// a file pool the controller creates the file, for an NBD class the server
// serves one export per volume — and refuses a class whose volumes would share
// one. It records each volume (ProvisionedVolumes, in its state directory), so
// that a repeated name gets the same answer, or ALREADY_EXISTS for another
// capacity or class, and DeleteVolume removes the file it made. NodeStageVolume
// creates the agent volume from the volume context and NodeUnstageVolume deletes
// it. No attach (ControllerPublish). ControllerModifyVolume (a VolumeAttributesClass
// change) changes a volume's limits: on the staged agent volume at once, and in
// the record, whose limits a later NodeStageVolume on this node takes over the
// context's.
class ControllerService final : public ::csi::v1::Controller::Service {
 public:
  ControllerService(std::string node_id, std::string topology_key, blk::client::VolumeClient& agent,
                    ProvisionedVolumes volumes);

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
  grpc::Status ControllerModifyVolume(grpc::ServerContext* context,
                                      const ::csi::v1::ControllerModifyVolumeRequest* request,
                                      ::csi::v1::ControllerModifyVolumeResponse* response) override;

 private:
  // OK when the requisite topologies (if any) include this node.
  grpc::Status CheckTopology(const ::csi::v1::CreateVolumeRequest& request) const;
  // OK when `request` asks for the volume `recorded` is (the spec's "compatible"): the same
  // name and parameters, a capacity within the range; else ALREADY_EXISTS saying what differs.
  grpc::Status CheckSameVolume(const ::csi::v1::CreateVolumeRequest& request,
                               const std::map<std::string, std::string>& parameters,
                               const ProvisionedVolume& recorded) const;
  void Answer(const ProvisionedVolume& recorded, ::csi::v1::CreateVolumeResponse* response) const;
  // The record of `volume_id` in `recorded`; NOT_FOUND ending in `without_record` when this
  // controller has none.
  grpc::Status FindRecord(const std::string& volume_id, absl::string_view without_record,
                          ProvisionedVolume* recorded) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string node_id_;
  const std::string topology_key_;
  blk::client::VolumeClient& agent_;
  // Create and Delete one at a time: each reads a record and acts on it.
  absl::Mutex mu_;
  const ProvisionedVolumes volumes_;
};

}  // namespace blk::csi
