// blk-csi: the CSI Identity and Node services for the kubelet, on top of
// blkagent's API, and with --controller the Controller service for the
// csi-provisioner sidecar next to it. It holds no data path: restarting it
// never touches I/O.
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "client/agent_address.h"
#include "client/volume_client.h"
#include "common/termination_signals.h"
#include "csi/controller_service.h"
#include "csi/identity_service.h"
#include "csi/kubelet_paths.h"
#include "csi/mounter.h"
#include "csi/node_service.h"
#include "csi/version.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "spdlog/spdlog.h"

namespace {

struct Options {
  std::string endpoint = "unix:///csi/csi.sock";
  std::string agent_socket = blk::client::kDefaultSocket;
  std::string node_id;
  std::string driver_name = "blk.csi.storage";
  int agent_timeout_seconds = 120;
  std::string kubelet_root = "/var/lib/kubelet";
  bool controller = false;
  std::string state_dir = "/var/lib/blk-csi";
};

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

int Serve(const Options& options, const sigset_t& signals) {
  absl::string_view socket = options.endpoint;
  // The kubelet writes unix:///path; gRPC's unix:/path and a bare path work too.
  if (!absl::ConsumePrefix(&socket, "unix://")) absl::ConsumePrefix(&socket, "unix:");
  if (socket.empty() || socket.front() != '/') {
    spdlog::critical("--endpoint '{}' is not unix:///absolute/path", options.endpoint);
    return 2;
  }
  const std::string socket_path(socket);
  std::error_code error;
  std::filesystem::create_directories(std::filesystem::path(socket_path).parent_path(), error);
  struct stat st;
  // A socket left by an earlier blk-csi; anything else at the path is not ours to remove.
  if (::lstat(socket_path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      spdlog::critical("{} exists and is not a socket", socket_path);
      return 1;
    }
    ::unlink(socket_path.c_str());
  }

  // Staging may run mkfs on a large device: give agent calls their own, long deadline.
  blk::client::AgentAddress agent_address = blk::client::UnixAgentAddress(options.agent_socket);
  agent_address.how_to_choose = "blk-csi's --agent-socket chooses another socket";
  blk::client::VolumeClient agent(std::move(agent_address),
                                  absl::Seconds(options.agent_timeout_seconds));
  blk::csi::Mounter mounter;
  // The one topology segment, reported by NodeGetInfo and by every volume CreateVolume makes.
  const std::string topology_key = absl::StrCat(options.driver_name, "/node");
  blk::csi::IdentityService identity(options.driver_name, options.controller, agent);
  const blk::csi::KubeletPaths paths(options.kubelet_root);
  blk::csi::ProvisionedVolumes provisioned(options.state_dir);
  if (options.controller) {
    if (absl::Status opened = provisioned.Open(); !opened.ok()) {
      spdlog::critical("--state-dir: {}", opened.ToString());
      return 1;
    }
  }
  blk::csi::NodeService node(
      options.node_id, topology_key, agent, mounter, paths,
      options.controller ? std::optional<blk::csi::ProvisionedVolumes>(provisioned) : std::nullopt);
  blk::csi::ControllerService controller(options.node_id, topology_key, agent,
                                         std::move(provisioned));

  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("unix:", socket_path), grpc::InsecureServerCredentials());
  builder.RegisterService(&identity);
  builder.RegisterService(&node);
  if (options.controller) builder.RegisterService(&controller);
  const mode_t previous_umask = ::umask(0077);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ::umask(previous_umask);
  if (!server) {
    spdlog::critical("cannot listen on {}", socket_path);
    return 1;
  }
  spdlog::info("blk-csi {} serving on {} (node {}{}, blkagent at {})", options.driver_name,
               socket_path, options.node_id, options.controller ? ", with the controller" : "",
               options.agent_socket);

  const int signal = blk::WaitForTerminationSignal(signals);
  spdlog::info("received {}, stopping", strsignal(signal));
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(10));
  ::unlink(socket_path.c_str());
  return 0;
}

}  // namespace

// An exception at startup ends blk-csi through std::terminate, which names it.
int main(int argc, char** argv) {  // NOLINT(bugprone-exception-escape)
  Options options;
  CLI::App app{"blk-csi: CSI node (and controller) plugin for blkagent volumes"};
  app.set_version_flag("--version", blk::csi::kCsiVersion);
  app.add_option("--endpoint", options.endpoint, "CSI endpoint the kubelet calls (unix:///path)")
      ->capture_default_str();
  app.add_option("--agent-socket", options.agent_socket, "blkagent's gRPC Unix socket")
      ->capture_default_str();
  app.add_option("--node-id", options.node_id, "this node's id (default: the host name)");
  app.add_option("--driver-name", options.driver_name, "CSI driver name")->capture_default_str();
  app.add_option("--agent-timeout", options.agent_timeout_seconds, "seconds an agent call may take")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--kubelet-root", options.kubelet_root,
                 "the kubelet's root directory: every staging and target path must lie below it")
      ->check(CLI::ExistingDirectory)
      ->capture_default_str();
  app.add_flag("--controller", options.controller,
               "also serve the CSI Controller service (CreateVolume/DeleteVolume for a "
               "csi-provisioner sidecar with --node-deployment on this node)");
  app.add_option("--state-dir", options.state_dir,
                 "where the controller records the volumes it provisioned (created when missing)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (options.node_id.empty()) options.node_id = HostName();
  if (options.node_id.empty()) {
    spdlog::critical("no --node-id and no host name");
    return 2;
  }
  const sigset_t signals = blk::BlockTerminationSignals();
  return Serve(options, signals);
}
