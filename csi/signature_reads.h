// Whether a device can be read where file systems and partition tables keep their signatures.
// blkid reports "nothing found" (exit status 2) also when its reads fail, so an NBD volume in a
// read time-out or an NVMe volume during a path outage would look empty and be formatted over its
// data. Before blk-csi trusts a probe, it reads these places itself.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace blk::csi {

// The first and the last MiB of a device (or all of a smaller one), read with O_DIRECT (past the
// page cache, from the device itself). Signatures live there: ext4's and xfs's superblocks and
// partition tables at the start, GPT's backup header, md and some RAID metadata at the end.
inline constexpr uint64_t kSignatureReadBytes = 1 << 20;

// OK when every byte of both ranges was read; otherwise UNAVAILABLE naming the device, the offset
// and the error (a device that is empty or ends early counts as unreadable).
absl::Status ReadWhereSignaturesLive(const std::string& device);

}  // namespace blk::csi
