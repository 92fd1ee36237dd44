// The NVMe facts this project relies on: the kernel's passthrough uapi
// (include/uapi/linux/nvme_ioctl.h), written down so the build does not depend on the build
// machine's kernel headers, and the NVM Express Base / NVM Command Set constants and Identify
// data offsets. tests/unit/server/nvme/abi_test.cc checks the layouts against the system header.
#pragma once

#include <linux/ioctl.h>

#include <cstddef>
#include <cstdint>

namespace blk::server::nvme {

// ---- Kernel passthrough uapi ----

// The 64-byte NVMe submission entry as the kernel takes it for ioctl admin/IO passthrough;
// `result` returns CQE dword 0.
struct PassthruCmd {
  uint8_t opcode;
  uint8_t flags;
  uint16_t rsvd1;
  uint32_t nsid;
  uint32_t cdw2;
  uint32_t cdw3;
  uint64_t metadata;
  uint64_t addr;
  uint32_t metadata_len;
  uint32_t data_len;
  uint32_t cdw10;
  uint32_t cdw11;
  uint32_t cdw12;
  uint32_t cdw13;
  uint32_t cdw14;
  uint32_t cdw15;
  uint32_t timeout_ms;
  uint32_t result;
};
static_assert(sizeof(PassthruCmd) == 72);

// The io_uring URING_CMD payload (sqe->cmd, so the ring needs IORING_SETUP_SQE128). With
// IORING_SETUP_CQE32, big_cqe[0] carries CQE dword 0; cqe->res is -errno for a failure in the
// kernel or the positive NVMe status (see StatusField below) for a device error.
struct UringCmd {
  uint8_t opcode;
  uint8_t flags;
  uint16_t rsvd1;
  uint32_t nsid;
  uint32_t cdw2;
  uint32_t cdw3;
  uint64_t metadata;
  uint64_t addr;
  uint32_t metadata_len;
  uint32_t data_len;
  uint32_t cdw10;
  uint32_t cdw11;
  uint32_t cdw12;
  uint32_t cdw13;
  uint32_t cdw14;
  uint32_t cdw15;
  uint32_t timeout_ms;
  uint32_t rsvd2;
};
static_assert(sizeof(UringCmd) == 72);
// An SQE128 entry has 80 bytes of command space: the payload must fit.
static_assert(sizeof(UringCmd) <= 80);

inline constexpr uint32_t kIoctlId = _IO('N', 0x40);  // returns the namespace id of the fd
inline constexpr uint32_t kIoctlAdminCmd = _IOWR('N', 0x41, PassthruCmd);
inline constexpr uint32_t kIoctlIoCmd = _IOWR('N', 0x43, PassthruCmd);
// sqe->cmd_op values for IORING_OP_URING_CMD on /dev/ngXnY.
inline constexpr uint32_t kUringCmdIo = _IOWR('N', 0x80, UringCmd);
inline constexpr uint32_t kUringCmdIoVec = _IOWR('N', 0x81, UringCmd);
inline constexpr uint32_t kUringCmdAdmin = _IOWR('N', 0x82, UringCmd);
inline constexpr uint32_t kUringCmdAdminVec = _IOWR('N', 0x83, UringCmd);

// ---- NVM command set opcodes ----
inline constexpr uint8_t kOpFlush = 0x00;
inline constexpr uint8_t kOpWrite = 0x01;
inline constexpr uint8_t kOpRead = 0x02;
inline constexpr uint8_t kOpWriteZeroes = 0x08;
inline constexpr uint8_t kOpDatasetManagement = 0x09;

// ---- Admin opcodes ----
inline constexpr uint8_t kAdminIdentify = 0x06;
inline constexpr uint32_t kCnsNamespace = 0x00;   // Identify Namespace (NVM command set)
inline constexpr uint32_t kCnsController = 0x01;  // Identify Controller
inline constexpr size_t kIdentifyBytes = 4096;

// ---- Read / Write / Write Zeroes command dwords ----
// CDW10/11: starting LBA, low and high 32 bits. CDW12 bits 15:0: number of logical blocks,
// 0-based, so one command moves at most 65536 blocks.
inline constexpr uint32_t kMaxBlocksPerCommand = 1u << 16;
inline constexpr uint32_t kCdw12Fua = 1u << 30;
inline constexpr uint32_t kCdw12LimitedRetry = 1u << 31;
inline constexpr uint32_t kCdw12Deallocate = 1u << 25;  // Write Zeroes only (DEAC)

// ---- Dataset Management ----
// CDW10 bits 7:0: number of ranges, 0-based. CDW11 attributes.
inline constexpr uint32_t kDsmAttrIntegralRead = 1u << 0;
inline constexpr uint32_t kDsmAttrIntegralWrite = 1u << 1;
inline constexpr uint32_t kDsmAttrDeallocate = 1u << 2;
inline constexpr uint32_t kDsmMaxRanges = 256;

// One 16-byte range of the Dataset Management data buffer; fields are little-endian.
struct DsmRange {
  uint32_t context_attributes;
  uint32_t length_blocks;  // 1-based, unlike NLB in the I/O commands
  uint64_t starting_lba;
};
static_assert(sizeof(DsmRange) == 16);

// ---- Identify Namespace (CNS 0) byte offsets ----
inline constexpr size_t kNsNsze = 0;     // u64: namespace size in logical blocks
inline constexpr size_t kNsNcap = 8;     // u64: namespace capacity
inline constexpr size_t kNsNuse = 16;    // u64: namespace utilization
inline constexpr size_t kNsNlbaf = 25;   // u8: number of LBA formats, 0-based
inline constexpr size_t kNsFlbas = 26;   // u8: formatted LBA size
inline constexpr size_t kNsDlfeat = 33;  // u8: deallocate logical block features
inline constexpr size_t kNsLbaf0 = 128;  // u32[64]: LBA format descriptors
inline constexpr size_t kNsLbafCount = 64;
// FLBAS: bits 3:0 index low bits, bit 4 extended-LBA metadata, bits 6:5 index high bits
// (used only when NLBAF > 16).
inline constexpr uint8_t kFlbasIndexLowMask = 0x0f;
inline constexpr uint8_t kFlbasExtendedMetadata = 1u << 4;
inline constexpr uint8_t kFlbasIndexHighMask = 0x60;
// LBA format descriptor: bits 15:0 MS (metadata bytes per block), bits 23:16 LBADS (log2 of the
// data size), bits 25:24 RP (relative performance).
inline constexpr uint32_t kLbafMsMask = 0xffff;
inline constexpr uint32_t kLbafLbadsShift = 16;
inline constexpr uint32_t kLbafLbadsMask = 0xff;
// DLFEAT bits 2:0 = 001b: a deallocated block reads as zeroes.
inline constexpr uint8_t kDlfeatReadBehaviourMask = 0x07;
inline constexpr uint8_t kDlfeatReadsZeroes = 0x01;

// ---- Identify Controller (CNS 1) byte offsets ----
inline constexpr size_t kCtrlVid = 0;     // u16: PCI vendor id
inline constexpr size_t kCtrlMn = 24;     // char[40]: model number
inline constexpr size_t kCtrlMdts = 77;   // u8: max data transfer, log2 in units of CAP.MPSMIN
inline constexpr size_t kCtrlSqes = 512;  // u8: bits 3:0 required SQ entry size (log2)
inline constexpr size_t kCtrlCqes = 513;  // u8: bits 3:0 required CQ entry size (log2)
inline constexpr size_t kCtrlNn = 516;    // u32: number of namespaces
inline constexpr size_t kCtrlOncs = 520;  // u16: optional NVM command support
inline constexpr size_t kCtrlVwc = 525;   // u8: bit 0 volatile write cache present
inline constexpr uint16_t kOncsCompare = 1u << 0;
inline constexpr uint16_t kOncsWriteUncorrectable = 1u << 1;
inline constexpr uint16_t kOncsDatasetManagement = 1u << 2;
inline constexpr uint16_t kOncsWriteZeroes = 1u << 3;
inline constexpr uint8_t kVwcPresent = 1u << 0;
// CAP.MPSMIN is a controller register, not reachable through the generic char device; every
// controller supports 4 KiB pages and Linux runs them at 4 KiB, so MDTS is read in 4 KiB units.
inline constexpr uint32_t kAssumedMinPageBytes = 4096;

// ---- Completion status ----
// The kernel reports the CQE status field shifted right by one (the phase bit dropped):
// bits 7:0 SC, bits 10:8 SCT, bits 12:11 CRD, bit 13 More, bit 14 DNR.
inline constexpr uint32_t kStatusScMask = 0xff;
inline constexpr uint32_t kStatusSctShift = 8;
inline constexpr uint32_t kStatusSctMask = 0x7;
inline constexpr uint32_t kStatusDnr = 1u << 14;

inline constexpr uint8_t kSctGeneric = 0x0;
inline constexpr uint8_t kSctCommandSpecific = 0x1;
inline constexpr uint8_t kSctMediaError = 0x2;
inline constexpr uint8_t kSctPathRelated = 0x3;
inline constexpr uint8_t kSctVendorSpecific = 0x7;

// Generic command status (SCT 0).
inline constexpr uint8_t kScSuccess = 0x00;
inline constexpr uint8_t kScInvalidOpcode = 0x01;
inline constexpr uint8_t kScInvalidField = 0x02;
inline constexpr uint8_t kScDataTransferError = 0x04;
inline constexpr uint8_t kScPowerLoss = 0x05;
inline constexpr uint8_t kScInternalError = 0x06;
inline constexpr uint8_t kScAbortRequested = 0x07;
inline constexpr uint8_t kScInvalidNamespace = 0x0b;
inline constexpr uint8_t kScLbaOutOfRange = 0x80;
inline constexpr uint8_t kScCapacityExceeded = 0x81;
inline constexpr uint8_t kScNamespaceNotReady = 0x82;
// Command specific status (SCT 1), NVM command set.
inline constexpr uint8_t kScConflictingAttributes = 0x80;
inline constexpr uint8_t kScInvalidProtectionInfo = 0x81;
inline constexpr uint8_t kScWriteToReadOnlyRange = 0x82;
// Media and data integrity errors (SCT 2).
inline constexpr uint8_t kScWriteFault = 0x80;
inline constexpr uint8_t kScUnrecoveredReadError = 0x81;
inline constexpr uint8_t kScGuardCheckError = 0x82;
inline constexpr uint8_t kScAppTagCheckError = 0x83;
inline constexpr uint8_t kScRefTagCheckError = 0x84;
inline constexpr uint8_t kScAccessDenied = 0x86;
inline constexpr uint8_t kScDeallocatedOrUnwrittenBlock = 0x87;

}  // namespace blk::server::nvme
