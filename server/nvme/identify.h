// What a namespace is and what its controller can do, parsed from the 4096-byte Identify pages
// (NVM Express Base Specification, Identify Controller CNS 01h and Identify Namespace CNS 00h).
// Pure functions over bytes; issuing the Identify commands lives in nvme_admin.{h,cc}.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/statusor.h"

namespace blk::server::nvme {

// The active LBA format and size of one namespace.
struct NamespaceFormat {
  uint64_t size_blocks = 0;      // NSZE
  uint64_t capacity_blocks = 0;  // NCAP (less than NSZE on thin-provisioned namespaces)
  uint32_t lba_shift = 0;        // log2 of the LBA data size: 9 (512) .. 12 (4096)
  uint32_t lba_bytes = 0;
  bool deallocated_reads_zeroes = false;  // DLFEAT: a discarded block reads back as zeroes

  uint64_t size_bytes() const { return size_blocks << lba_shift; }
};

// The per-controller limits and optional commands that shape the I/O commands we build.
struct ControllerLimits {
  uint64_t max_transfer_bytes = 0;    // from MDTS; 0 = the controller states no limit
  bool write_zeroes = false;          // ONCS bit 3
  bool dataset_management = false;    // ONCS bit 2
  bool volatile_write_cache = false;  // VWC bit 0: Flush does something
};

// Everything a volume on one namespace needs to know, from both pages.
struct NamespaceProfile {
  uint32_t nsid = 0;
  NamespaceFormat format;
  ControllerLimits controller;
};

// Parses an Identify Namespace page. Refuses pages that are not 4096 bytes, inactive namespaces
// (NSZE 0), a current format index beyond NLBAF, LBA sizes other than 512..4096 bytes, and
// formats with metadata (the data path carries no metadata buffer).
absl::StatusOr<NamespaceFormat> ParseIdentifyNamespace(std::span<const uint8_t> page);

// Parses an Identify Controller page. Refuses pages that are not 4096 bytes and pages whose
// required queue entry sizes (SQES/CQES) are not the 64/16 bytes every NVMe controller reports,
// which is what an all-zero or truncated-then-padded buffer looks like.
absl::StatusOr<ControllerLimits> ParseIdentifyController(std::span<const uint8_t> page);

}  // namespace blk::server::nvme
