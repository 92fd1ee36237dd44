// blk_csi_client ENDPOINT METHOD [REQUEST]: one CSI call, as a kubelet makes
// it, for the VM scenarios. REQUEST is the request message in protobuf text
// format (e.g. 'volume_id: "v" target_path: "/t"'). The response goes to
// stdout in text format; a failed call prints "CODE: message" to stderr and
// exits 1 (2 for a usage error).
//
// blk_csi_client ENDPOINT --checks FILE ("-": stdin): many calls on one
// channel, each checked, for the sanity suite (one process start per check
// would cost more than the calls in a TCG guest). One check a line:
//   NAME | METHOD | EXPECTED-CODE | REQUEST [| =RESPONSE or ~TEXT]
// EXPECTED-CODE is a status code name (OK, INVALID_ARGUMENT, NOT_FOUND...);
// =RESPONSE: the response, printed on one line, must be exactly that;
// ~TEXT: the one-line response must contain TEXT. Blank lines and lines
// starting with '#' are skipped. Prints "PASS NAME" or "FAIL NAME: got ...,
// expected ..." per check, then a count; exits 1 when a check failed, 2 on a
// line it cannot read.
#include <chrono>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "csi/v1/csi.grpc.pb.h"
#include "google/protobuf/text_format.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace {

using Channel = std::shared_ptr<grpc::Channel>;

// One call's outcome: the status, and the response in text format (multi-line and one-line).
struct Outcome {
  grpc::Status status;
  std::string response;
  std::string response_line;
};
// nullopt: the request text does not parse as the method's request.
using Call = std::function<std::optional<Outcome>(const Channel&, const std::string&)>;

template <typename Service, typename Request, typename Response, typename Method>
Call MakeCall(Method method) {
  return [method](const Channel& channel, const std::string& text) -> std::optional<Outcome> {
    Request request;
    if (!google::protobuf::TextFormat::ParseFromString(text, &request)) {
      std::cerr << "cannot parse the request as " << Request::descriptor()->full_name() << "\n";
      return std::nullopt;
    }
    auto stub = Service::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
    Response response;
    Outcome outcome;
    outcome.status = ((*stub).*method)(&context, request, &response);
    if (outcome.status.ok()) {
      google::protobuf::TextFormat::PrintToString(response, &outcome.response);
      google::protobuf::TextFormat::Printer printer;
      printer.SetSingleLineMode(true);
      printer.PrintToString(response, &outcome.response_line);
      absl::StripTrailingAsciiWhitespace(&outcome.response_line);
    }
    return outcome;
  };
}

std::string CodeName(const grpc::Status& status) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code()));
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

using Calls = std::map<std::string, Call>;

// Runs one check line; false when it failed. `bad_line` is set when the line cannot be read.
bool RunCheck(const Calls& calls, const Channel& channel, const std::string& line, bool& bad_line) {
  std::vector<std::string> fields = absl::StrSplit(line, " | ");
  for (std::string& field : fields) absl::StripAsciiWhitespace(&field);
  if (fields.size() < 4 || fields.size() > 5 || calls.count(fields[1]) == 0) {
    std::cerr << "cannot read the check line (NAME | METHOD | CODE | REQUEST [| =/~RESPONSE]): "
              << line << "\n";
    bad_line = true;
    return false;
  }
  const std::string& name = fields[0];
  const std::string& expected_code = fields[2];
  const std::optional<Outcome> outcome = calls.at(fields[1])(channel, fields[3]);
  if (!outcome.has_value()) {
    bad_line = true;
    return false;
  }
  const std::string got_code = CodeName(outcome->status);
  if (got_code != expected_code) {
    std::cout << "FAIL " << name << ": got " << got_code << " (" << outcome->status.error_message()
              << "), expected " << expected_code << "\n";
    return false;
  }
  if (fields.size() == 5) {
    const std::string& want = fields[4];
    const bool exact = absl::StartsWith(want, "=");
    if (!exact && !absl::StartsWith(want, "~")) {
      std::cerr << "a response check starts with '=' or '~': " << line << "\n";
      bad_line = true;
      return false;
    }
    const std::string text = want.substr(1);
    const bool matches =
        exact ? outcome->response_line == text : absl::StrContains(outcome->response_line, text);
    if (!matches) {
      std::cout << "FAIL " << name << ": response {" << outcome->response_line << "}, expected "
                << (exact ? "exactly {" : "it to contain {") << text << "}\n";
      return false;
    }
  }
  std::cout << "PASS " << name << "\n";
  return true;
}

int RunChecks(const Calls& calls, const Channel& channel, std::istream& input) {
  int total = 0, failed = 0;
  bool bad_line = false;
  std::string line;
  while (!bad_line && std::getline(input, line)) {
    const absl::string_view trimmed = absl::StripAsciiWhitespace(line);
    if (trimmed.empty() || trimmed.front() == '#') continue;
    ++total;
    if (!RunCheck(calls, channel, std::string(trimmed), bad_line)) ++failed;
  }
  if (bad_line) return 2;
  std::cout << total << " checks, " << failed << " failed\n";
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Calls calls = {
      IDENTITY_CALL(GetPluginInfo),
      IDENTITY_CALL(GetPluginCapabilities),
      IDENTITY_CALL(Probe),
      NODE_CALL(NodeStageVolume),
      NODE_CALL(NodeUnstageVolume),
      NODE_CALL(NodePublishVolume),
      NODE_CALL(NodeUnpublishVolume),
      NODE_CALL(NodeGetVolumeStats),
      NODE_CALL(NodeGetCapabilities),
      NODE_CALL(NodeGetInfo),
      NODE_CALL(NodeExpandVolume),
      CONTROLLER_CALL(CreateVolume),
      CONTROLLER_CALL(DeleteVolume),
      CONTROLLER_CALL(ControllerGetCapabilities),
      CONTROLLER_CALL(ValidateVolumeCapabilities),
      CONTROLLER_CALL(ControllerModifyVolume),
  };
  const std::string mode = argc > 2 ? argv[2] : "";
  if (argc == 4 && mode == "--checks") {
    const Channel channel = grpc::CreateChannel(argv[1], grpc::InsecureChannelCredentials());
    if (std::string(argv[3]) == "-") return RunChecks(calls, channel, std::cin);
    std::ifstream file(argv[3]);
    if (!file) {
      std::cerr << "cannot open " << argv[3] << "\n";
      return 2;
    }
    return RunChecks(calls, channel, file);
  }
  if (argc < 3 || argc > 4 || calls.count(mode) == 0) {
    std::cerr << "usage: blk_csi_client unix:///path/csi.sock METHOD [REQUEST-TEXT]\n"
                 "       blk_csi_client unix:///path/csi.sock --checks FILE|-\nmethods:";
    for (const auto& [name, call] : calls) std::cerr << " " << name;
    std::cerr << "\n";
    return 2;
  }
  const Channel channel = grpc::CreateChannel(argv[1], grpc::InsecureChannelCredentials());
  const std::optional<Outcome> outcome = calls.at(mode)(channel, argc == 4 ? argv[3] : "");
  if (!outcome.has_value()) return 2;
  if (!outcome->status.ok()) {
    std::cerr << CodeName(outcome->status) << ": " << outcome->status.error_message() << "\n";
    return 1;
  }
  std::cout << outcome->response;
  return 0;
}
