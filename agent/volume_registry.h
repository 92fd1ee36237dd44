#pragma once

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include <string>
#include <vector>

#include "blk/v1/volume.pb.h"

namespace blk::agent {

// The desired state of every volume this agent owns, one JSON file per volume
// under <state-dir>/volumes/, so a restarted agent knows what it owned.
class VolumeRegistry {
 public:
  struct Loaded {
    std::vector<v1::Volume> volumes;   // ordered by id
    std::vector<std::string> problems;  // unreadable records, each naming its file
  };

  // Creates <state_dir>/volumes if needed.
  static absl::StatusOr<VolumeRegistry> Open(const std::string& state_dir);

  // Persists the spec (status is not stored) atomically.
  absl::Status Save(const v1::Volume& spec) const;
  absl::Status Remove(const std::string& id) const;
  Loaded LoadAll() const;

  const std::string& directory() const { return directory_; }

 private:
  explicit VolumeRegistry(std::string directory) : directory_(std::move(directory)) {}
  std::string PathOf(const std::string& id) const;

  std::string directory_;
};

}  // namespace blk::agent
