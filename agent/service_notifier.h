#pragma once

#include <string>
#include <vector>

#include "blk/v1/volume.pb.h"

namespace blk::agent {

// Tells systemd how the agent's start and stop go (sd_notify; the unit is Type=notify): READY once
// the volumes are reconciled and the gRPC server serves, STOPPING once a termination signal came,
// each with a STATUS line for `systemctl status`. Without NOTIFY_SOCKET (not started by systemd)
// both do nothing; a message that cannot be sent is logged, never fatal.
void NotifyReady(const std::string& status);
void NotifyStopping(const std::string& status);

// The STATUS of READY: how many volumes start-up reconciliation took back, by state, e.g.
// "serving; 3 volumes recovered (2 live, 1 degraded)".
std::string ServingStatus(const std::vector<v1::Volume>& recovered);

}  // namespace blk::agent
