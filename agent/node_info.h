#pragma once

#include "blk/v1/volume.pb.h"

namespace blk::agent {

// What this node's kernel offers: release, ublk availability and features, CPUs.
v1::GetNodeInfoResponse ReadNodeInfo();

}  // namespace blk::agent
