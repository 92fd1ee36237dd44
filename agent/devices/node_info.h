#pragma once

#include <string>

#include "blk/v1/volume.pb.h"

namespace blk::agent {

// Whether the kernel-side completion-locality probe runs, and what it says.
struct BpfLocalityStatus {
  bool available = false;
  std::string message;
};

// What this node's kernel offers: release, ublk availability and features,
// CPUs, and whether the agent's BPF probe runs.
v1::GetNodeInfoResponse ReadNodeInfo(const BpfLocalityStatus& bpf_locality);

}  // namespace blk::agent
