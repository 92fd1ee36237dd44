#include "cli/app.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "client/agent_address.h"
#include "client/backend_uri.h"
#include "client/rate_limit_parse.h"
#include "client/size_parse.h"
#include "client/volume_client.h"

namespace blk::cli {
namespace {

// Adapts an absl parser to a CLI11 transform: on success the option's text
// is replaced by the canonical form, on failure the message becomes CLI11's
// validation error (and so a usage error).
CLI::Validator SizeValidator() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        absl::StatusOr<uint64_t> size = client::ParseSize(input);
        if (!size.ok()) return std::string(size.status().message());
        input = absl::StrCat(*size);
        return {};
      },
      "SIZE", "size");
}

CLI::Validator BackendUriValidator() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        absl::StatusOr<blk::v1::Volume> backend = client::ParseBackendUri(input);
        if (!backend.ok()) return std::string(backend.status().message());
        return {};
      },
      "URI", "backend URI");
}

// A limit flag's value, checked by `parse` (its text is kept: the command parses it again).
CLI::Validator LimitValidator(absl::StatusOr<blk::v1::RateLimit> (*parse)(absl::string_view),
                              const char* form) {
  return CLI::Validator(
      [parse](std::string& input) -> std::string {
        absl::StatusOr<blk::v1::RateLimit> limit = parse(input);
        if (!limit.ok()) return std::string(limit.status().message());
        return {};
      },
      form, "rate limit");
}

// --read-iops ... --bps, for create-volume and update-volume.
void AddLimitOptions(CLI::App& command, LimitFlags& limits) {
  const CLI::Validator iops = LimitValidator(client::ParseIopsLimit, "N[:BURST]");
  const CLI::Validator bytes = LimitValidator(client::ParseBytesLimit, "SIZE[:BURST]");
  command
      .add_option(
          "--read-iops", limits.read_iops,
          "Read requests per second and optional burst, e.g. 1000 or 1000:200 (0: unlimited)")
      ->check(iops);
  command
      .add_option("--write-iops", limits.write_iops,
                  "Write, write-zeroes and discard requests per second (and burst)")
      ->check(iops);
  command
      .add_option("--iops", limits.total_iops,
                  "Requests per second, reads and writes together (and burst)")
      ->check(iops);
  command
      .add_option("--read-bps", limits.read_bytes,
                  "Bytes read per second (and burst), sizes as for --size, e.g. 50M or 50M:1G")
      ->check(bytes);
  command.add_option("--write-bps", limits.write_bytes, "Bytes written per second (and burst)")
      ->check(bytes);
  command
      .add_option("--bps", limits.total_bytes,
                  "Bytes per second, reads and writes together (and burst)")
      ->check(bytes);
}

CLI::Validator PositiveCount() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        uint32_t count = 0;
        if (absl::SimpleAtoi(input, &count) && count > 0) return {};
        return absl::StrCat("expected a whole number from 1 to ", UINT32_MAX, ", got '", input,
                            "'");
      },
      "N", "positive count");
}

CLI::Validator DurationValidator(const char* what) {
  return CLI::Validator(
      [what](std::string& input) -> std::string {
        absl::StatusOr<absl::Duration> duration = ParsePositiveDuration(input, what);
        if (!duration.ok()) return std::string(duration.status().message());
        return {};
      },
      "DURATION", what);
}

void AddOutputOption(CLI::App& command, std::string& format) {
  command.add_option("-o,--output", format, "Output format (default table)")
      ->transform(CLI::IsMember({"table", "json"}, CLI::ignore_case));
}

std::string UsageFailure(const CLI::App* /*app*/, const CLI::Error& error) {
  return absl::StrCat("blkctl: ", error.what(), "\nRun with --help for more information.\n");
}

// Backends whose volumes may omit --size: NBD (the export's) and NVMe (the namespace's).
bool BackendKnowsItsSize(const std::string& uri) {
  absl::StatusOr<blk::v1::Volume> backend = client::ParseBackendUri(uri);
  return backend.ok() && (backend->has_nbd() || backend->has_nvme());
}

}  // namespace

absl::StatusOr<absl::Duration> ParsePositiveDuration(absl::string_view text,
                                                     absl::string_view what) {
  absl::Duration duration;
  int64_t seconds = 0;
  if (absl::SimpleAtoi(text, &seconds)) {
    duration = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(text, &duration)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid ", what, " '", text, "' (expected seconds or a duration such as 90s, 2m, 500ms)"));
  }
  if (duration <= absl::ZeroDuration() || duration == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid ", what, " '", text, "': must be positive and finite"));
  }
  return duration;
}

