#include "agent/volume_service.h"

#include "agent/node_info.h"
#include "spdlog/spdlog.h"

namespace blk::agent {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl and gRPC share the canonical code numbering.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

grpc::Status VolumeService::CreateVolume(grpc::ServerContext*,
                                         const v1::CreateVolumeRequest* request,
                                         v1::CreateVolumeResponse* response) {
  absl::StatusOr<v1::Volume> volume = volumes_.Create(request->volume());
  if (!volume.ok()) {
    spdlog::info("CreateVolume {}: {}", request->volume().id(), volume.status().ToString());
    return ToGrpcStatus(volume.status());
  }
  *response->mutable_volume() = std::move(*volume);
  return grpc::Status::OK;
}

grpc::Status VolumeService::DeleteVolume(grpc::ServerContext*,
                                         const v1::DeleteVolumeRequest* request,
                                         v1::DeleteVolumeResponse*) {
  absl::Status deleted = volumes_.Delete(request->id(), request->force());
  if (!deleted.ok()) spdlog::info("DeleteVolume {}: {}", request->id(), deleted.ToString());
  return ToGrpcStatus(deleted);
}

grpc::Status VolumeService::GetVolume(grpc::ServerContext*, const v1::GetVolumeRequest* request,
                                      v1::GetVolumeResponse* response) {
  absl::StatusOr<v1::Volume> volume = volumes_.Get(request->id());
  if (!volume.ok()) return ToGrpcStatus(volume.status());
  *response->mutable_volume() = std::move(*volume);
  return grpc::Status::OK;
}

grpc::Status VolumeService::ListVolumes(grpc::ServerContext*, const v1::ListVolumesRequest*,
                                        v1::ListVolumesResponse* response) {
  for (v1::Volume& volume : volumes_.List()) *response->add_volumes() = std::move(volume);
  return grpc::Status::OK;
}

grpc::Status VolumeService::UpdateVolume(grpc::ServerContext*,
                                         const v1::UpdateVolumeRequest* request,
                                         v1::UpdateVolumeResponse* response) {
  absl::StatusOr<v1::Volume> volume = volumes_.Update(request->volume(), request->update_mask());
  if (!volume.ok()) {
    spdlog::info("UpdateVolume {}: {}", request->volume().id(), volume.status().ToString());
    return ToGrpcStatus(volume.status());
  }
  *response->mutable_volume() = std::move(*volume);
  return grpc::Status::OK;
}

grpc::Status VolumeService::GetNodeInfo(grpc::ServerContext*, const v1::GetNodeInfoRequest*,
                                        v1::GetNodeInfoResponse* response) {
  *response = ReadNodeInfo(bpf_locality_);
  return grpc::Status::OK;
}

grpc::Status VolumeService::GetVolumeStats(grpc::ServerContext*,
                                           const v1::GetVolumeStatsRequest* request,
                                           v1::GetVolumeStatsResponse* response) {
  absl::StatusOr<v1::VolumeStats> stats = volumes_.Stats(request->id());
  if (!stats.ok()) return ToGrpcStatus(stats.status());
  *response->mutable_stats() = std::move(*stats);
  return grpc::Status::OK;
}

}  // namespace blk::agent
