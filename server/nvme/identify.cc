#include "server/nvme/identify.h"

#include "absl/strings/str_cat.h"
#include "server/nvme/abi.h"

namespace blk::server::nvme {
namespace {

// Identify data is little-endian.
uint64_t LoadLe(std::span<const uint8_t> page, size_t offset, size_t bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < bytes; ++i) value |= uint64_t{page[offset + i]} << (8 * i);
  return value;
}

absl::Status CheckPageSize(std::span<const uint8_t> page, const char* what) {
  if (page.size() != kIdentifyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " page is ", page.size(), " bytes, expected ", kIdentifyBytes));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<NamespaceFormat> ParseIdentifyNamespace(std::span<const uint8_t> page) {
  if (absl::Status size = CheckPageSize(page, "Identify Namespace"); !size.ok()) return size;

  NamespaceFormat format;
  format.size_blocks = LoadLe(page, kNsNsze, 8);
  format.capacity_blocks = LoadLe(page, kNsNcap, 8);
  if (format.size_blocks == 0) {
    return absl::FailedPreconditionError(
        "Identify Namespace: namespace size (NSZE) is 0: the namespace is not active");
  }
  if (format.capacity_blocks > format.size_blocks) {
    return absl::InvalidArgumentError(absl::StrCat("Identify Namespace: capacity (NCAP ",
                                                   format.capacity_blocks, ") exceeds size (NSZE ",
                                                   format.size_blocks, ")"));
  }

  const uint32_t format_count = uint32_t{page[kNsNlbaf]} + 1;
  const uint8_t flbas = page[kNsFlbas];
  uint32_t index = flbas & kFlbasIndexLowMask;
  // The high index bits are only defined when more than 16 formats exist.
  if (format_count > 16) index |= static_cast<uint32_t>((flbas & kFlbasIndexHighMask) >> 5) << 4;
  if (format_count > kNsLbafCount || index >= format_count) {
    return absl::InvalidArgumentError(absl::StrCat("Identify Namespace: current LBA format ", index,
                                                   " is not among the ", format_count,
                                                   " formats the namespace lists (NLBAF)"));
  }

  const uint32_t lbaf = static_cast<uint32_t>(LoadLe(page, kNsLbaf0 + 4 * index, 4));
  const uint32_t metadata_bytes = lbaf & kLbafMsMask;
  const uint32_t lba_shift = (lbaf >> kLbafLbadsShift) & kLbafLbadsMask;
  if (lba_shift < 9 || lba_shift > 12) {
    return absl::InvalidArgumentError(
        absl::StrCat("Identify Namespace: LBA format ", index, " has a data size of 2^", lba_shift,
                     " bytes; only 512 to 4096 bytes (LBADS 9..12) can back a ublk device"));
  }
  if (metadata_bytes != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Identify Namespace: LBA format ", index, " carries ", metadata_bytes,
        " metadata bytes per block", (flbas & kFlbasExtendedMetadata) ? " (extended LBA)" : "",
        "; metadata formats are not supported, reformat the namespace to a format without "
        "metadata (e.g. `nvme format --lbaf=N`)"));
  }
  if ((format.size_blocks >> (64 - lba_shift)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("Identify Namespace: size of ",
                                                   format.size_blocks,
                                                   " blocks overflows a 64-bit byte count"));
  }
  format.lba_shift = lba_shift;
  format.lba_bytes = 1u << lba_shift;
  format.deallocated_reads_zeroes =
      (page[kNsDlfeat] & kDlfeatReadBehaviourMask) == kDlfeatReadsZeroes;
  return format;
}

absl::StatusOr<ControllerLimits> ParseIdentifyController(std::span<const uint8_t> page) {
  if (absl::Status size = CheckPageSize(page, "Identify Controller"); !size.ok()) return size;

  const uint32_t sqes_required = page[kCtrlSqes] & 0x0f;
  const uint32_t cqes_required = page[kCtrlCqes] & 0x0f;
  if (sqes_required != 6 || cqes_required != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("Identify Controller: required queue entry sizes are 2^", sqes_required, "/2^",
                     cqes_required,
                     " bytes, but every NVM controller requires 64/16 (SQES 6, CQES 4): the page "
                     "is not an Identify Controller data structure"));
  }

  ControllerLimits limits;
  const uint32_t mdts = page[kCtrlMdts];
  // Beyond 2^20 pages (4 GiB) the limit is larger than any single ublk request, so it is none.
  if (mdts != 0 && mdts < 20) limits.max_transfer_bytes = uint64_t{kAssumedMinPageBytes} << mdts;
  const uint16_t oncs = static_cast<uint16_t>(LoadLe(page, kCtrlOncs, 2));
  limits.write_zeroes = (oncs & kOncsWriteZeroes) != 0;
  limits.dataset_management = (oncs & kOncsDatasetManagement) != 0;
  limits.volatile_write_cache = (page[kCtrlVwc] & kVwcPresent) != 0;
  return limits;
}

}  // namespace blk::server::nvme
