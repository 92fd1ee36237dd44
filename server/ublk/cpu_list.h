// CPU sets in the kernel's list format ("0-2,5"), as in /proc/PID/status Cpus_allowed_list and
// /sys/devices/system/cpu/online.
#pragma once

#include <sched.h>

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace blk::server {

// "0,2-3" -> {0, 2, 3}: comma-separated CPUs and inclusive ranges, sorted and without duplicates
// in the result. Empty text, empty items, reversed ranges and CPUs >= CPU_SETSIZE are
// InvalidArgument, naming the offending item.
absl::StatusOr<std::vector<int>> ParseCpuList(std::string_view text);

// {0, 1, 2, 5} -> "0-2,5"; {} -> "".
std::string FormatCpuList(const std::vector<int>& cpus);

std::vector<int> CpusOf(const cpu_set_t& set);
cpu_set_t CpuSetOf(const std::vector<int>& cpus);

// The CPUs this process may run on: its main thread's affinity, which the queue threads' pinning
// does not change.
std::vector<int> AllowedCpus();

}  // namespace blk::server