namespace {

// Performs the chosen command's RPC and returns what to print on stdout.
using Command = std::function<absl::StatusOr<std::string>(client::VolumeClient&)>;

// What the command line asks for: CLI11 fills it in while it parses, a command's callback sets
// `command`.
struct Invocation {
  std::string socket = client::kDefaultSocket;
  std::string tcp;  // empty: the Unix socket
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::string timeout_text = "60s";
  std::string format_text = "table";
  Command command;  // empty: no command was given

  OutputFormat format() const {
    return format_text == "json" ? OutputFormat::kJson : OutputFormat::kTable;
  }
};

void AddGlobalOptions(CLI::App& app, Invocation& invocation) {
  app.failure_message(UsageFailure);
  app.set_version_flag("--version", BLK_VERSION);
  // At most one command; its absence is reported by Dispatch, after CLI11 has had the chance to
  // name a misspelt one as unexpected.
  app.require_subcommand(0, 1);
  // Lets global options such as --socket also follow the command name.
  app.fallthrough();
  app.add_option("--socket", invocation.socket, "blkagent's Unix socket")
      ->envname(kSocketEnv)
      ->capture_default_str();
  CLI::Option* tcp =
      app.add_option("--tcp", invocation.tcp,
                     "HOST:PORT of the agent's TCP listener (mutual TLS) instead of the socket");
  CLI::Option* ca = app.add_option("--tls-ca", invocation.tls_ca,
                                   "PEM CA certificates the agent's certificate must chain to");
  CLI::Option* cert = app.add_option("--tls-cert", invocation.tls_cert,
                                     "PEM client certificate (chain) to present to the agent");
  CLI::Option* key = app.add_option("--tls-key", invocation.tls_key, "PEM key of --tls-cert");
  tcp->needs(ca);
  ca->needs(tcp);
  cert->needs(tcp)->needs(key);
  key->needs(tcp)->needs(cert);
  app.add_option("--timeout", invocation.timeout_text,
                 "Deadline of the request, e.g. 60s, 2m (creating a device can take a while)")
      ->transform(DurationValidator("timeout"))
      ->capture_default_str();
}

// Each command's flags live as long as its callbacks, which CLI11 keeps with the app.
void AddCreateVolume(CLI::App& app, Invocation& invocation) {
  auto create = std::make_shared<CreateVolumeFlags>();
  CLI::App* command = app.add_subcommand("create-volume", "Create a volume and its device");
  command->add_option("ID", create->id, "Volume id: a DNS label")->required();
  CLI::Option* size_option =
      command
          ->add_option("--size", create->size_bytes,
                       "Size: 4096, 64M, 64MiB, 1G (1024-based); optional for nbd (the "
                       "export's size), nvme and nvme-tcp (the rest of the namespace) backends")
          ->transform(SizeValidator());
  command
      ->add_option("--backend", create->backend_uri,
                   "Backend: null://, file:///absolute/path, nbd://host[:port]/export, "
                   "nbd+unix:///export?socket=/path, nvme:///dev/ngXnY[?offset=SIZE] or "
                   "nvme-tcp://host[:port]/NQN?nsid=N[&path=host[:port]]...[&offset=SIZE]"
                   "[&io_timeout=SECONDS][&dhchap_secret_file=/path] (port 4420 by default)")
      ->required()
      ->check(BackendUriValidator());
  command->add_option("--queues", create->queues, "ublk hardware queues (default 1)")
      ->check(PositiveCount());
  command
      ->add_option("--queue-depth", create->queue_depth,
                   "Outstanding requests per queue (default 128)")
      ->check(PositiveCount());
  command
      ->add_option("--block-size", create->logical_block_size,
                   "Logical block size: 512 or 4096 (nvme: default the namespace's LBA size)")
      ->check(CLI::IsMember({512u, 4096u}));
  command->add_flag("--read-only", create->read_only, "Expose the device read-only");
  command->add_flag("--fail-fast", create->fail_fast,
                    "Fail I/O while no agent serves the device instead of holding it");
  command->add_flag("--poll", create->poll,
                    "Queue threads busy-poll for completions (lower latency, a busy CPU "
                    "per queue)");
  command
      ->add_option("--io-timeout", create->io_timeout_seconds,
                   "NBD: seconds I/O waits for a lost server before failing (default 30; an "
                   "nvme-tcp:// URI takes &io_timeout=SECONDS)")
      ->check(CLI::Range(1u, 86400u));
  command
      ->add_option("--rq-affinity", create->rq_affinity,
                   "Completion CPU policy (queue/rq_affinity): 0, 1 or 2 (default: the kernel's)")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--placement", create->placement,
                      "Queue threads: node (default), hctx, spread, or a CPU list such as 0,2-3");
  AddLimitOptions(*command, create->limits);
  AddOutputOption(*command, invocation.format_text);
  command->callback([&invocation, create, size_option] {
    if (size_option->count() == 0 && !BackendKnowsItsSize(create->backend_uri)) {
      throw CLI::ValidationError(
          "--size",
          "is required for null:// and file:// backends (only nbd and nvme volumes take their "
          "size from the export or namespace)");
    }
    invocation.command = [&invocation, create](client::VolumeClient& client) {
      return RunCreateVolume(client, *create, invocation.format());
    };
  });
}

