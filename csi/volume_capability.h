#pragma once

#include "absl/status/status.h"
#include "csi/v1/csi.pb.h"

namespace blk::csi {

// OK when blk-csi can serve a volume with `capability`: block or mount access
// (ext4 or xfs, or unset for ext4), on one node at a time; INVALID_ARGUMENT
// saying why not otherwise. The Node and the Controller service ask the same.
absl::Status CheckVolumeCapability(const ::csi::v1::VolumeCapability& capability);

// Whether `capability`'s access mode only reads (SINGLE_NODE_READER_ONLY,
// MULTI_NODE_READER_ONLY): such a volume is staged read-only, the ublk device
// read-only in the kernel.
bool IsReaderOnly(const ::csi::v1::VolumeCapability& capability);

}  // namespace blk::csi
