// One persisted volume record as bytes: what VolumeRegistry writes to and reads from
// <state-dir>/volumes/<id>.json. Pure functions over text, so the decoder (which reads whatever
// the disk gave back) is unit-testable and fuzzable without a state directory.
//
// Record format 3: a header line "blkagent-volume 3 device=<N> fnv1a64=<hex>" (the checksum
// covers everything after the line), then the spec as JSON. Format 3 specs may carry rq_affinity
// and placement, which an agent of format 2 cannot parse; it refuses the record by its format
// instead. Format 2 (the same layout, specs without them) and format 1 (a bare JSON spec, no
// device id) are still read.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "blk/v1/volume.pb.h"

namespace blk::agent {

struct VolumeRecord {
  v1::Volume spec;
  int device_id = -1;  // the kernel ublk id; -1: not assigned yet
};

// The record in the current format; the spec's status is not stored.
std::string EncodeVolumeRecord(const VolumeRecord& record);
// `expected_id`: the id the file name says. Errors name what is wrong, not the file.
absl::StatusOr<VolumeRecord> DecodeVolumeRecord(const std::string& text,
                                                const std::string& expected_id);

}  // namespace blk::agent
