#include "agent/devices/reconcile.h"

#include <algorithm>

namespace blk::agent {

const char* KernelDeviceStateName(KernelDeviceState state) {
  switch (state) {
    case KernelDeviceState::kAbsent:
      return "absent";
    case KernelDeviceState::kDead:
      return "dead";
    case KernelDeviceState::kLive:
      return "live";
    case KernelDeviceState::kQuiesced:
      return "quiesced";
    case KernelDeviceState::kFailIo:
      return "fail-io";
    case KernelDeviceState::kUnknown:
      return "unknown";
  }
  return "unknown";
}

RestoreAction DecideRestore(int recorded_id, KernelDeviceState state) {
  if (recorded_id < 0) return RestoreAction::kCreateWithAnyId;
  switch (state) {
    case KernelDeviceState::kAbsent:
      return RestoreAction::kCreateWithSameId;
    case KernelDeviceState::kDead:
      return RestoreAction::kDeleteThenCreate;
    case KernelDeviceState::kLive:
    case KernelDeviceState::kQuiesced:
    case KernelDeviceState::kFailIo:
    case KernelDeviceState::kUnknown:
      // A live device's old server may still be exiting; recovery waits for it. Never delete a
      // device that may hold an application's queued I/O.
      return RestoreAction::kRecover;
  }
  return RestoreAction::kRecover;
}

std::vector<int> UnknownDevices(const std::vector<int>& kernel_ids, const std::set<int>& ours) {
  std::vector<int> unknown;
  for (int id : kernel_ids) {
    if (!ours.contains(id)) unknown.push_back(id);
  }
  std::sort(unknown.begin(), unknown.end());
  return unknown;
}

int FirstFreeDeviceId(const std::vector<int>& kernel_ids, const std::set<int>& claimed) {
  std::set<int> taken(kernel_ids.begin(), kernel_ids.end());
  taken.insert(claimed.begin(), claimed.end());
  int id = 0;
  while (taken.contains(id)) ++id;
  return id;
}

}  // namespace blk::agent
