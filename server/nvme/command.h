// Translation of ublk requests into NVMe I/O commands for io_uring passthrough on /dev/ngXnY,
// and of NVMe completion status back into errno values. Pure functions: the data path calls
// them per I/O, so they neither allocate nor fail with anything but an errno.
#pragma once

#include <cstdint>
#include <span>

#include "absl/status/statusor.h"
#include "server/nvme/abi.h"
#include "server/nvme/identify.h"

namespace blk::server::nvme {

// Where one volume lives on a namespace and what the namespace can do; built once per volume by
// MakeNamespaceTarget, read per I/O.
struct NamespaceTarget {
  uint32_t nsid = 0;
  uint32_t lba_shift = 9;
  uint64_t offset_blocks = 0;  // first namespace LBA of the volume
  uint64_t size_blocks = 0;    // volume length
  // Largest data transfer of one Read/Write: MDTS capped at the 65536-block NLB limit.
  uint32_t max_transfer_bytes = 0;
  bool write_zeroes = false;
  bool dataset_management = false;
  bool volatile_write_cache = false;
};

// A volume of `size_bytes` (0 = the rest of the namespace) starting `offset_bytes` into the
// namespace. Both must be multiples of the LBA size, and the volume must fit in the namespace.
absl::StatusOr<NamespaceTarget> MakeNamespaceTarget(const NamespaceProfile& profile,
                                                    uint64_t offset_bytes, uint64_t size_bytes);

// The volume's length in blocks once grown to `size_bytes` (ResizeVolume), in a namespace now
// `namespace_bytes` large (it may have grown since the volume was placed): InvalidArgument when
// the size is not a multiple of the LBA size or smaller than the volume; FailedPrecondition naming
// the namespace's size when the volume would end beyond it.
absl::StatusOr<uint64_t> GrownSizeBlocks(const NamespaceTarget& target, uint64_t namespace_bytes,
                                         uint64_t size_bytes);

// One ublk request, in bytes relative to the volume.
struct BlockRequest {
  uint8_t op = 0;  // abi::kIoOp* (ublk)
  uint64_t offset_bytes = 0;
  uint32_t length_bytes = 0;
  bool fua = false;
  uint64_t buffer = 0;  // data address (or offset in a registered buffer) for Read/Write
};

// How many commands BuildCommands may produce for requests of at most `max_request_bytes`: the
// size of the per-tag command array.
uint32_t MaxCommandsPerRequest(const NamespaceTarget& target, uint32_t max_request_bytes);

// Fills `out` with the NVMe commands that carry `request` and returns how many, or a negative
// errno with nothing to submit:
//   -EINVAL      offset or length not a multiple of the LBA size, or beyond the volume
//   -EOPNOTSUPP  an op the namespace lacks (Write Zeroes, DSM) or ublk ops we do not serve
//   -EOVERFLOW   `out` has fewer entries than the request needs (see MaxCommandsPerRequest)
// 0 means the request completes successfully without a command (Flush without a volatile write
// cache, zero-length requests). Reads and writes split at max_transfer_bytes, Write Zeroes at the
// NLB limit; each piece keeps FUA. A discard becomes one Dataset Management deallocate whose
// 16-byte range is written to `*dsm_range`, which must stay valid until the command completes.
int BuildCommands(const NamespaceTarget& target, const BlockRequest& request,
                  std::span<UringCmd> out, DsmRange* dsm_range);

// The errno for a positive NVMe status as the kernel reports it (SC | SCT << 8 | ...), 0 for
// success. Values are the ones the block layer knows (EOPNOTSUPP, ENOSPC, ENODATA, EILSEQ,
// ENOLINK, EREMOTEIO, ENODEV), so a ublk request failed with them is logged by class.
int ErrnoFromStatus(uint32_t status);

// The errno for a URING_CMD completion's res: negative values are already -errno from the
// kernel, positive ones are NVMe status. Returns 0 or a positive errno.
int ErrnoFromCompletion(int32_t res);

// Whether a URING_CMD completion's res says the namespace or its controller is gone (the kernel
// refusing the command on a removed device, or a path or invalid-namespace NVMe status).
bool NamespaceGone(int32_t res);

// Whether a URING_CMD completion on a multipath head failed for the path rather than the command:
// no live path (the head refuses with EINVAL), a controller gone or resetting, a path-related NVMe
// status (host path error, aborted by the host on a transport loss, ANA transition). Another path,
// or the same one once reconnected, may serve the command unchanged.
bool PathFailure(int32_t res);

}  // namespace blk::server::nvme
