#pragma once

#include "agent/node_info.h"
#include "agent/volume_table.h"
#include "blk/v1/volume.grpc.pb.h"

namespace blk::agent {

// The gRPC face of the volume table: translates requests, and absl::Status to
// grpc::Status, and nothing else.
class VolumeService final : public v1::VolumeService::Service {
 public:
  VolumeService(VolumeTable& volumes, BpfLocalityStatus bpf_locality)
      : volumes_(volumes), bpf_locality_(std::move(bpf_locality)) {}

  grpc::Status CreateVolume(grpc::ServerContext* context, const v1::CreateVolumeRequest* request,
                            v1::CreateVolumeResponse* response) override;
  grpc::Status DeleteVolume(grpc::ServerContext* context, const v1::DeleteVolumeRequest* request,
                            v1::DeleteVolumeResponse* response) override;
  grpc::Status GetVolume(grpc::ServerContext* context, const v1::GetVolumeRequest* request,
                         v1::GetVolumeResponse* response) override;
  grpc::Status ListVolumes(grpc::ServerContext* context, const v1::ListVolumesRequest* request,
                           v1::ListVolumesResponse* response) override;
  grpc::Status UpdateVolume(grpc::ServerContext* context, const v1::UpdateVolumeRequest* request,
                            v1::UpdateVolumeResponse* response) override;
  grpc::Status GetNodeInfo(grpc::ServerContext* context, const v1::GetNodeInfoRequest* request,
                           v1::GetNodeInfoResponse* response) override;
  grpc::Status GetVolumeStats(grpc::ServerContext* context,
                              const v1::GetVolumeStatsRequest* request,
                              v1::GetVolumeStatsResponse* response) override;

 private:
  VolumeTable& volumes_;
  const BpfLocalityStatus bpf_locality_;
};

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace blk::agent
