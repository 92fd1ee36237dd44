// blk_csi_client ENDPOINT METHOD [REQUEST]: one CSI call, as a kubelet makes
// it, for the VM scenarios. REQUEST is the request message in protobuf text
// format (e.g. 'volume_id: "v" target_path: "/t"'). The response goes to
// stdout in text format; a failed call prints "CODE: message" to stderr and
// exits 1 (2 for a usage error).
#include <chrono>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "csi/v1/csi.grpc.pb.h"
#include "google/protobuf/text_format.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace {

using Channel = std::shared_ptr<grpc::Channel>;
using Call = std::function<int(const Channel&, const std::string&)>;

template <typename Service, typename Request, typename Response, typename Method>
Call MakeCall(Method method) {
  return [method](const Channel& channel, const std::string& text) {
    Request request;
    if (!google::protobuf::TextFormat::ParseFromString(text, &request)) {
      std::cerr << "cannot parse the request as " << Request::descriptor()->full_name() << "\n";
      return 2;
    }
    auto stub = Service::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
    Response response;
    const grpc::Status status = ((*stub).*method)(&context, request, &response);
    if (!status.ok()) {
      std::cerr << absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code()))
                << ": " << status.error_message() << "\n";
      return 1;
    }
    std::string out;
    google::protobuf::TextFormat::PrintToString(response, &out);
    std::cout << out;
    return 0;
  };
}

#define IDENTITY_CALL(name)                                      \
  {                                                              \
#name, MakeCall < csi::v1::Identity, csi::v1::name##Request, \
        csi::v1::name##Response>(&csi::v1::Identity::Stub::name) \
  }
#define NODE_CALL(name)                                      \
  {                                                          \
#name, MakeCall < csi::v1::Node, csi::v1::name##Request, \
        csi::v1::name##Response>(&csi::v1::Node::Stub::name) \
  }

#define CONTROLLER_CALL(name)                                      \
  {                                                                \
#name, MakeCall < csi::v1::Controller, csi::v1::name##Request, \
        csi::v1::name##Response>(&csi::v1::Controller::Stub::name) \
  }

}  // namespace

int main(int argc, char** argv) {
  const std::map<std::string, Call> calls = {
      IDENTITY_CALL(GetPluginInfo),   IDENTITY_CALL(GetPluginCapabilities),
      IDENTITY_CALL(Probe),           NODE_CALL(NodeStageVolume),
      NODE_CALL(NodeUnstageVolume),   NODE_CALL(NodePublishVolume),
      NODE_CALL(NodeUnpublishVolume), NODE_CALL(NodeGetVolumeStats),
      NODE_CALL(NodeGetCapabilities), NODE_CALL(NodeGetInfo),
      NODE_CALL(NodeExpandVolume),    CONTROLLER_CALL(CreateVolume),
      CONTROLLER_CALL(DeleteVolume),  CONTROLLER_CALL(ControllerGetCapabilities),
  };
  if (argc < 3 || argc > 4 || calls.count(argv[2]) == 0) {
    std::cerr << "usage: blk_csi_client unix:///path/csi.sock METHOD [REQUEST-TEXT]\nmethods:";
    for (const auto& [name, call] : calls) std::cerr << " " << name;
    std::cerr << "\n";
    return 2;
  }
  const Channel channel = grpc::CreateChannel(argv[1], grpc::InsecureChannelCredentials());
  return calls.at(argv[2])(channel, argc == 4 ? argv[3] : "");
}
