#include "agent/volumes/volume_validation.h"

#include <arpa/inet.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/devices/volume_io_limits.h"
#include "common/dns_label.h"
#include "server/nbd/uri.h"
#include "server/ublk/cpu_list.h"
#include "server/ublk/device_config.h"
#include "server/ublk/placement.h"
#include "server/ublk/rq_affinity.h"

namespace blk::agent {
namespace {

constexpr uint32_t kDefaultNbdIoTimeoutSeconds = 30;
constexpr uint32_t kMaxNbdIoTimeoutSeconds = 24 * 3600;
// NvmeFabric.io_timeout_seconds: 0 means 30 (volume.proto).
constexpr uint32_t kDefaultNvmeIoTimeoutSeconds = 30;
constexpr uint32_t kMaxNvmeIoTimeoutSeconds = 3600;
// NVMF_NQN_SIZE in the kernel: the longest NQN a connect takes.
constexpr size_t kMaxNqnBytes = 223;
constexpr int kMaxNvmePaths = 8;
constexpr uint32_t kBroadcastNsid = 0xFFFFFFFF;
// VolumeLimits: the highest rates (volume.proto), and the longest burst in seconds of its rate.
constexpr uint64_t kMaxIopsRate = 10'000'000;
constexpr uint64_t kMaxBytesRate = 100'000'000'000;
constexpr uint64_t kMaxBurstSeconds = 3600;

absl::Status Invalid(absl::string_view field, absl::string_view reason) {
  return absl::InvalidArgumentError(absl::StrCat("volume.", field, ": ", reason));
}

absl::Status ValidateFileBackend(const v1::FileBackend& file) {
  const std::string& path = file.path();
  if (path.empty()) return Invalid("file.path", "is required");
  if (path.front() != '/')
    return Invalid("file.path", absl::StrCat("'", path, "' is not absolute"));
  if (path.find('\0') != std::string::npos) return Invalid("file.path", "contains a NUL byte");
  if (path.back() == '/')
    return Invalid("file.path", absl::StrCat("'", path, "' names a directory"));

  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  struct stat st {};
  if (::stat(parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Invalid("file.path", absl::StrCat("directory '", parent.string(), "' does not exist"));
  }
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
    return Invalid("file.path",
                   absl::StrCat("'", path, "' is neither a regular file nor a block device"));
  }
  return absl::OkStatus();
}

absl::Status ValidateNbdBackend(const v1::NbdBackend& nbd) {
  if (nbd.uri().empty()) return Invalid("nbd.uri", "is required");
  absl::StatusOr<server::nbd::Address> address = server::nbd::ParseUri(nbd.uri());
  if (!address.ok()) return Invalid("nbd.uri", address.status().message());
  if (nbd.io_timeout_seconds() > kMaxNbdIoTimeoutSeconds) {
    return Invalid("nbd.io_timeout_seconds",
                   absl::StrCat(nbd.io_timeout_seconds(), " exceeds the maximum of ",
                                kMaxNbdIoTimeoutSeconds));
  }
  return absl::OkStatus();
}

absl::Status ValidatePlacement(const std::string& text) {
  absl::StatusOr<server::QueuePlacement> placement = server::ParseQueuePlacement(text);
  if (!placement.ok()) return Invalid("placement", placement.status().message());
  const std::vector<int> allowed = server::AllowedCpus();
  for (int cpu : placement->cpus) {
    if (!std::binary_search(allowed.begin(), allowed.end(), cpu)) {
      return Invalid("placement", absl::StrCat("CPU ", cpu, " is not one this agent may use (",
                                               server::FormatCpuList(allowed), ")"));
    }
  }
  return absl::OkStatus();
}

// The agent writes a fabric volume's NQN and hosts into the comma-separated key=value options it
// gives /dev/nvme-fabrics: a ',' or '=' in them would add options of the caller's choosing
// (another host, a hostnqn, a keyring). So only printable ASCII without blanks, ',' and '='.
bool IsFabricOptionByte(char c) { return c > ' ' && c < 0x7f && c != ',' && c != '='; }

std::string DescribeByte(char c) {
  if (c > ' ' && c < 0x7f) return absl::StrCat("'", std::string(1, c), "'");
  return absl::StrFormat("0x%02x", static_cast<unsigned char>(c));
}

absl::Status ValidateNqn(const std::string& nqn) {
  constexpr absl::string_view kField = "nvme.fabric.subsystem_nqn";
  if (nqn.empty()) return Invalid(kField, "is required (e.g. nqn.2014-08.org.example:array1)");
  if (nqn.size() > kMaxNqnBytes) {
    return Invalid(kField, absl::StrCat(nqn.size(), " bytes exceed the maximum of ", kMaxNqnBytes));
  }
  for (size_t i = 0; i < nqn.size(); ++i) {
    if (!IsFabricOptionByte(nqn[i])) {
      return Invalid(kField, absl::StrCat("byte ", i, " (", DescribeByte(nqn[i]),
                                          ") is not allowed (printable ASCII other than ',', "
                                          "'=' and blanks)"));
    }
  }
  if (!absl::StartsWith(nqn, "nqn.")) {
    return Invalid(kField, absl::StrCat("'", nqn, "' does not begin with \"nqn.\""));
  }
  return absl::OkStatus();
}

// The host of a "HOST:PORT" path in one spelling per address ("::1" and "0::1" are one address),
// so that duplicates show; an error naming what is wrong.
absl::StatusOr<std::string> CanonicalFabricHost(absl::string_view host) {
  char text[INET6_ADDRSTRLEN] = {};
  if (absl::ConsumePrefix(&host, "[")) {
    in6_addr v6{};
    const std::string inner(host.substr(0, host.size() - 1));
    if (!absl::EndsWith(host, "]") || ::inet_pton(AF_INET6, inner.c_str(), &v6) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("'[", host, "' is not an IPv6 address in brackets ([fd00::5])"));
    }
    ::inet_ntop(AF_INET6, &v6, text, sizeof(text));
    return absl::StrCat("[", text, "]");
  }
  // A name's last label is never all digits (RFC 3696 2): digits and dots are an IPv4 address.
  if (!host.empty() && host.find_first_not_of("0123456789.") == absl::string_view::npos) {
    in_addr v4{};
    if (::inet_pton(AF_INET, std::string(host).c_str(), &v4) != 1) {
      return absl::InvalidArgumentError(absl::StrCat("'", host, "' is not an IPv4 address"));
    }
    ::inet_ntop(AF_INET, &v4, text, sizeof(text));
    return std::string(text);
  }
  // The kernel connects to addresses; a name the agent resolved could later point elsewhere
  // than the controller it connected.
  return absl::InvalidArgumentError(absl::StrCat(
      "host '", host,
      "' is not an IPv4 address or an IPv6 address in brackets (names are not resolved: give "
      "the target's address)"));
}

// "HOST:PORT" in the canonical spelling of CanonicalFabricHost.
absl::StatusOr<std::string> CanonicalFabricPath(const std::string& path) {
  const size_t colon = path.rfind(':');
  const size_t bracket = path.rfind(']');
  if (colon == std::string::npos || (bracket != std::string::npos && colon < bracket)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' has no port (expected HOST:PORT, e.g. 10.0.0.5:4420)"));
  }
  const absl::string_view host = absl::string_view(path).substr(0, colon);
  const absl::string_view port_text = absl::string_view(path).substr(colon + 1);
  if (host.find(':') != absl::string_view::npos && !absl::StartsWith(host, "[")) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "': an IPv6 address goes in brackets ([fd00::5]:4420)"));
  }
  uint32_t port = 0;
  if (port_text.empty() || port_text.find_first_not_of("0123456789") != absl::string_view::npos ||
      !absl::SimpleAtoi(port_text, &port) || port == 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "': port '", port_text, "' is not 1-65535"));
  }
  absl::StatusOr<std::string> canonical = CanonicalFabricHost(host);
  if (!canonical.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "': ", canonical.status().message()));
  }
  return absl::StrCat(*canonical, ":", port);
}

