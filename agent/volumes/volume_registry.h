#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/volumes/volume_record.h"
#include "blk/v1/volume.pb.h"

namespace blk::agent {

// The desired state of every volume this agent owns, one file per volume under
// <state-dir>/volumes/, so a restarted agent knows what it owned and which
// kernel device served it.
//
// Records are encoded as agent/volumes/volume_record.h says. Each save keeps the
// previous good record as <id>.json.prev, so a corrupt or truncated <id>.json
// (a disk or filesystem that lied about a write) falls back to it.
class VolumeRegistry {
 public:
  using Record = VolumeRecord;
  struct Loaded {
    std::vector<Record> records;        // ordered by id
    std::vector<std::string> problems;  // unreadable records, each naming its file
  };

  // Creates <state_dir>/volumes if needed.
  static absl::StatusOr<VolumeRegistry> Open(const std::string& state_dir);

  // Persists the spec (status is not stored) and its device id atomically. A failure is
  // INTERNAL, naming the volume, its record's file and the system's error (a full or read-only
  // state file system): the caller's operation fails with it, and undoes what it did.
  absl::Status Save(const v1::Volume& spec, int device_id = -1) const;
  // Removes the record and its previous version; a missing one is fine. A failure is INTERNAL,
  // like Save's.
  absl::Status Remove(const std::string& id) const;
  Loaded LoadAll() const;

  const std::string& directory() const { return directory_; }

 private:
  explicit VolumeRegistry(std::string directory) : directory_(std::move(directory)) {}
  std::string PathOf(const std::string& id) const;

  std::string directory_;
};

}  // namespace blk::agent
