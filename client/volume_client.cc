#include "client/volume_client.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace blk::client {

VolumeClient::VolumeClient(AgentAddress address, absl::Duration timeout)
    : address_(std::move(address)),
      timeout_(timeout),
      channel_(grpc::CreateChannel(address_.target, address_.credentials)),
      stub_(blk::v1::VolumeService::NewStub(channel_)) {}

template <typename Response, typename Request, typename Method>
absl::StatusOr<Response> VolumeClient::Call(Method method, const Request& request) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  Response response;
  const grpc::Status status = ((*stub_).*method)(&context, request, &response);
  if (!status.ok()) return ToStatus(status);
  return response;
}

absl::Status VolumeClient::ToStatus(const grpc::Status& status) const {
  // gRPC and absl share the canonical code numbering.
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  // A server answering UNAVAILABLE leaves the channel READY; a socket nobody
  // listens on leaves it failing to connect.
  const bool connected = channel_->GetState(/*try_to_connect=*/false) == GRPC_CHANNEL_READY;
  if (!connected &&
      (code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kDeadlineExceeded)) {
    return absl::Status(
        code, absl::StrCat("cannot reach blkagent at ", address_.description, " (is it running? ",
                           address_.how_to_choose, "): ", status.error_message()));
  }
  return absl::Status(code, status.error_message());
}

absl::StatusOr<blk::v1::CreateVolumeResponse> VolumeClient::CreateVolume(
    const blk::v1::CreateVolumeRequest& request) {
  return Call<blk::v1::CreateVolumeResponse>(&blk::v1::VolumeService::Stub::CreateVolume, request);
}

absl::StatusOr<blk::v1::DeleteVolumeResponse> VolumeClient::DeleteVolume(
    const blk::v1::DeleteVolumeRequest& request) {
  return Call<blk::v1::DeleteVolumeResponse>(&blk::v1::VolumeService::Stub::DeleteVolume, request);
}

absl::StatusOr<blk::v1::UpdateVolumeResponse> VolumeClient::UpdateVolume(
    const blk::v1::UpdateVolumeRequest& request) {
  return Call<blk::v1::UpdateVolumeResponse>(&blk::v1::VolumeService::Stub::UpdateVolume, request);
}

absl::StatusOr<blk::v1::ResizeVolumeResponse> VolumeClient::ResizeVolume(
    const blk::v1::ResizeVolumeRequest& request) {
  return Call<blk::v1::ResizeVolumeResponse>(&blk::v1::VolumeService::Stub::ResizeVolume, request);
}

absl::StatusOr<blk::v1::GetVolumeResponse> VolumeClient::GetVolume(
    const blk::v1::GetVolumeRequest& request) {
  return Call<blk::v1::GetVolumeResponse>(&blk::v1::VolumeService::Stub::GetVolume, request);
}

absl::StatusOr<blk::v1::ListVolumesResponse> VolumeClient::ListVolumes(
    const blk::v1::ListVolumesRequest& request) {
  return Call<blk::v1::ListVolumesResponse>(&blk::v1::VolumeService::Stub::ListVolumes, request);
}

absl::StatusOr<blk::v1::GetNodeInfoResponse> VolumeClient::GetNodeInfo(
    const blk::v1::GetNodeInfoRequest& request) {
  return Call<blk::v1::GetNodeInfoResponse>(&blk::v1::VolumeService::Stub::GetNodeInfo, request);
}

absl::StatusOr<blk::v1::GetVolumeStatsResponse> VolumeClient::GetVolumeStats(
    const blk::v1::GetVolumeStatsRequest& request) {
  return Call<blk::v1::GetVolumeStatsResponse>(&blk::v1::VolumeService::Stub::GetVolumeStats,
                                               request);
}

}  // namespace blk::client
