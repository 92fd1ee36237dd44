// NVMe over TCP controllers as the kernel's host driver keeps them: connected through
// /dev/nvme-fabrics, listed in /sys/class/nvme, grouped into subsystems whose namespaces have a
// multipath head (/dev/ngXnY) that sends each command down a live path. The agent connects one
// controller per path of a volume, serves the head, and disconnects only what it connected.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace blk::server::nvme {

// One path: the target's address (an IP literal: the kernel does not resolve names) and port.
struct FabricAddress {
  std::string host;  // "192.0.2.1" or "2001:db8::1" (no brackets)
  uint16_t port = 0;
  bool operator==(const FabricAddress&) const = default;
};

// "host:port" or "[v6]:port" (the form volume specs use) into an address; InvalidArgument naming
// the text when the host is not an IP literal or the port is not 1..65535.
absl::StatusOr<FabricAddress> ParseFabricAddress(const std::string& text);
std::string FormatFabricAddress(const FabricAddress& address);

// Who the node is to the target: its host NQN and (optional) host id, as nvme-cli keeps them in
// /etc/nvme/hostnqn and /etc/nvme/hostid.
struct HostIdentity {
  std::string nqn;
  std::string id;
};
// Reads /etc/nvme/hostnqn and /etc/nvme/hostid under `root`; FailedPrecondition naming the file
// when there is no host NQN (the kernel would make up one per boot, which no target allows).
absl::StatusOr<HostIdentity> ReadHostIdentity(const std::string& root = "");

struct FabricController {
  std::string name;  // "nvme3"
  FabricAddress address;
  std::string state;  // "live", "connecting", "resetting", "deleting", ...
};

struct ConnectOptions {
  std::string subsystem_nqn;
  HostIdentity host;
  std::string dhchap_secret;        // "DHHC-1:..." or empty
  int reconnect_delay_seconds = 2;  // the kernel retries a lost controller this often, forever
};

// The kernel's fabrics state under `root` ("" in production; a fake tree in tests).
class Fabrics {
 public:
  explicit Fabrics(std::string root = "") : root_(std::move(root)) {}

  // TCP controllers of `subsystem_nqn` connected for `host_nqn`, in name order.
  std::vector<FabricController> Controllers(const std::string& subsystem_nqn,
                                            const std::string& host_nqn) const;

  // Connects a controller to `address` unless one exists (for this subsystem and host). Returns
  // whether it made one. The kernel reconnects a lost controller every reconnect_delay_seconds
  // without end (ctrl_loss_tmo=-1): only Disconnect removes it. Errors name the address.
  absl::StatusOr<bool> Connect(const FabricAddress& address, const ConnectOptions& options) const;

  // Deletes the controller to `address`; OK when there is none.
  absl::Status Disconnect(const FabricAddress& address, const std::string& subsystem_nqn,
                          const std::string& host_nqn) const;

  // The generic char device of namespace `nsid`'s multipath head ("/dev/ng1n2"), waiting up to
  // `wait_ms` for the kernel to scan a freshly connected controller. NotFound naming the nsid
  // when the subsystem has no such namespace; FailedPrecondition when nvme_core's multipath is
  // off (no head: a path's loss would end the volume).
  absl::StatusOr<std::string> HeadCharDevice(const std::string& subsystem_nqn, uint32_t nsid,
                                             int wait_ms) const;

 private:
  std::string root_;
};

}  // namespace blk::server::nvme
