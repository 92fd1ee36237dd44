// blkagent: the node agent. Serves the VolumeService on a Unix socket and owns
// the ublk devices of every volume. At start it takes over the devices a
// previous agent left (killed or upgraded) while it already listens: the health
// service says NOT_SERVING and calls wait until that is done. On SIGTERM it
// leaves the devices for the next agent, or deletes them with --on-exit delete.
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <optional>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "agent/api/access_policy.h"
#include "agent/api/call_queue.h"
#include "agent/api/caller_access.h"
#include "agent/api/mutual_tls.h"
#include "agent/api/unix_listener.h"
#include "agent/api/volume_service.h"
#include "agent/devices/node_info.h"
#include "agent/devices/ublk_provisioner.h"
#include "agent/metrics/completion_locality_metrics.h"
#include "agent/metrics/completion_locality_probe.h"
#include "agent/metrics/metrics_collector.h"
#include "agent/service_notifier.h"
#include "agent/termination_watch.h"
#include "agent/version.h"
#include "agent/volumes/file_dirs.h"
#include "agent/volumes/state_dir_lock.h"
#include "agent/volumes/volume_table.h"
#include "common/termination_signals.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "prometheus/exposer.h"
#include "server/backend_config.h"
#include "server/ublk/params.h"
#include "server/ublk/support.h"
#include "spdlog/spdlog.h"

namespace {

struct Options {
  std::string socket = "/run/blkagent/blkagent.sock";
  std::string state_dir = "/var/lib/blkagent";
  std::string log_level = "info";
  int grpc_threads = 4;
  int max_waiting_calls = 1024;
  int max_message_size = 64 << 10;
  int nbd_connect_timeout_seconds = blk::server::kDefaultNbdConnectTimeoutMs / 1000;
  blk::agent::VolumeLimits limits;
  std::string on_exit = "leave";
  // Loopback: /metrics answers anyone who can connect, without authentication, and names every
  // volume, its device and the node's kernel.
  std::string metrics_address = "127.0.0.1:9477";
  std::string bpf_locality = "on";
  std::vector<std::string> watch_block_devices;
  std::vector<std::string> file_dirs;  // empty: file:// volumes may name any path
  std::string zero_copy = "auto";
  std::string batch_io = "auto";
  std::string io_limits = "on";
  std::string admin_group;   // empty: only root may change volumes
  std::string reader_group;  // empty: nobody else may read them
  std::string listen_tcp;    // empty: no TCP listener
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  std::vector<std::string> tls_admin_names;   // certificate names that may call every RPC
  std::vector<std::string> tls_reader_names;  // ... only the read-only RPCs
  bool tls_any_client_admin = false;          // every verified client may call every RPC
  // UBLK_F_* bit of the proposed SUPPORT_RQ_AFFINITY; unset: never asked for.
  std::optional<int> rq_affinity_feature_bit;
};

// The groups of --admin-group and --reader-group, resolved once at start.
struct AccessGroups {
  std::optional<gid_t> admin;
  std::optional<gid_t> reader;
};

absl::StatusOr<AccessGroups> ResolveAccessGroups(const Options& options) {
  AccessGroups groups;
  if (!options.admin_group.empty()) {
    absl::StatusOr<gid_t> admin = blk::agent::ResolveGroup(options.admin_group, "--admin-group");
    if (!admin.ok()) return admin.status();
    groups.admin = *admin;
  }
  if (!options.reader_group.empty()) {
    absl::StatusOr<gid_t> reader = blk::agent::ResolveGroup(options.reader_group, "--reader-group");
    if (!reader.ok()) return reader.status();
    groups.reader = *reader;
  }
  return groups;
}

// The socket belongs to the admin group (root's without one), 0660. A socket has one group, so
// with a reader group as well it is 0666: then anyone may connect, and the credentials the
// agent reads from each connection (SO_PEERCRED) decide alone, refusing strangers by name.
mode_t SocketMode(const AccessGroups& groups) { return groups.reader ? 0666 : 0660; }

// Where gRPC binds the socket before it is renamed into place: see StartGrpc.
std::string StagingSocketPath(const std::string& socket) { return socket + ".starting"; }

// Removes a socket left by an agent that died; only ever called with the
// state-dir lock held, so no live agent owns it.
bool RemoveStaleSocket(const std::string& socket) {
  struct stat st {};
  if (::lstat(socket.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      spdlog::critical("{} exists and is not a socket; refusing to replace it", socket);
      return false;
    }
    ::unlink(socket.c_str());
  }
  return true;
}

bool PrepareSocketPath(const std::string& socket) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::create_directories(fs::path(socket).parent_path(), error);
  if (error) {
    spdlog::critical("cannot create socket directory for {}: {}", socket, error.message());
    return false;
  }
  return RemoveStaleSocket(socket) && RemoveStaleSocket(StagingSocketPath(socket));
}

