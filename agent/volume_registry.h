#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "blk/v1/volume.pb.h"

namespace blk::agent {

// The desired state of every volume this agent owns, one file per volume under
// <state-dir>/volumes/, so a restarted agent knows what it owned and which
// kernel device served it.
//
// Record format 3: a header line "blkagent-volume 3 device=<N> fnv1a64=<hex>"
// (the checksum covers everything after the line), then the spec as JSON.
// Format 3 specs may carry rq_affinity and placement, which an agent of format
// 2 cannot parse; it refuses the record by its format instead. Format 2 (the
// same layout, specs without them) and format 1 (a bare JSON spec, no device
// id) are still read. Each save keeps the
// previous good record as <id>.json.prev, so a corrupt or truncated <id>.json
// (a disk or filesystem that lied about a write) falls back to it.
class VolumeRegistry {
 public:
  struct Record {
    v1::Volume spec;
    int device_id = -1;  // the kernel ublk id; -1: not assigned yet
  };
  struct Loaded {
    std::vector<Record> records;        // ordered by id
    std::vector<std::string> problems;  // unreadable records, each naming its file
  };

  // Creates <state_dir>/volumes if needed.
  static absl::StatusOr<VolumeRegistry> Open(const std::string& state_dir);

  // Persists the spec (status is not stored) and its device id atomically.
  absl::Status Save(const v1::Volume& spec, int device_id = -1) const;
  absl::Status Remove(const std::string& id) const;
  Loaded LoadAll() const;

  const std::string& directory() const { return directory_; }

 private:
  explicit VolumeRegistry(std::string directory) : directory_(std::move(directory)) {}
  std::string PathOf(const std::string& id) const;

  std::string directory_;
};

// Encoding of one record (exposed for tests).
std::string EncodeVolumeRecord(const VolumeRegistry::Record& record);
// `expected_id`: the id the file name says. Errors name what is wrong, not the file.
absl::StatusOr<VolumeRegistry::Record> DecodeVolumeRecord(const std::string& text,
                                                          const std::string& expected_id);

}  // namespace blk::agent
