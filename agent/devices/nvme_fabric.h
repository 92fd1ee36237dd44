// A fabric volume's controllers: connected before its device is served (create, restore,
// recovery), counted for its status, and disconnected when no volume uses them, only those the
// agent connected itself (NvmeFabric.agent_connected_paths).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "blk/v1/volume.pb.h"

namespace blk::agent {

struct FabricAttachment {
  std::string head_path;          // the namespace's multipath head, /dev/ngXnY
  std::vector<std::string> made;  // paths ("host:port") whose controllers this call connected
};

// Why a volume's controllers are connected: a new volume needs every path (a wrong one is the
// request's mistake, and what this call connected is disconnected again); a volume served before
// comes up on the paths that connect (the others stay down until an agent restart).
enum class FabricNeed { kEveryPath, kAnyPath };

// Connects the paths that have no controller, then finds the namespace's head. Blocking (a TCP
// connect per missing path). Errors name the path or the namespace.
using FabricAttacher =
    std::function<absl::StatusOr<FabricAttachment>(const v1::NvmeFabric&, FabricNeed)>;
FabricAttacher RealFabricAttacher();

// Disconnects `paths` of the fabric's subsystem (failures are logged: a controller left behind is
// visible in `nvme list-subsys`, not a reason to keep a volume).
void DisconnectFabricPaths(const v1::NvmeFabric& fabric, const std::vector<std::string>& paths);

struct FabricPathCount {
  uint32_t live = 0;
  uint32_t total = 0;
};
// Of the fabric's paths, those whose controller is live now (read from sysfs).
FabricPathCount CountLivePaths(const v1::NvmeFabric& fabric);

// The failover bound of a fabric volume: io_timeout_seconds, 0 meaning 30 s.
uint32_t FabricIoTimeoutMs(const v1::NvmeFabric& fabric);

}  // namespace blk::agent