// Only the reflection service still runs on gRPC's synchronous thread pool (VolumeService calls
// wait in the CallQueue instead): a few threads are plenty for grpcurl.
constexpr int kSyncServiceThreads = 4;

// The gRPC server and the Unix socket the agent accepts its connections on.
struct Endpoints {
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<blk::agent::UnixListener> listener;

  // Stops accepting, then lets the calls in flight finish for up to `grace`.
  void Stop(std::chrono::seconds grace) {
    listener->Stop();
    server->Shutdown(std::chrono::system_clock::now() + grace);
    server->Wait();
  }
};

// Adds the mutual-TLS TCP listener of --listen-tcp, if any; gRPC sets `tcp_port` to its port once
// the server starts. False with a logged reason when its files cannot be read.
bool AddTcpListener(const Options& options, grpc::ServerBuilder& builder, int& tcp_port) {
  if (options.listen_tcp.empty()) return true;
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      blk::agent::MutualTlsServerCredentials(options.tls_cert, options.tls_key,
                                             options.tls_client_ca);
  if (!credentials.ok()) {
    spdlog::critical("--listen-tcp: {}", std::string(credentials.status().message()));
    return false;
  }
  builder.AddListeningPort(options.listen_tcp, *credentials, &tcp_port);
  return true;
}

// Serves with the health service saying NOT_SERVING. gRPC's default health service starts out
// SERVING, so the Unix socket is created only once it says NOT_SERVING: no client sees it serving
// before it does. The socket is accepted by the agent (UnixListener), which tells `access` who
// each connection comes from.
std::optional<Endpoints> StartGrpc(const Options& options, const AccessGroups& groups,
                                   blk::agent::VolumeService& service,
                                   blk::agent::CallerAccess& access) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int tcp_port = 0;
  if (!AddTcpListener(options, builder, tcp_port)) return std::nullopt;
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(options.max_message_size);
  grpc::ResourceQuota quota("blkagent");
  quota.SetMaxThreads(kSyncServiceThreads);
  builder.SetResourceQuota(quota);
  Endpoints endpoints;
  endpoints.server = builder.BuildAndStart();
  if (!endpoints.server) {
    spdlog::critical("cannot start the gRPC server{}",
                     options.listen_tcp.empty() ? "" : " (is --listen-tcp free?)");
    return std::nullopt;
  }
  endpoints.server->GetHealthCheckService()->SetServingStatus(false);
  if (!options.listen_tcp.empty()) {
    spdlog::info("listening on {} with mutual TLS (port {})", options.listen_tcp, tcp_port);
  }
  absl::StatusOr<std::unique_ptr<blk::agent::UnixListener>> listener =
      blk::agent::UnixListener::Listen(StagingSocketPath(options.socket), options.socket,
                                       groups.admin, SocketMode(groups));
  if (!listener.ok()) {
    spdlog::critical("{}", std::string(listener.status().message()));
    endpoints.server->Shutdown();
    return std::nullopt;
  }
  endpoints.listener = std::move(*listener);
  endpoints.listener->Serve(*endpoints.server, access);
  return endpoints;
}

// Serves /metrics on `address` ("off": no metrics). Null with a logged reason
// when the address cannot be bound.
std::unique_ptr<prometheus::Exposer> StartMetrics(
    const std::string& address, const std::shared_ptr<prometheus::Collectable>& collector) {
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(address, /*num_threads=*/1);
  } catch (const std::exception& error) {
    spdlog::critical("cannot serve metrics on {}: {} (choose another --metrics-address, or off)",
                     address, error.what());
    return nullptr;
  }
  exposer->RegisterCollectable(collector);
  for (int port : exposer->GetListeningPorts()) {
    spdlog::info("metrics on http://{}:{}/metrics", address.substr(0, address.rfind(':')), port);
  }
  return exposer;
}