// `path` and `agent_connected_paths` are output only: what a request holds there is not checked.
absl::Status ValidateNvmeFabric(const v1::NvmeFabric& fabric) {
  if (absl::Status nqn = ValidateNqn(fabric.subsystem_nqn()); !nqn.ok()) return nqn;
  if (fabric.nsid() == 0) return Invalid("nvme.fabric.nsid", "is required (1 or more)");
  if (fabric.nsid() == kBroadcastNsid) {
    return Invalid("nvme.fabric.nsid", "0xffffffff names every namespace, not one");
  }
  if (fabric.paths_size() == 0) {
    return Invalid("nvme.fabric.paths", "at least one HOST:PORT is required");
  }
  if (fabric.paths_size() > kMaxNvmePaths) {
    return Invalid(
        "nvme.fabric.paths",
        absl::StrCat(fabric.paths_size(), " paths exceed the maximum of ", kMaxNvmePaths));
  }
  std::map<std::string, int> seen;  // canonical path -> index
  for (int i = 0; i < fabric.paths_size(); ++i) {
    const std::string field = absl::StrCat("nvme.fabric.paths[", i, "]");
    absl::StatusOr<std::string> path = CanonicalFabricPath(fabric.paths(i));
    if (!path.ok()) return Invalid(field, path.status().message());
    const auto [first, fresh] = seen.emplace(*path, i);
    if (!fresh) {
      return Invalid(field, absl::StrCat("'", fabric.paths(i), "' is the same controller as paths[",
                                         first->second, "]"));
    }
  }
  if (fabric.io_timeout_seconds() > kMaxNvmeIoTimeoutSeconds) {
    return Invalid("nvme.fabric.io_timeout_seconds",
                   absl::StrCat(fabric.io_timeout_seconds(), " exceeds the maximum of ",
                                kMaxNvmeIoTimeoutSeconds));
  }
  const std::string& secret = fabric.dhchap_secret_file();
  if (!secret.empty() && secret.front() != '/') {
    return Invalid("nvme.fabric.dhchap_secret_file",
                   absl::StrCat("'", secret, "' is not absolute"));
  }
  if (secret.find('\0') != std::string::npos) {
    return Invalid("nvme.fabric.dhchap_secret_file", "contains a NUL byte");
  }
  return absl::OkStatus();
}

