#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace blk::csi {

// The file of a file-pool volume, made by the controller at CreateVolume: a new regular file
// of `size_bytes` (sparse, mode 0600), durable before the call returns. The directory must
// exist (a pool that is not mounted is an error, not a reason to write elsewhere). A regular
// file of exactly that size already there is one an interrupted earlier call made: OK. Anything
// else there (other size, a symlink, a device) is FAILED_PRECONDITION: never hand someone
// else's data to a new claim.
absl::Status CreateBackingFile(const std::string& path, int64_t size_bytes);

// Before the node stages a file volume the agent does not have: the file must be there. blk-csi
// never has the agent create one (the controller made it, or whoever made the PersistentVolume
// did): after a reboot a pool whose file system is not mounted yet would otherwise get an
// empty file in place of the volume's data. Missing: FAILED_PRECONDITION naming the path.
absl::Status RequireBackingFile(const std::string& path);

}  // namespace blk::csi