void AddUpdateVolume(CLI::App& app, Invocation& invocation) {
  auto update = std::make_shared<UpdateVolumeFlags>();
  CLI::App* command =
      app.add_subcommand("update-volume", "Change a volume's tunables on its live device");
  command->add_option("ID", update->id, "Volume id")->required();
  command
      ->add_option("--rq-affinity", update->rq_affinity,
                   "Completion CPU policy (queue/rq_affinity): 0, 1 or 2")
      ->check(CLI::NonNegativeNumber);
  AddLimitOptions(*command, update->limits);
  command->add_flag("--no-limits", update->no_limits,
                    "Lift every limit (with limit flags: keep only those)");
  AddOutputOption(*command, invocation.format_text);
  command->callback([&invocation, update] {
    if (!update->rq_affinity && !update->limits.any() && !update->no_limits) {
      throw CLI::ValidationError("update-volume", kUpdateTunables);
    }
    invocation.command = [&invocation, update](client::VolumeClient& client) {
      return RunUpdateVolume(client, *update, invocation.format());
    };
  });
}

void AddResizeVolume(CLI::App& app, Invocation& invocation) {
  struct ResizeFlags {
    std::string id;
    uint64_t size_bytes = 0;
  };
  auto flags = std::make_shared<ResizeFlags>();
  CLI::App* command = app.add_subcommand("resize-volume",
                                         "Grow a volume's device (and backend) while it is in use");
  command->add_option("ID", flags->id, "Volume id")->required();
  command
      ->add_option("--size", flags->size_bytes,
                   "New size, larger than the current one: 4096, 64M, 64MiB, 1G (1024-based)")
      ->transform(SizeValidator())
      ->required();
  AddOutputOption(*command, invocation.format_text);
  command->callback([&invocation, flags] {
    invocation.command = [&invocation, flags](client::VolumeClient& client) {
      return RunResizeVolume(client, flags->id, flags->size_bytes, invocation.format());
    };
  });
}

void AddDeleteVolume(CLI::App& app, Invocation& invocation) {
  struct DeleteFlags {
    std::string id;
    bool force = false;
    bool if_exists = false;
  };
  auto flags = std::make_shared<DeleteFlags>();
  CLI::App* command = app.add_subcommand(
      "delete-volume", "Stop and remove a volume's device (an unknown volume is an error)");
  command->add_option("ID", flags->id, "Volume id")->required();
  command->add_flag("--force", flags->force,
                    "Delete even when the device is open (its users get I/O errors)");
  command->add_flag("--if-exists", flags->if_exists,
                    "A volume that does not exist is not an error: exit 0, saying so");
  AddOutputOption(*command, invocation.format_text);
  command->callback([&invocation, flags] {
    invocation.command = [&invocation, flags](client::VolumeClient& client) {
      return RunDeleteVolume(client, flags->id, flags->force, flags->if_exists,
                             invocation.format());
    };
  });
}

void AddGetVolume(CLI::App& app, Invocation& invocation) {
  auto id = std::make_shared<std::string>();
  CLI::App* command = app.add_subcommand("get-volume", "Show one volume");
  command->add_option("ID", *id, "Volume id")->required();
  AddOutputOption(*command, invocation.format_text);
  command->callback([&invocation, id] {
    invocation.command = [&invocation, id](client::VolumeClient& client) {
      return RunGetVolume(client, *id, invocation.format());
    };
  });
}

