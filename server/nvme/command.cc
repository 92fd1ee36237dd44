#include "server/nvme/command.h"

#include <endian.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "server/ublk/abi.h"

namespace blk::server::nvme {
namespace {

UringCmd BlockCommand(uint8_t opcode, const NamespaceTarget& target, uint64_t lba,
                      uint32_t blocks) {
  UringCmd cmd{};
  cmd.opcode = opcode;
  cmd.nsid = target.nsid;
  cmd.cdw10 = static_cast<uint32_t>(lba);
  cmd.cdw11 = static_cast<uint32_t>(lba >> 32);
  cmd.cdw12 = blocks - 1;  // NLB is 0-based
  return cmd;
}

// Splits [lba, lba + blocks) into commands of at most `max_blocks`.
int BuildSplit(const NamespaceTarget& target, const BlockRequest& request, uint8_t opcode,
               uint64_t lba, uint64_t blocks, uint32_t max_blocks, bool carries_data,
               std::span<UringCmd> out) {
  if (max_blocks == 0) return -EINVAL;  // a target not made by MakeNamespaceTarget
  const uint64_t count = (blocks + max_blocks - 1) / max_blocks;
  if (count > out.size()) return -EOVERFLOW;
  uint64_t done = 0;
  for (uint64_t i = 0; i < count; ++i) {
    const uint32_t piece = static_cast<uint32_t>(std::min<uint64_t>(max_blocks, blocks - done));
    UringCmd& cmd = out[i];
    cmd = BlockCommand(opcode, target, lba + done, piece);
    if (request.fua) cmd.cdw12 |= kCdw12Fua;
    if (carries_data) {
      cmd.addr = request.buffer + (done << target.lba_shift);
      cmd.data_len = piece << target.lba_shift;
    }
    done += piece;
  }
  return static_cast<int>(count);
}

}  // namespace

absl::StatusOr<NamespaceTarget> MakeNamespaceTarget(const NamespaceProfile& profile,
                                                    uint64_t offset_bytes, uint64_t size_bytes) {
  const NamespaceFormat& format = profile.format;
  if (format.lba_shift < 9 || format.lba_shift > 12) {
    return absl::InvalidArgumentError(
        absl::StrCat("namespace LBA shift ", format.lba_shift, " is outside 9..12"));
  }
  const uint64_t lba_mask = (uint64_t{1} << format.lba_shift) - 1;
  if ((offset_bytes & lba_mask) != 0 || (size_bytes & lba_mask) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "volume offset ", offset_bytes, " and size ", size_bytes,
        " must be multiples of the namespace's LBA size of ", format.lba_bytes, " bytes"));
  }
  const uint64_t namespace_bytes = format.size_bytes();
  if (offset_bytes >= namespace_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("volume offset ", offset_bytes,
                                                   " is not inside the namespace of ",
                                                   namespace_bytes, " bytes"));
  }
  if (size_bytes == 0) size_bytes = namespace_bytes - offset_bytes;
  if (size_bytes > namespace_bytes - offset_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("volume of ", size_bytes, " bytes at offset ", offset_bytes,
                     " does not fit in the namespace of ", namespace_bytes, " bytes"));
  }

  NamespaceTarget target;
  target.nsid = profile.nsid;
  target.lba_shift = format.lba_shift;
  target.offset_blocks = offset_bytes >> format.lba_shift;
  target.size_blocks = size_bytes >> format.lba_shift;
  uint64_t max_transfer = uint64_t{kMaxBlocksPerCommand} << format.lba_shift;
  if (profile.controller.max_transfer_bytes != 0) {
    max_transfer = std::min(max_transfer, profile.controller.max_transfer_bytes);
  }
  if (max_transfer < format.lba_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("controller's max transfer of ", max_transfer,
                                                   " bytes is smaller than one LBA"));
  }
  target.max_transfer_bytes = static_cast<uint32_t>(max_transfer & ~lba_mask);
  target.write_zeroes = profile.controller.write_zeroes;
  target.dataset_management = profile.controller.dataset_management;
  target.volatile_write_cache = profile.controller.volatile_write_cache;
  return target;
}

absl::StatusOr<uint64_t> GrownSizeBlocks(const NamespaceTarget& target, uint64_t namespace_bytes,
                                         uint64_t size_bytes) {
  const uint64_t lba_bytes = uint64_t{1} << target.lba_shift;
  const uint64_t offset_bytes = target.offset_blocks << target.lba_shift;
  const uint64_t current_bytes = target.size_blocks << target.lba_shift;
  if (size_bytes % lba_bytes != 0) {
    return absl::InvalidArgumentError(absl::StrCat("a volume size of ", size_bytes,
                                                   " bytes is not a multiple of the LBA size of ",
                                                   lba_bytes, " bytes"));
  }
  if (size_bytes < current_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the volume has ", current_bytes, " bytes; it cannot shrink to ", size_bytes));
  }
  if (offset_bytes > namespace_bytes || size_bytes > namespace_bytes - offset_bytes) {
    return absl::FailedPreconditionError(
        absl::StrCat("the namespace has ", namespace_bytes, " bytes: a volume at offset ",
                     offset_bytes, " can grow to at most ",
                     offset_bytes > namespace_bytes ? 0 : namespace_bytes - offset_bytes,
                     " bytes, not ", size_bytes));
  }
  return size_bytes >> target.lba_shift;
}

