// Which CPUs each NUMA node has, from sysfs.
#pragma once

#include <sched.h>

#include <string>
#include <vector>

namespace blk::server {

// Each NUMA node's CPUs, from `node_dir`'s node*/cpulist; nodes without CPUs are left out. Empty
// when the kernel has no such directory (built without NUMA): one node of every CPU.
std::vector<cpu_set_t> NumaNodeCpus(const std::string& node_dir = "/sys/devices/system/node");

}  // namespace blk::server