// The BPF completion-locality probe, or an unavailable one saying why.
std::unique_ptr<blk::agent::CompletionLocalityProbe> StartCompletionLocality(
    const Options& options) {
  using blk::agent::CompletionLocalityProbe;
  if (options.bpf_locality == "off") {
    return CompletionLocalityProbe::Unavailable("disabled by --bpf-locality off");
  }
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<CompletionLocalityProbe> probe = CompletionLocalityProbe::Start();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  if (probe->available()) {
    spdlog::info("completion locality: {} (loaded in {} ms)", probe->message(), took.count());
  } else {
    spdlog::warn("completion locality unavailable, running without it: {}", probe->message());
  }
  return probe;
}

void AddAccessFlags(CLI::App& app, Options& options) {
  app.add_option("--admin-group", options.admin_group,
                 "group (name or gid) whose members may call every RPC on the socket, like root; "
                 "the socket belongs to it");
  app.add_option("--reader-group", options.reader_group,
                 "group (name or gid) whose members may call only the read-only RPCs (get, list, "
                 "stats, node info); the socket is then 0666 and the agent checks every caller");
  CLI::Option* tcp =
      app.add_option("--listen-tcp", options.listen_tcp,
                     "HOST:PORT to serve on over TCP as well, with mutual TLS only: a client "
                     "whose certificate --tls-client-ca verifies may call what its names allow "
                     "(--tls-admin-names, --tls-reader-names)");
  CLI::Option* cert =
      app.add_option("--tls-cert", options.tls_cert, "PEM certificate (chain) of the TCP listener");
  CLI::Option* key = app.add_option("--tls-key", options.tls_key, "PEM key of --tls-cert");
  CLI::Option* client_ca = app.add_option("--tls-client-ca", options.tls_client_ca,
                                          "PEM CA certificates that client certificates must "
                                          "chain to");
  CLI::Option* admins =
      app.add_option("--tls-admin-names", options.tls_admin_names,
                     "NAME,...: TLS clients whose certificate names one of these may call every "
                     "RPC; a certificate is known by its DNS subjectAltNames, or by its common "
                     "name when it has no subjectAltName (RFC 6125)")
          ->delimiter(',');
  CLI::Option* readers =
      app.add_option("--tls-reader-names", options.tls_reader_names,
                     "NAME,...: TLS clients whose certificate names one of these may call only "
                     "the read-only RPCs (as --reader-group)")
          ->delimiter(',');
  CLI::Option* any = app.add_flag("--tls-any-client-admin", options.tls_any_client_admin,
                                  "every TLS client --tls-client-ca verifies may call every RPC, "
                                  "whatever its names (without it, or a names list, "
                                  "--listen-tcp refuses to start)");
  tcp->needs(cert)->needs(key)->needs(client_ca);
  for (CLI::Option* option : {cert, key, client_ca, admins, readers, any}) option->needs(tcp);
  any->excludes(admins)->excludes(readers);
}

// With --listen-tcp, who may call over TCP must be said: a certificate the CA verifies is not by
// itself enough to change volumes.
bool TcpClientsNamed(const Options& options) {
  if (options.listen_tcp.empty() || options.tls_any_client_admin ||
      !options.tls_admin_names.empty() || !options.tls_reader_names.empty()) {
    return true;
  }
  spdlog::critical(
      "--listen-tcp: say which TLS clients may call: --tls-admin-names and/or --tls-reader-names "
      "(names of their certificates), or --tls-any-client-admin to let every client "
      "--tls-client-ca verifies call every RPC");
  return false;
}