uint32_t MaxCommandsPerRequest(const NamespaceTarget& target, uint32_t max_request_bytes) {
  if (target.max_transfer_bytes == 0) return 1;
  const uint64_t by_transfer =
      (uint64_t{max_request_bytes} + target.max_transfer_bytes - 1) / target.max_transfer_bytes;
  const uint64_t max_zeroes_bytes = uint64_t{kMaxBlocksPerCommand} << target.lba_shift;
  const uint64_t by_zeroes =
      (uint64_t{max_request_bytes} + max_zeroes_bytes - 1) / max_zeroes_bytes;
  return static_cast<uint32_t>(std::max<uint64_t>({by_transfer, by_zeroes, 1}));
}

int BuildCommands(const NamespaceTarget& target, const BlockRequest& request,
                  std::span<UringCmd> out, DsmRange* dsm_range) {
  if (request.op == abi::kIoOpFlush) {
    // Without a volatile write cache every completed write is already durable.
    if (!target.volatile_write_cache) return 0;
    if (out.empty()) return -EOVERFLOW;
    out[0] = UringCmd{};
    out[0].opcode = kOpFlush;
    out[0].nsid = target.nsid;
    return 1;
  }

  const uint64_t lba_mask = (uint64_t{1} << target.lba_shift) - 1;
  if ((request.offset_bytes & lba_mask) != 0 || (request.length_bytes & lba_mask) != 0) {
    return -EINVAL;
  }
  const uint64_t first = request.offset_bytes >> target.lba_shift;
  const uint64_t blocks = request.length_bytes >> target.lba_shift;
  if (first > target.size_blocks || blocks > target.size_blocks - first) return -EINVAL;
  if (blocks == 0) return 0;
  const uint64_t lba = target.offset_blocks + first;
  const uint32_t max_data_blocks = target.max_transfer_bytes >> target.lba_shift;

  switch (request.op) {
    case abi::kIoOpRead:
      return BuildSplit(target, request, kOpRead, lba, blocks, max_data_blocks, true, out);
    case abi::kIoOpWrite:
      return BuildSplit(target, request, kOpWrite, lba, blocks, max_data_blocks, true, out);
    case abi::kIoOpWriteZeroes:
      if (!target.write_zeroes) return -EOPNOTSUPP;
      return BuildSplit(target, request, kOpWriteZeroes, lba, blocks, kMaxBlocksPerCommand, false,
                        out);
    case abi::kIoOpDiscard: {
      if (!target.dataset_management) return -EOPNOTSUPP;
      if (dsm_range == nullptr) return -EINVAL;
      if (out.empty()) return -EOVERFLOW;
      // A ublk request is at most 2^32 - 1 bytes, so its block count fits one 32-bit range.
      dsm_range->context_attributes = 0;
      dsm_range->length_blocks = htole32(static_cast<uint32_t>(blocks));
      dsm_range->starting_lba = htole64(lba);
      UringCmd& cmd = out[0];
      cmd = UringCmd{};
      cmd.opcode = kOpDatasetManagement;
      cmd.nsid = target.nsid;
      cmd.addr = reinterpret_cast<uintptr_t>(dsm_range);
      cmd.data_len = sizeof(DsmRange);
      cmd.cdw10 = 0;  // one range, 0-based
      cmd.cdw11 = kDsmAttrDeallocate;
      return 1;
    }
    default:
      return -EOPNOTSUPP;
  }
}

int ErrnoFromStatus(uint32_t status) {
  const uint8_t sc = status & kStatusScMask;
  const uint8_t sct = (status >> kStatusSctShift) & kStatusSctMask;
  if (sct == kSctGeneric && sc == kScSuccess) return 0;
  switch (sct) {
    case kSctGeneric:
      switch (sc) {
        case kScInvalidOpcode:
        case kScInvalidField:
          return EOPNOTSUPP;
        case kScInvalidNamespace:
          return ENODEV;
        case kScCapacityExceeded:
          return ENOSPC;
        case kScLbaOutOfRange:
        case kScNamespaceNotReady:
          return EREMOTEIO;
        default:
          return EIO;
      }
    case kSctCommandSpecific:
      switch (sc) {
        case kScConflictingAttributes:
          return EINVAL;
        case kScInvalidProtectionInfo:
          return EILSEQ;
        case kScWriteToReadOnlyRange:
          return EROFS;
        default:
          return EIO;
      }
    case kSctMediaError:
      switch (sc) {
        case kScWriteFault:
        case kScUnrecoveredReadError:
        case kScDeallocatedOrUnwrittenBlock:
          return ENODATA;
        case kScGuardCheckError:
        case kScAppTagCheckError:
        case kScRefTagCheckError:
          return EILSEQ;
        case kScAccessDenied:
          return EACCES;
        default:
          return EIO;
      }
    case kSctPathRelated:
      return ENOLINK;
    default:
      return EIO;
  }
}

int ErrnoFromCompletion(int32_t res) {
  if (res < 0) return -res;
  return ErrnoFromStatus(static_cast<uint32_t>(res));
}

bool NamespaceGone(int32_t res) {
  if (res < 0) return res == -ENODEV || res == -ENXIO || res == -ESHUTDOWN;
  const uint8_t sc = res & kStatusScMask;
  const uint8_t sct = (res >> kStatusSctShift) & kStatusSctMask;
  return sct == kSctPathRelated || (sct == kSctGeneric && sc == kScInvalidNamespace);
}

bool PathFailure(int32_t res) {
  if (res < 0) {
    switch (-res) {
      case EINVAL:
      case ENODEV:
      case ENXIO:
      case ESHUTDOWN:
      case EAGAIN:
      case ENOLINK:
      case ETIMEDOUT:
      case EINTR:
      case ECANCELED:
        return true;
      default:
        return false;
    }
  }
  return ((res >> kStatusSctShift) & kStatusSctMask) == kSctPathRelated;
}

}  // namespace blk::server::nvme