void AddListVolumes(CLI::App& app, Invocation& invocation) {
  CLI::App* command = app.add_subcommand("list-volumes", "List all volumes");
  AddOutputOption(*command, invocation.format_text);
  command->callback([&invocation] {
    invocation.command = [&invocation](client::VolumeClient& client) {
      return RunListVolumes(client, invocation.format());
    };
  });
}

void AddNodeInfo(CLI::App& app, Invocation& invocation) {
  CLI::App* command = app.add_subcommand("node-info", "Show the node's kernel and ublk support");
  AddOutputOption(*command, invocation.format_text);
  command->callback([&invocation] {
    invocation.command = [&invocation](client::VolumeClient& client) {
      return RunNodeInfo(client, invocation.format());
    };
  });
}

// stats writes its reports to `out` as they come rather than returning them.
void AddStats(CLI::App& app, Invocation& invocation, std::ostream& out) {
  struct Flags {
    StatsFlags stats;
    std::string interval_text = "1s";
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* command = app.add_subcommand(
      "stats", "Show a volume's I/O rates and latency every interval, like iostat");
  command->add_option("ID", flags->stats.id, "Volume id")->required();
  command->add_option("--interval", flags->interval_text, "Time between reports, e.g. 1s, 500ms")
      ->transform(DurationValidator("interval"))
      ->capture_default_str();
  command
      ->add_option("--count", flags->stats.count, "Reports to print (default: until interrupted)")
      ->check(PositiveCount());
  AddOutputOption(*command, invocation.format_text);
  command->callback([&invocation, flags, &out] {
    invocation.command = [&invocation, flags,
                          &out](client::VolumeClient& client) -> absl::StatusOr<std::string> {
      // Validated during parsing, so this cannot fail here.
      flags->stats.interval =
          ParsePositiveDuration(flags->interval_text, "interval").value_or(absl::Seconds(1));
      absl::Status done = RunStats(client, flags->stats, invocation.format(), out);
      if (!done.ok()) return done;
      return std::string();
    };
  });
}

// The order here is the order of --help.
void AddCommands(CLI::App& app, Invocation& invocation, std::ostream& out) {
  AddCreateVolume(app, invocation);
  AddUpdateVolume(app, invocation);
  AddResizeVolume(app, invocation);
  AddDeleteVolume(app, invocation);
  AddGetVolume(app, invocation);
  AddListVolumes(app, invocation);
  AddNodeInfo(app, invocation);
  AddStats(app, invocation, out);
}

// Runs the parsed command against the agent: prints its result, or its error as
// "blkctl: CODE: message".
int Dispatch(const Invocation& invocation, std::ostream& out, std::ostream& err) {
  if (!invocation.command) {
    err << "blkctl: a command is required: create-volume, update-volume, resize-volume, "
           "delete-volume, get-volume, list-volumes, node-info or stats\nRun with --help for more "
           "information.\n";
    return kExitUsage;
  }
  // Validated during parsing, so this cannot fail here.
  const absl::Duration timeout = ParseTimeout(invocation.timeout_text).value_or(absl::Seconds(60));
  absl::StatusOr<client::AgentAddress> address =
      invocation.tcp.empty() ? client::UnixAgentAddress(invocation.socket)
                             : client::TlsAgentAddress(invocation.tcp, invocation.tls_ca,
                                                       invocation.tls_cert, invocation.tls_key);
  if (!address.ok()) {
    err << "blkctl: " << address.status().message() << "\n";
    return kExitUsage;
  }
  client::VolumeClient client(std::move(*address), timeout);
  absl::StatusOr<std::string> result = invocation.command(client);
  if (!result.ok()) {
    err << "blkctl: " << absl::StatusCodeToString(result.status().code()) << ": "
        << result.status().message() << "\n";
    return kExitRpcError;
  }
  out << *result;
  return kExitOk;
}

}  // namespace

int RunBlkctl(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app("blkctl: manage the ublk block devices of a blkagent node", "blkctl");
  Invocation invocation;
  AddGlobalOptions(app, invocation);
  AddCommands(app, invocation, out);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error, out, err);
    return code == static_cast<int>(CLI::ExitCodes::Success) ? kExitOk : kExitUsage;
  }
  return Dispatch(invocation, out, err);
}

}  // namespace blk::cli