void AddFlags(CLI::App& app, Options& options) {
  app.add_option("--socket", options.socket, "gRPC Unix socket")->capture_default_str();
  app.add_option("--state-dir", options.state_dir, "where volume specs are persisted")
      ->capture_default_str();
  app.add_option("--log-level", options.log_level, "trace, debug, info, warn, error")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  app.add_option("--grpc-threads", options.grpc_threads,
                 "VolumeService calls that run at once, each on its own worker thread (creates of "
                 "different volumes proceed in parallel); more wait their turn")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--max-waiting-calls", options.max_waiting_calls,
                 "calls that may wait for a worker; one more is refused RESOURCE_EXHAUSTED (a "
                 "waiting call whose deadline passes is answered DEADLINE_EXCEEDED, not run)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--max-message-size", options.max_message_size,
                 "largest gRPC request in bytes; a larger one is refused RESOURCE_EXHAUSTED")
      ->capture_default_str()
      ->check(CLI::Range(4096, 64 << 20));
  app.add_option("--max-volumes", options.limits.max_volumes,
                 "volumes this agent holds at most; a create of one more is refused "
                 "RESOURCE_EXHAUSTED (restored volumes always come back)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--max-queue-threads", options.limits.max_queue_threads,
                 "ublk queue threads (one per queue of every volume) at most; a create that needs "
                 "more is refused RESOURCE_EXHAUSTED")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--nbd-connect-timeout", options.nbd_connect_timeout_seconds,
                 "seconds one step of an NBD handshake (connect, a read, a write) may take when "
                 "the agent dials an export to create, restore or resize a volume or to learn its "
                 "size; a server that stays silent longer fails that operation")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  app.add_option("--on-exit", options.on_exit,
                 "on SIGTERM: leave the devices for the next agent (their I/O waits for it), or "
                 "delete them")
      ->capture_default_str()
      ->check(CLI::IsMember({"leave", "delete"}));
  app.add_option("--metrics-address", options.metrics_address,
                 "HOST:PORT for Prometheus' /metrics, which answers anyone who can connect: "
                 "the default is loopback only, give the address a remote Prometheus scrapes "
                 "(port 0: any free port); or off (also turns off per-I/O statistics: no "
                 "counting on the data path, no GetVolumeStats)")
      ->capture_default_str();
  app.add_option("--bpf-locality", options.bpf_locality,
                 "count where the block layer completes each request relative to its "
                 "submitting CPU, with a BPF program (blk_block_completions_total)")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--watch-block-devices", options.watch_block_devices,
                 "other block devices to count completions of (e.g. nullb0,nvme0n1)")
      ->delimiter(',')
      ->check([](const std::string& device) -> std::string {
        absl::StatusOr<std::string> name = blk::agent::BlockDeviceName(device);
        return name.ok() ? "" : std::string(name.status().message());
      });
  app.add_option("--zero-copy", options.zero_copy,
                 "auto: zero copy (UBLK_F_AUTO_BUF_REG) where the kernel and backend allow it; "
                 "off: new devices always copy")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "off"}));
  app.add_option("--batch-io", options.batch_io,
                 "auto: UBLK_F_BATCH_IO (per-queue fetch and one commit per loop turn, Linux 7.0+) "
                 "where the kernel offers it; off: new devices always use the classic per-request "
                 "commands")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "off"}));
  app.add_option("--io-limits", options.io_limits,
                 "on: volumes may have I/O limits (QoS); off: queues without the throttling "
                 "layer, and volumes with limits refused (a comparison for the cost of unlimited "
                 "volumes)")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  AddAccessFlags(app, options);
  app.add_option("--file-dirs", options.file_dirs,
                 "directories file:// volumes must lie in (DIR,...), block devices included "
                 "(list /dev to admit them); a path is compared by its real path (symlinks and .. "
                 "resolved), and one outside is refused INVALID_ARGUMENT; unset: any path")
      ->delimiter(',');
  app.add_option("--rq-affinity-feature-bit", options.rq_affinity_feature_bit,
                 "the UBLK_F_* bit (0..63) of the proposed UBLK_F_SUPPORT_RQ_AFFINITY, which no "
                 "released kernel has: new devices ask for it where the kernel advertises it, so "
                 "completions follow queue/rq_affinity (unset: never asked for)")
      ->check([](const std::string& text) -> std::string {
        int bit = 0;
        if (!absl::SimpleAtoi(text, &bit)) return "not a number: " + text;
        absl::StatusOr<uint64_t> flag = blk::server::RqAffinityFeatureFlag(bit);
        return flag.ok() ? "" : std::string(flag.status().message());
      });
  app.set_version_flag("--version", blk::agent::kAgentVersion);
}

