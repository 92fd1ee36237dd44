#pragma once

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/volume_device.h"
#include "agent/volume_registry.h"
#include "blk/v1/volume.pb.h"

namespace blk::agent {

// The volumes this agent owns: their specs (persisted), states and devices.
// Semantics follow CSI: Create is idempotent on the id, Delete of an unknown id
// is OK, a second call while one is in flight on the same id is ABORTED, and a
// rejected request changes nothing.
class VolumeTable {
 public:
  VolumeTable(VolumeRegistry registry, DeviceProvisioner& provisioner);
  VolumeTable(const VolumeTable&) = delete;
  VolumeTable& operator=(const VolumeTable&) = delete;

  // Brings up every persisted volume. Volumes that fail stay listed in state
  // FAILED with the reason; returns the problems found, for the log.
  std::vector<std::string> Restore();

  absl::StatusOr<v1::Volume> Create(const v1::Volume& requested);
  absl::Status Delete(const std::string& id, bool force);
  absl::StatusOr<v1::Volume> Get(const std::string& id) const;
  std::vector<v1::Volume> List() const;

  // Stops every device, keeping the persisted specs (agent shutdown).
  void StopAll();

 private:
  struct Entry {
    v1::Volume volume;  // normalized spec plus status
    std::unique_ptr<VolumeDevice> device;
    bool busy = false;  // a Create or Delete is in flight
  };

  // Provisions the device of an entry marked busy and records the outcome.
  absl::StatusOr<v1::Volume> BringUp(const v1::Volume& spec);
  absl::Status CheckNoConflictLocked(const v1::Volume& spec) const;

  VolumeRegistry registry_;
  DeviceProvisioner& provisioner_;
  mutable std::mutex mutex_;
  std::map<std::string, Entry> entries_;
};

}  // namespace blk::agent
