#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "blk/v1/volume.grpc.pb.h"
#include "client/agent_address.h"
#include "grpcpp/channel.h"

namespace blk::client {

// blkagent's VolumeService behind its Unix socket or TCP listener. Each call carries the
// deadline given here; failures come back as absl::Status with the server's
// code and message, or, when the agent cannot be reached, a message naming
// the address.
class VolumeClient {
 public:
  VolumeClient(AgentAddress address, absl::Duration timeout);

  absl::StatusOr<blk::v1::CreateVolumeResponse> CreateVolume(
      const blk::v1::CreateVolumeRequest& request);
  absl::StatusOr<blk::v1::DeleteVolumeResponse> DeleteVolume(
      const blk::v1::DeleteVolumeRequest& request);
  absl::StatusOr<blk::v1::UpdateVolumeResponse> UpdateVolume(
      const blk::v1::UpdateVolumeRequest& request);
  absl::StatusOr<blk::v1::ResizeVolumeResponse> ResizeVolume(
      const blk::v1::ResizeVolumeRequest& request);
  absl::StatusOr<blk::v1::GetVolumeResponse> GetVolume(const blk::v1::GetVolumeRequest& request);
  absl::StatusOr<blk::v1::ListVolumesResponse> ListVolumes(
      const blk::v1::ListVolumesRequest& request);
  absl::StatusOr<blk::v1::GetNodeInfoResponse> GetNodeInfo(
      const blk::v1::GetNodeInfoRequest& request);
  absl::StatusOr<blk::v1::GetVolumeStatsResponse> GetVolumeStats(
      const blk::v1::GetVolumeStatsRequest& request);

 private:
  template <typename Response, typename Request, typename Method>
  absl::StatusOr<Response> Call(Method method, const Request& request);

  absl::Status ToStatus(const grpc::Status& status) const;

  AgentAddress address_;
  absl::Duration timeout_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<blk::v1::VolumeService::Stub> stub_;
};

}  // namespace blk::client