absl::Status ValidateNvmeBackend(const v1::NvmeBackend& nvme) {
  // The namespace's LBA size is checked when the namespace is probed; 512 is every format's unit.
  if (nvme.offset_bytes() % 512 != 0) {
    return Invalid("nvme.offset_bytes",
                   absl::StrCat(nvme.offset_bytes(), " is not a multiple of 512"));
  }
  if (nvme.has_fabric()) return ValidateNvmeFabric(nvme.fabric());
  const std::string& path = nvme.path();
  if (path.empty()) return Invalid("nvme.path", "is required (the namespace's /dev/ngXnY)");
  if (path.front() != '/') {
    return Invalid("nvme.path", absl::StrCat("'", path, "' is not absolute"));
  }
  if (path.find('\0') != std::string::npos) return Invalid("nvme.path", "contains a NUL byte");
  return absl::OkStatus();
}

absl::Status ValidateRateLimit(const IoLimitKind& kind, const server::RateLimit& limit) {
  const std::string field = absl::StrCat("limits.", kind.field);
  const uint64_t max_rate = kind.bytes ? kMaxBytesRate : kMaxIopsRate;
  if (limit.rate > max_rate) {
    return Invalid(absl::StrCat(field, ".rate"),
                   absl::StrCat(limit.rate, " exceeds the maximum of ", max_rate,
                                kind.bytes ? " bytes" : " operations", " per second"));
  }
  if (limit.burst == 0) return absl::OkStatus();
  if (limit.rate == 0) {
    return Invalid(absl::StrCat(field, ".burst"),
                   absl::StrCat(limit.burst, " is set without a rate (0: unlimited)"));
  }
  // The bucket must hold the largest request the device hands over, or that request could never
  // pass. The agent never changes DeviceConfig's default.
  const uint64_t largest_request = server::DeviceConfig{}.max_io_bytes;
  if (kind.bytes && limit.burst < largest_request) {
    return Invalid(absl::StrCat(field, ".burst"),
                   absl::StrCat(limit.burst, " is below the largest request of ", largest_request,
                                " bytes (0: a tenth of a second's worth)"));
  }
  // No overflow: the rate is at most kMaxBytesRate.
  if (limit.burst > limit.rate * kMaxBurstSeconds) {
    return Invalid(absl::StrCat(field, ".burst"),
                   absl::StrCat(limit.burst, " exceeds an hour's worth of the rate (",
                                limit.rate * kMaxBurstSeconds, ")"));
  }
  return absl::OkStatus();
}