// The BPF completion-locality probe and the metrics read from it.
struct CompletionLocality {
  explicit CompletionLocality(const Options& options)
      : probe(StartCompletionLocality(options)),
        status{probe->available(), probe->message()},
        metrics(*probe, WatchedDevices(options)) {}

  static std::vector<std::string> WatchedDevices(const Options& options) {
    std::vector<std::string> devices;
    for (const std::string& device : options.watch_block_devices) {
      devices.push_back(*blk::agent::BlockDeviceName(device));
    }
    return devices;
  }

  std::unique_ptr<blk::agent::CompletionLocalityProbe> probe;
  const blk::agent::BpfLocalityStatus status;
  const blk::agent::CompletionLocalityMetrics metrics;
};

// Takes over what a previous agent left and starts retrying what it could not.
void RestoreVolumes(blk::agent::VolumeTable& volumes, blk::agent::TerminationWatch& watch) {
  for (const std::string& problem : volumes.Restore()) spdlog::warn("restore: {}", problem);
  volumes.StartRetrying();
  watch.MarkRestored();
}

// Listens while the volumes are reconciled (`restored`: calls wait meanwhile, the health service
// says NOT_SERVING), then serves gRPC (and tells systemd it is ready) until SIGTERM or SIGINT and
// stops the server. A signal during the restore ends it after the volume under way. False when it
// cannot listen.
bool ServeUntilSignal(const Options& options, const AccessGroups& groups,
                      blk::agent::TerminationWatch& watch, blk::agent::VolumeTable& volumes,
                      const blk::agent::BpfLocalityStatus& bpf_locality,
                      const std::future<void>& restored) {
  // Outlives the server: its workers answer every call the server still waits for.
  blk::agent::CallQueue calls(options.grpc_threads, options.max_waiting_calls);
  blk::agent::CallerAccess access(
      blk::agent::AccessPolicy(groups.admin, groups.reader),
      blk::agent::TlsClientPolicy(options.tls_admin_names, options.tls_reader_names,
                                  options.tls_any_client_admin));
  blk::agent::VolumeService service(volumes, bpf_locality, calls, access);
  std::optional<Endpoints> endpoints = StartGrpc(options, groups, service, access);
  if (!endpoints) {
    spdlog::critical("cannot listen on unix:{}", options.socket);
    return false;
  }
  spdlog::info("blkagent {} listening on unix:{}{}, state in {}; reconciling volumes",
               blk::agent::kAgentVersion, options.socket,
               options.listen_tcp.empty() ? "" : " and (mutual TLS) " + options.listen_tcp,
               options.state_dir);
  if (!watch.WaitRestoredOrSignal()) {
    spdlog::info("received {} while reconciling; stopping after the volume under way",
                 strsignal(watch.WaitSignal()));
    volumes.StopRestoring();
    restored.wait();
  } else {
    // Listed before the calls open, so it counts only what reconciliation took back.
    const std::string status = blk::agent::ServingStatus(volumes.List());
    calls.Open();
    endpoints->server->GetHealthCheckService()->SetServingStatus(true);
    spdlog::info("serving ({} workers, up to {} waiting calls)", options.grpc_threads,
                 options.max_waiting_calls);
    blk::agent::NotifyReady(status);
    spdlog::info("received {}, stopping", strsignal(watch.WaitSignal()));
  }
  blk::agent::NotifyStopping(options.on_exit == "delete" ? "stopping; deleting the devices"
                                                         : "stopping; leaving the devices");
  calls.Close();
  endpoints->Stop(std::chrono::seconds(10));
  return true;
}

// The devices are left for the next agent, or deleted with --on-exit delete.
void ReleaseDevices(const Options& options, blk::agent::VolumeTable& volumes) {
  if (options.on_exit == "delete") {
    volumes.StopAll();
  } else {
    volumes.DetachAll();
  }
}

// The SUPPORT_RQ_AFFINITY flag new devices ask for (0: none), logged with whether this kernel
// advertises it.
uint64_t RqAffinityFlag(const Options& options) {
  if (!options.rq_affinity_feature_bit) return 0;
  const int bit = *options.rq_affinity_feature_bit;
  const uint64_t flag = *blk::server::RqAffinityFeatureFlag(bit);  // checked at parse
  const blk::server::UblkSupport support = blk::server::ProbeUblk();
  spdlog::info(
      "SUPPORT_RQ_AFFINITY taken as UBLK_F_* bit {}: new devices ask for it where the kernel "
      "advertises it; this kernel {}",
      bit,
      !support.control_available       ? "cannot be asked (" + support.error + ")"
      : (support.features & flag) != 0 ? std::string("advertises it")
                                       : std::string("does not advertise it"));
  return flag;
}

