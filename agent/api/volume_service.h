#pragma once

#include <functional>

#include "agent/api/call_queue.h"
#include "agent/api/caller_access.h"
#include "agent/devices/node_info.h"
#include "agent/volumes/volume_table.h"
#include "blk/v1/volume.grpc.pb.h"

namespace blk::agent {

// The gRPC face of the volume table: translates requests, and absl::Status to
// grpc::Status, and nothing else. gRPC's callback threads only queue each call; the handlers
// run on the CallQueue's workers, so a slow create waits for no other caller and no caller is
// turned away while the queue has room. A caller who may not make a call is answered
// PERMISSION_DENIED before it is queued.
class VolumeService final : public v1::VolumeService::CallbackService {
 public:
  VolumeService(VolumeTable& volumes, BpfLocalityStatus bpf_locality, CallQueue& calls,
                const CallerAccess& access)
      : volumes_(volumes), bpf_locality_(std::move(bpf_locality)), calls_(calls), access_(access) {}

  grpc::ServerUnaryReactor* CreateVolume(grpc::CallbackServerContext* context,
                                         const v1::CreateVolumeRequest* request,
                                         v1::CreateVolumeResponse* response) override;
  grpc::ServerUnaryReactor* DeleteVolume(grpc::CallbackServerContext* context,
                                         const v1::DeleteVolumeRequest* request,
                                         v1::DeleteVolumeResponse* response) override;
  grpc::ServerUnaryReactor* GetVolume(grpc::CallbackServerContext* context,
                                      const v1::GetVolumeRequest* request,
                                      v1::GetVolumeResponse* response) override;
  grpc::ServerUnaryReactor* ListVolumes(grpc::CallbackServerContext* context,
                                        const v1::ListVolumesRequest* request,
                                        v1::ListVolumesResponse* response) override;
  grpc::ServerUnaryReactor* UpdateVolume(grpc::CallbackServerContext* context,
                                         const v1::UpdateVolumeRequest* request,
                                         v1::UpdateVolumeResponse* response) override;
  grpc::ServerUnaryReactor* ResizeVolume(grpc::CallbackServerContext* context,
                                         const v1::ResizeVolumeRequest* request,
                                         v1::ResizeVolumeResponse* response) override;
  grpc::ServerUnaryReactor* GetNodeInfo(grpc::CallbackServerContext* context,
                                        const v1::GetNodeInfoRequest* request,
                                        v1::GetNodeInfoResponse* response) override;
  grpc::ServerUnaryReactor* GetVolumeStats(grpc::CallbackServerContext* context,
                                           const v1::GetVolumeStatsRequest* request,
                                           v1::GetVolumeStatsResponse* response) override;

 private:
  // Queues `handler` to run on a worker when the caller may make an `access` call; the reactor
  // is finished with its status.
  grpc::ServerUnaryReactor* Queue(grpc::CallbackServerContext* context, const char* method,
                                  Access access, std::function<grpc::Status()> handler);

  grpc::Status Create(const v1::CreateVolumeRequest& request, v1::CreateVolumeResponse& response);
  grpc::Status Delete(const v1::DeleteVolumeRequest& request);
  grpc::Status Get(const v1::GetVolumeRequest& request, v1::GetVolumeResponse& response);
  grpc::Status List(v1::ListVolumesResponse& response);
  grpc::Status Update(const v1::UpdateVolumeRequest& request, v1::UpdateVolumeResponse& response);
  grpc::Status Resize(const v1::ResizeVolumeRequest& request, v1::ResizeVolumeResponse& response);
  grpc::Status NodeInfo(v1::GetNodeInfoResponse& response);
  grpc::Status Stats(const v1::GetVolumeStatsRequest& request,
                     v1::GetVolumeStatsResponse& response);

  VolumeTable& volumes_;
  const BpfLocalityStatus bpf_locality_;
  CallQueue& calls_;
  const CallerAccess& access_;
};

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace blk::agent