absl::Status ValidateLimits(const v1::VolumeLimits& limits) {
  const server::IoLimits io_limits = IoLimitsOf(limits);
  for (const IoLimitKind& kind : kIoLimitKinds) {
    if (absl::Status valid = ValidateRateLimit(kind, io_limits.*kind.limit); !valid.ok()) {
      return valid;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateRqAffinity(const v1::Volume& spec) {
  if (spec.has_rq_affinity() && spec.rq_affinity() > server::kMaxRqAffinity) {
    return Invalid("rq_affinity", absl::StrCat(spec.rq_affinity(), " is not 0, 1 or 2"));
  }
  return absl::OkStatus();
}

bool IsValidVolumeId(std::string_view id) { return IsDnsLabel(id); }

v1::Volume NormalizeVolumeSpec(const v1::Volume& requested) {
  v1::Volume spec = requested;
  spec.clear_status();
  // An nvme volume's default block size is its namespace's, filled in once it is probed.
  if (spec.logical_block_size() == 0 && !spec.has_nvme()) {
    spec.set_logical_block_size(kDefaultLogicalBlockSize);
  }
  if (spec.queues() == 0) spec.set_queues(kDefaultQueues);
  if (spec.queue_depth() == 0) spec.set_queue_depth(kDefaultQueueDepth);
  if (spec.has_nbd() && spec.nbd().io_timeout_seconds() == 0) {
    spec.mutable_nbd()->set_io_timeout_seconds(kDefaultNbdIoTimeoutSeconds);
  }
  if (spec.nvme().has_fabric()) {
    v1::NvmeFabric& fabric = *spec.mutable_nvme()->mutable_fabric();
    if (fabric.io_timeout_seconds() == 0)
      fabric.set_io_timeout_seconds(kDefaultNvmeIoTimeoutSeconds);
    // One spelling per controller ("0::1" and "::1"), so that volumes sharing a path see it.
    for (std::string& path : *fabric.mutable_paths()) {
      absl::StatusOr<std::string> canonical = CanonicalFabricPath(path);
      if (canonical.ok()) path = *canonical;
    }
  }
  // "", "node" mean the same, and so do "0-1" and "1,0"; text that does not parse is left for
  // validation to report.
  absl::StatusOr<server::QueuePlacement> placement = server::ParseQueuePlacement(spec.placement());
  if (placement.ok()) spec.set_placement(server::FormatQueuePlacement(*placement));
  return spec;
}

absl::Status ValidateVolumeSpec(const v1::Volume& spec) {
  if (!IsValidVolumeId(spec.id())) {
    return Invalid("id",
                   absl::StrCat("'", spec.id(),
                                "' is not a DNS label (1-63 lowercase letters, digits or '-', "
                                "starting and ending with a letter or digit)"));
  }
  // An nvme volume without a block size takes its namespace's (resolved before provisioning).
  const bool nvme = spec.backend_case() == v1::Volume::kNvme;
  const uint32_t block_size = spec.logical_block_size();
  if (block_size != 512 && block_size != 4096 && !(nvme && block_size == 0)) {
    return Invalid("logical_block_size", absl::StrCat(block_size, " is not 512 or 4096"));
  }
  // An NBD volume without a size takes the export's, an nvme one the namespace's (resolved
  // before provisioning).
  if (spec.size_bytes() == 0 && spec.backend_case() != v1::Volume::kNbd && !nvme) {
    return Invalid("size_bytes", "must be greater than 0 (only nbd and nvme volumes may omit it)");
  }
  if (block_size != 0 && spec.size_bytes() % block_size != 0) {
    return Invalid("size_bytes",
                   absl::StrCat(spec.size_bytes(), " is not a multiple of the logical block size ",
                                block_size));
  }
  if (spec.size_bytes() > kMaxSizeBytes) {
    return Invalid("size_bytes", absl::StrCat(spec.size_bytes(), " exceeds the maximum of ",
                                              kMaxSizeBytes, " (1 PiB)"));
  }
  if (spec.queues() > kMaxQueues) {
    return Invalid("queues", absl::StrCat(spec.queues(), " exceeds the maximum of ", kMaxQueues));
  }
  if (spec.queue_depth() > kMaxQueueDepth) {
    return Invalid("queue_depth",
                   absl::StrCat(spec.queue_depth(), " exceeds the maximum of ", kMaxQueueDepth));
  }
  if (absl::Status valid = ValidateRqAffinity(spec); !valid.ok()) return valid;
  if (absl::Status valid = ValidatePlacement(spec.placement()); !valid.ok()) return valid;
  if (absl::Status valid = ValidateLimits(spec.limits()); !valid.ok()) return valid;
  switch (spec.backend_case()) {
    case v1::Volume::kNull:
      return absl::OkStatus();
    case v1::Volume::kFile:
      return ValidateFileBackend(spec.file());
    case v1::Volume::kNbd:
      return ValidateNbdBackend(spec.nbd());
    case v1::Volume::kNvme:
      return ValidateNvmeBackend(spec.nvme());
    case v1::Volume::BACKEND_NOT_SET:
      break;
  }
  return Invalid("backend", "is required (one of: null, file, nbd, nvme)");
}

namespace {

// The fields UpdateVolume may change.
constexpr const char* kUpdatable[] = {"rq_affinity", "limits"};

}  // namespace

absl::Status ValidateVolumeUpdate(const v1::Volume& changes,
                                  const google::protobuf::FieldMask& mask) {
  if (!IsValidVolumeId(changes.id())) {
    return absl::InvalidArgumentError(
        absl::StrCat("volume.id: '", changes.id(), "' is not a valid volume id"));
  }
  if (mask.paths_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "update_mask: names no field (updatable: ", absl::StrJoin(kUpdatable, ", "), ")"));
  }
  for (const std::string& path : mask.paths()) {
    if (std::find_if(std::begin(kUpdatable), std::end(kUpdatable), [&](const char* updatable) {
          return path == updatable;
        }) == std::end(kUpdatable)) {
      return absl::InvalidArgumentError(
          absl::StrCat("update_mask: '", path,
                       "' cannot be updated (updatable: ", absl::StrJoin(kUpdatable, ", "), ")"));
    }
  }
  for (const std::string& path : mask.paths()) {
    if (path == "rq_affinity") {
      if (!changes.has_rq_affinity()) {
        return absl::InvalidArgumentError(
            "volume.rq_affinity: must be set (0, 1 or 2) when update_mask names it");
      }
      if (absl::Status valid = ValidateRqAffinity(changes); !valid.ok()) return valid;
    } else if (path == "limits") {
      if (absl::Status valid = ValidateLimits(changes.limits()); !valid.ok()) return valid;
    }
  }
  return absl::OkStatus();
}

}  // namespace blk::agent
