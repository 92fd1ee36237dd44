#include "agent/api/volume_service.h"

#include <utility>

#include "agent/devices/node_info.h"
#include "spdlog/spdlog.h"

namespace blk::agent {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl and gRPC share the canonical code numbering.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

grpc::ServerUnaryReactor* VolumeService::Queue(grpc::CallbackServerContext* context,
                                               const char* method, Access access,
                                               std::function<grpc::Status()> handler) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status permitted = access_.Check(*context, method, access); !permitted.ok()) {
    reactor->Finish(ToGrpcStatus(permitted));
    return reactor;
  }
  calls_.Submit(CallQueue::Call{
      .method = method,
      .deadline = context->deadline(),
      .cancelled = [context] { return context->IsCancelled(); },
      .run = [reactor, handler = std::move(handler)] { reactor->Finish(handler()); },
      .refuse = [reactor](const absl::Status& status) { reactor->Finish(ToGrpcStatus(status)); },
  });
  return reactor;
}

grpc::ServerUnaryReactor* VolumeService::CreateVolume(grpc::CallbackServerContext* context,
                                                      const v1::CreateVolumeRequest* request,
                                                      v1::CreateVolumeResponse* response) {
  return Queue(context, "CreateVolume", Access::kWrite,
               [=, this] { return Create(*request, *response); });
}

grpc::ServerUnaryReactor* VolumeService::DeleteVolume(grpc::CallbackServerContext* context,
                                                      const v1::DeleteVolumeRequest* request,
                                                      v1::DeleteVolumeResponse*) {
  return Queue(context, "DeleteVolume", Access::kWrite, [=, this] { return Delete(*request); });
}

grpc::ServerUnaryReactor* VolumeService::GetVolume(grpc::CallbackServerContext* context,
                                                   const v1::GetVolumeRequest* request,
                                                   v1::GetVolumeResponse* response) {
  return Queue(context, "GetVolume", Access::kRead, [=, this] { return Get(*request, *response); });
}

grpc::ServerUnaryReactor* VolumeService::ListVolumes(grpc::CallbackServerContext* context,
                                                     const v1::ListVolumesRequest*,
                                                     v1::ListVolumesResponse* response) {
  return Queue(context, "ListVolumes", Access::kRead, [=, this] { return List(*response); });
}

grpc::ServerUnaryReactor* VolumeService::UpdateVolume(grpc::CallbackServerContext* context,
                                                      const v1::UpdateVolumeRequest* request,
                                                      v1::UpdateVolumeResponse* response) {
  return Queue(context, "UpdateVolume", Access::kWrite,
               [=, this] { return Update(*request, *response); });
}

grpc::ServerUnaryReactor* VolumeService::ResizeVolume(grpc::CallbackServerContext* context,
                                                      const v1::ResizeVolumeRequest* request,
                                                      v1::ResizeVolumeResponse* response) {
  return Queue(context, "ResizeVolume", Access::kWrite,
               [=, this] { return Resize(*request, *response); });
}

grpc::ServerUnaryReactor* VolumeService::GetNodeInfo(grpc::CallbackServerContext* context,
                                                     const v1::GetNodeInfoRequest*,
                                                     v1::GetNodeInfoResponse* response) {
  return Queue(context, "GetNodeInfo", Access::kRead, [=, this] { return NodeInfo(*response); });
}

grpc::ServerUnaryReactor* VolumeService::GetVolumeStats(grpc::CallbackServerContext* context,
                                                        const v1::GetVolumeStatsRequest* request,
                                                        v1::GetVolumeStatsResponse* response) {
  return Queue(context, "GetVolumeStats", Access::kRead,
               [=, this] { return Stats(*request, *response); });
}

grpc::Status VolumeService::Create(const v1::CreateVolumeRequest& request,
                                   v1::CreateVolumeResponse& response) {
  absl::StatusOr<v1::Volume> volume = volumes_.Create(request.volume(), request.size_is_minimum());
  if (!volume.ok()) {
    spdlog::info("CreateVolume {}: {}", request.volume().id(), volume.status().ToString());
    return ToGrpcStatus(volume.status());
  }
  *response.mutable_volume() = std::move(*volume);
  return grpc::Status::OK;
}

grpc::Status VolumeService::Delete(const v1::DeleteVolumeRequest& request) {
  absl::Status deleted = volumes_.Delete(request.id(), request.force());
  if (!deleted.ok()) spdlog::info("DeleteVolume {}: {}", request.id(), deleted.ToString());
  return ToGrpcStatus(deleted);
}

grpc::Status VolumeService::Get(const v1::GetVolumeRequest& request,
                                v1::GetVolumeResponse& response) {
  absl::StatusOr<v1::Volume> volume = volumes_.Get(request.id());
  if (!volume.ok()) return ToGrpcStatus(volume.status());
  *response.mutable_volume() = std::move(*volume);
  return grpc::Status::OK;
}

grpc::Status VolumeService::List(v1::ListVolumesResponse& response) {
  for (v1::Volume& volume : volumes_.List()) *response.add_volumes() = std::move(volume);
  return grpc::Status::OK;
}

grpc::Status VolumeService::Update(const v1::UpdateVolumeRequest& request,
                                   v1::UpdateVolumeResponse& response) {
  absl::StatusOr<v1::Volume> volume = volumes_.Update(request.volume(), request.update_mask());
  if (!volume.ok()) {
    spdlog::info("UpdateVolume {}: {}", request.volume().id(), volume.status().ToString());
    return ToGrpcStatus(volume.status());
  }
  *response.mutable_volume() = std::move(*volume);
  return grpc::Status::OK;
}

grpc::Status VolumeService::Resize(const v1::ResizeVolumeRequest& request,
                                   v1::ResizeVolumeResponse& response) {
  absl::StatusOr<v1::Volume> volume = volumes_.Resize(request.id(), request.size_bytes());
  if (!volume.ok()) {
    spdlog::info("ResizeVolume {}: {}", request.id(), volume.status().ToString());
    return ToGrpcStatus(volume.status());
  }
  *response.mutable_volume() = std::move(*volume);
  return grpc::Status::OK;
}

grpc::Status VolumeService::NodeInfo(v1::GetNodeInfoResponse& response) {
  response = ReadNodeInfo(bpf_locality_);
  return grpc::Status::OK;
}

grpc::Status VolumeService::Stats(const v1::GetVolumeStatsRequest& request,
                                  v1::GetVolumeStatsResponse& response) {
  absl::StatusOr<v1::VolumeStats> stats = volumes_.Stats(request.id());
  if (!stats.ok()) return ToGrpcStatus(stats.status());
  *response.mutable_stats() = std::move(*stats);
  return grpc::Status::OK;
}

}  // namespace blk::agent