int Run(const Options& options, const sigset_t& signals) {
  if (!TcpClientsNamed(options)) return 1;
  absl::StatusOr<AccessGroups> groups = ResolveAccessGroups(options);
  if (!groups.ok()) {
    spdlog::critical("{}", std::string(groups.status().message()));
    return 1;
  }
  absl::StatusOr<blk::agent::FileDirs> file_dirs =
      blk::agent::FileDirs::Parse(options.file_dirs, "--file-dirs");
  if (!file_dirs.ok()) {
    spdlog::critical("{}", std::string(file_dirs.status().message()));
    return 1;
  }
  if (!file_dirs->confined()) {
    spdlog::warn("file:// volumes may name any path the agent can open: give --file-dirs");
  }
  absl::StatusOr<blk::agent::StateDirLock> lock =
      blk::agent::StateDirLock::Acquire(options.state_dir);
  if (!lock.ok()) {
    spdlog::critical("{}", lock.status().ToString());
    return 1;
  }
  absl::StatusOr<blk::agent::VolumeRegistry> registry =
      blk::agent::VolumeRegistry::Open(options.state_dir);
  if (!registry.ok()) {
    spdlog::critical("{}", registry.status().ToString());
    return 1;
  }
  if (!PrepareSocketPath(options.socket)) return 1;

  const std::chrono::milliseconds nbd_connect_timeout =
      std::chrono::seconds(options.nbd_connect_timeout_seconds);
  // Without /metrics nothing reads the per-I/O statistics but GetVolumeStats: "off" turns off
  // their cost on the data path too (tests/bench measures it).
  blk::agent::UblkProvisioner provisioner(/*io_stats=*/options.metrics_address != "off",
                                          /*zero_copy=*/options.zero_copy == "auto",
                                          RqAffinityFlag(options), nbd_connect_timeout,
                                          /*batch_io=*/options.batch_io == "auto",
                                          /*io_limits=*/options.io_limits == "on");
  blk::agent::VolumeTable volumes(
      std::move(*registry), provisioner, blk::agent::RealNbdSizeProbe(nbd_connect_timeout),
      blk::agent::RealNvmeNamespaceProbe(), options.limits, std::move(*file_dirs));
  // The devices a previous agent left hold their I/O until recovered: reconcile at once, while
  // the rest starts. Every path below waits for it before it touches the devices.
  blk::agent::TerminationWatch watch(signals);
  std::future<void> restored =
      std::async(std::launch::async, [&volumes, &watch] { RestoreVolumes(volumes, watch); });

  const CompletionLocality locality(options);
  auto collector = std::make_shared<blk::agent::MetricsCollector>(
      volumes, blk::agent::ReadNodeInfo(locality.status), &locality.metrics);
  std::unique_ptr<prometheus::Exposer> metrics;
  if (options.metrics_address != "off") {
    metrics = StartMetrics(options.metrics_address, collector);
    if (!metrics) {
      restored.wait();
      volumes.DetachAll();
      return 1;
    }
  }
  if (!ServeUntilSignal(options, *groups, watch, volumes, locality.status, restored)) {
    restored.wait();
    volumes.DetachAll();
    return 1;
  }
  ReleaseDevices(options, volumes);
  ::unlink(options.socket.c_str());
  spdlog::info("stopped");
  return 0;
}

}  // namespace

// An exception at startup ends the agent through std::terminate, which names it.
int main(int argc, char** argv) {  // NOLINT(bugprone-exception-escape)
  Options options;
  CLI::App app{"blkagent: ublk block devices for local and remote volumes"};
  AddFlags(app, options);
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::from_str(options.log_level));
  const sigset_t signals = blk::BlockTerminationSignals();
  // SIGHUP, which daemons take as "reload", must not end the agent: the TLS files reload by
  // themselves (kCertificateRefreshSeconds), and nothing else is read from files after start.
  ::signal(SIGHUP, SIG_IGN);
  return Run(options, signals);
}
