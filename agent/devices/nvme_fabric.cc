#include "agent/devices/nvme_fabric.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/read_file.h"
#include "server/nvme/fabrics.h"
#include "spdlog/spdlog.h"

namespace blk::agent {
namespace {

namespace nvme = server::nvme;

// How long a fresh controller's namespaces may take to show up in sysfs.
constexpr int kNamespaceScanWaitMs = 10000;

absl::StatusOr<nvme::ConnectOptions> OptionsFor(const v1::NvmeFabric& fabric) {
  absl::StatusOr<nvme::HostIdentity> host = nvme::ReadHostIdentity();
  if (!host.ok()) return host.status();
  nvme::ConnectOptions options;
  options.subsystem_nqn = fabric.subsystem_nqn();
  options.host = std::move(*host);
  if (!fabric.dhchap_secret_file().empty()) {
    absl::StatusOr<std::string> secret = ReadFileToString(fabric.dhchap_secret_file());
    if (!secret.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("nvme.fabric.dhchap_secret_file: ", secret.status().message()));
    }
    options.dhchap_secret = std::string(absl::StripAsciiWhitespace(*secret));
    // The secret goes into the kernel's comma-separated option string ('=' is base64 padding).
    if (options.dhchap_secret.find_first_of(", \t\n") != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("nvme.fabric.dhchap_secret_file: ", fabric.dhchap_secret_file(),
                       " does not hold one DH-CHAP secret (DHHC-1:...)"));
    }
  }
  return options;
}

absl::StatusOr<FabricAttachment> Attach(const v1::NvmeFabric& fabric, FabricNeed need) {
  absl::StatusOr<nvme::ConnectOptions> options = OptionsFor(fabric);
  if (!options.ok()) return options.status();
  const nvme::Fabrics fabrics;
  FabricAttachment attachment;
  auto undo = [&](const absl::Status& failure) {
    if (need == FabricNeed::kEveryPath) DisconnectFabricPaths(fabric, attachment.made);
    return failure;
  };
  if (fabric.paths().empty()) return absl::InvalidArgumentError("nvme.fabric.paths: none given");
  size_t connected = 0;
  absl::Status last_failure;
  for (const std::string& path : fabric.paths()) {
    absl::StatusOr<nvme::FabricAddress> address = nvme::ParseFabricAddress(path);
    if (!address.ok()) return undo(address.status());
    absl::StatusOr<bool> made = fabrics.Connect(*address, *options);
    if (!made.ok()) {
      if (need == FabricNeed::kEveryPath) return undo(made.status());
      spdlog::warn("nvme subsystem {}: path {} stays down: {}", fabric.subsystem_nqn(), path,
                   made.status().ToString());
      last_failure = made.status();
      continue;
    }
    ++connected;
    if (*made) attachment.made.push_back(path);
  }
  if (connected == 0) return last_failure;
  absl::StatusOr<std::string> head =
      fabrics.HeadCharDevice(fabric.subsystem_nqn(), fabric.nsid(), kNamespaceScanWaitMs);
  if (!head.ok()) {
    return undo(absl::Status(head.status().code(),
                             absl::StrCat("nvme.fabric.nsid: ", head.status().message())));
  }
  attachment.head_path = std::move(*head);
  return attachment;
}

}  // namespace

FabricAttacher RealFabricAttacher() { return Attach; }

void DisconnectFabricPaths(const v1::NvmeFabric& fabric, const std::vector<std::string>& paths) {
  if (paths.empty()) return;
  absl::StatusOr<nvme::HostIdentity> host = nvme::ReadHostIdentity();
  if (!host.ok()) {
    spdlog::error("nvme subsystem {}: cannot disconnect: {}", fabric.subsystem_nqn(),
                  host.status().ToString());
    return;
  }
  const nvme::Fabrics fabrics;
  for (const std::string& path : paths) {
    absl::StatusOr<nvme::FabricAddress> address = nvme::ParseFabricAddress(path);
    if (!address.ok()) continue;
    if (absl::Status done = fabrics.Disconnect(*address, fabric.subsystem_nqn(), host->nqn);
        !done.ok()) {
      spdlog::error("nvme subsystem {}: {}", fabric.subsystem_nqn(), done.ToString());
    } else {
      spdlog::info("nvme subsystem {}: disconnected path {}", fabric.subsystem_nqn(), path);
    }
  }
}

FabricPathCount CountLivePaths(const v1::NvmeFabric& fabric) {
  FabricPathCount count;
  count.total = static_cast<uint32_t>(fabric.paths_size());
  absl::StatusOr<nvme::HostIdentity> host = nvme::ReadHostIdentity();
  if (!host.ok()) return count;
  const std::vector<nvme::FabricController> controllers =
      nvme::Fabrics().Controllers(fabric.subsystem_nqn(), host->nqn);
  for (const std::string& path : fabric.paths()) {
    absl::StatusOr<nvme::FabricAddress> address = nvme::ParseFabricAddress(path);
    if (!address.ok()) continue;
    for (const nvme::FabricController& controller : controllers) {
      if (controller.state == "live" &&
          nvme::FormatFabricAddress(controller.address) == nvme::FormatFabricAddress(*address)) {
        ++count.live;
        break;
      }
    }
  }
  return count;
}

uint32_t FabricIoTimeoutMs(const v1::NvmeFabric& fabric) {
  const uint32_t seconds = fabric.io_timeout_seconds() == 0 ? 30 : fabric.io_timeout_seconds();
  return seconds * 1000;
}

}  // namespace blk::agent
