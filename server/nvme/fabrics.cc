#include "server/nvme/fabrics.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/read_file.h"
#include "common/unique_fd.h"

namespace blk::server::nvme {
namespace {

namespace fs = std::filesystem;

// A sysfs attribute without its trailing newline; "" when it cannot be read.
std::string Attribute(const fs::path& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path.string());
  if (!text.ok()) return "";
  return std::string(absl::StripTrailingAsciiWhitespace(*text));
}

// "traddr=192.0.2.1,trsvcid=4420,src_addr=..." (newer kernels add src_addr, host_traddr...).
bool ParseSysfsAddress(const std::string& text, FabricAddress& address) {
  bool host = false;
  bool port = false;
  for (absl::string_view pair : absl::StrSplit(text, ',')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(pair, absl::MaxSplits('=', 1));
    if (kv.first == "traddr") {
      address.host = std::string(kv.second);
      host = true;
    } else if (kv.first == "trsvcid") {
      uint32_t value = 0;
      port = absl::SimpleAtoi(kv.second, &value) && value > 0 && value <= 65535;
      address.port = static_cast<uint16_t>(value);
    }
  }
  return host && port;
}

bool SameHost(const std::string& a, const std::string& b) {
  // Compare addresses, not spellings ("::1" and "0::1").
  in6_addr a6{}, b6{};
  if (inet_pton(AF_INET6, a.c_str(), &a6) == 1 && inet_pton(AF_INET6, b.c_str(), &b6) == 1) {
    return std::equal(std::begin(a6.s6_addr), std::end(a6.s6_addr), std::begin(b6.s6_addr));
  }
  return a == b;
}

std::string ConnectError(const FabricAddress& address, const ConnectOptions& options, int error) {
  return absl::StrCat("connecting to NVMe/TCP target ", FormatFabricAddress(address),
                      " for subsystem ", options.subsystem_nqn, ": ", std::strerror(error));
}

}  // namespace

absl::StatusOr<FabricAddress> ParseFabricAddress(const std::string& text) {
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("path '", text, "': ", why));
  };
  FabricAddress address;
  absl::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return invalid("expected [IPv6]:PORT");
    }
    address.host = text.substr(1, close - 1);
    port_text = absl::string_view(text).substr(close + 2);
    in6_addr v6{};
    if (inet_pton(AF_INET6, address.host.c_str(), &v6) != 1) {
      return invalid("the part in brackets is not an IPv6 address");
    }
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string::npos) return invalid("expected HOST:PORT");
    address.host = text.substr(0, colon);
    port_text = absl::string_view(text).substr(colon + 1);
    in_addr v4{};
    if (inet_pton(AF_INET, address.host.c_str(), &v4) != 1) {
      return invalid(
          "the host must be an IPv4 address or a bracketed IPv6 one (the kernel connects to "
          "addresses; the agent does not resolve names)");
    }
  }
  uint32_t port = 0;
  if (!absl::SimpleAtoi(port_text, &port) || port == 0 || port > 65535) {
    return invalid("the port must be 1..65535");
  }
  address.port = static_cast<uint16_t>(port);
  return address;
}

std::string FormatFabricAddress(const FabricAddress& address) {
  if (address.host.find(':') != std::string::npos) {
    return absl::StrCat("[", address.host, "]:", address.port);
  }
  return absl::StrCat(address.host, ":", address.port);
}

absl::StatusOr<HostIdentity> ReadHostIdentity(const std::string& root) {
  const std::string nqn_file = root + "/etc/nvme/hostnqn";
  HostIdentity identity;
  identity.nqn = Attribute(nqn_file);
  if (identity.nqn.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "NVMe/TCP needs the node's host NQN in ", nqn_file,
        " (nvme-cli writes it when installed; `nvme gen-hostnqn > ", nqn_file, "` makes one)"));
  }
  identity.id = Attribute(root + "/etc/nvme/hostid");
  return identity;
}

std::vector<FabricController> Fabrics::Controllers(const std::string& subsystem_nqn,
                                                   const std::string& host_nqn) const {
  std::vector<FabricController> found;
  std::error_code error;
  for (const fs::directory_entry& entry :
       fs::directory_iterator(root_ + "/sys/class/nvme", error)) {
    const fs::path& dir = entry.path();
    if (Attribute(dir / "transport") != "tcp") continue;
    if (Attribute(dir / "subsysnqn") != subsystem_nqn) continue;
    if (Attribute(dir / "hostnqn") != host_nqn) continue;
    FabricController controller;
    controller.name = dir.filename().string();
    if (!ParseSysfsAddress(Attribute(dir / "address"), controller.address)) continue;
    controller.state = Attribute(dir / "state");
    found.push_back(std::move(controller));
  }
  std::sort(found.begin(), found.end(),
            [](const FabricController& a, const FabricController& b) { return a.name < b.name; });
  return found;
}

