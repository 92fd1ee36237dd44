// What a starting agent does with each persisted volume, given what the kernel
// has: pure decisions, kept apart from the syscalls so they are testable.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace blk::agent {

enum class KernelDeviceState {
  kAbsent,    // no device with this id
  kDead,      // added but never started (or stopped): nothing serves it, nothing waits on it
  kLive,      // started; its server may still be on the way out
  kQuiesced,  // its server is gone; I/O waits for a new one (user recovery)
  kFailIo,    // its server is gone; I/O fails until a new one (fail-fast recovery)
  kUnknown,   // the kernel could not be asked
};

const char* KernelDeviceStateName(KernelDeviceState state);

enum class RestoreAction {
  kRecover,           // take the device over, keeping its number and its queued I/O
  kCreateWithSameId,  // the device is gone: create it again under its old number
  kDeleteThenCreate,  // a half-created device: remove it, then create it under that number
  kCreateWithAnyId,   // no number recorded yet (a record from format 1)
};

// recorded_id: the id in the volume's record (-1: none).
RestoreAction DecideRestore(int recorded_id, KernelDeviceState state);

// Ids the kernel has that no record claims: some other program's devices, left alone.
std::vector<int> UnknownDevices(const std::vector<int>& kernel_ids, const std::set<int>& ours);

// The lowest id that is neither in the kernel nor claimed by a record.
int FirstFreeDeviceId(const std::vector<int>& kernel_ids, const std::set<int>& claimed);

}  // namespace blk::agent