namespace {

const FabricController* FindController(const std::vector<FabricController>& controllers,
                                       const FabricAddress& address) {
  for (const FabricController& controller : controllers) {
    if (controller.address.port == address.port &&
        SameHost(controller.address.host, address.host)) {
      return &controller;
    }
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<bool> Fabrics::Connect(const FabricAddress& address,
                                      const ConnectOptions& options) const {
  if (FindController(Controllers(options.subsystem_nqn, options.host.nqn), address) != nullptr) {
    return false;
  }
  std::string request =
      absl::StrCat("transport=tcp,traddr=", address.host, ",trsvcid=", address.port,
                   ",nqn=", options.subsystem_nqn, ",hostnqn=", options.host.nqn,
                   ",ctrl_loss_tmo=-1,reconnect_delay=", options.reconnect_delay_seconds);
  if (!options.host.id.empty()) absl::StrAppend(&request, ",hostid=", options.host.id);
  if (!options.dhchap_secret.empty()) {
    absl::StrAppend(&request, ",dhchap_secret=", options.dhchap_secret);
  }
  const std::string device = root_ + "/dev/nvme-fabrics";
  UniqueFd fd(::open(device.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd.valid()) {
    const int error = errno;
    if (error == ENOENT) {
      return absl::FailedPreconditionError(
          absl::StrCat(device, " is missing: load the nvme-tcp kernel module"));
    }
    return absl::ErrnoToStatus(error, absl::StrCat("open ", device));
  }
  // One write carries the whole request; the kernel connects before it returns.
  if (::write(fd.get(), request.data(), request.size()) < 0) {
    const int error = errno;
    // Another connect of the same path won the race: the controller exists now.
    if (error == EALREADY) return false;
    const std::string message = ConnectError(address, options, error);
    switch (error) {
      case ECONNREFUSED:
      case ETIMEDOUT:
      case EHOSTUNREACH:
      case ENETUNREACH:
        return absl::UnavailableError(message);
      default:
        return absl::FailedPreconditionError(
            absl::StrCat(message,
                         " (the target refused the subsystem or this host, or no NVMe/TCP target "
                         "listens there; the kernel log says which)"));
    }
  }
  return true;
}

absl::Status Fabrics::Disconnect(const FabricAddress& address, const std::string& subsystem_nqn,
                                 const std::string& host_nqn) const {
  const std::vector<FabricController> controllers = Controllers(subsystem_nqn, host_nqn);
  const FabricController* controller = FindController(controllers, address);
  if (controller == nullptr) return absl::OkStatus();
  const std::string file = root_ + "/sys/class/nvme/" + controller->name + "/delete_controller";
  UniqueFd fd(::open(file.c_str(), O_WRONLY | O_CLOEXEC));
  // Gone between the scan and the open: deleted already.
  if (!fd.valid() && errno == ENOENT) return absl::OkStatus();
  if (!fd.valid() || ::write(fd.get(), "1", 1) < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("disconnecting ", controller->name, " (",
                                                   FormatFabricAddress(address), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Fabrics::HeadCharDevice(const std::string& subsystem_nqn, uint32_t nsid,
                                                    int wait_ms) const {
  if (Attribute(root_ + "/sys/module/nvme_core/parameters/multipath") == "N") {
    return absl::FailedPreconditionError(
        "NVMe multipath is off (nvme_core.multipath=N): without a multipath head the volume "
        "would die with its first path; boot with nvme_core.multipath=Y");
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  const std::string wanted = absl::StrCat(nsid);
  while (true) {
    std::error_code error;
    for (const fs::directory_entry& subsystem :
         fs::directory_iterator(root_ + "/sys/class/nvme-subsystem", error)) {
      if (Attribute(subsystem.path() / "subsysnqn") != subsystem_nqn) continue;
      std::error_code inner;
      for (const fs::directory_entry& entry : fs::directory_iterator(subsystem.path(), inner)) {
        // Heads are nvme<subsystem>n<N>; nvme<controller> entries are the controllers.
        const std::string name = entry.path().filename().string();
        absl::string_view rest = name;
        if (!absl::ConsumePrefix(&rest, "nvme") || rest.find('n') == absl::string_view::npos) {
          continue;
        }
        if (Attribute(entry.path() / "nsid") != wanted) continue;
        const std::string generic = absl::StrCat("ng", rest);
        if (!fs::exists(root_ + "/sys/class/nvme-generic/" + generic)) continue;
        return absl::StrCat(root_, "/dev/", generic);
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    // The kernel scans a new controller's namespaces after the connect returns; a sysfs entry
    // has no event to wait on short of a udev monitor.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::NotFoundError(absl::StrCat("subsystem ", subsystem_nqn, " has no namespace ", nsid,
                                          " (none appeared within ", wait_ms,
                                          " ms of connecting)"));
}

}  // namespace blk::server::nvme
