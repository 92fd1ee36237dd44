// The ublk kernel ABI (include/uapi/linux/ublk_cmd.h), written down for this project so the build
// does not depend on the age of the build machine's kernel headers. Layouts and values are the
// kernel's; tests/unit/server/ublk/abi_test.cc checks them against the system header.
#pragma once

#include <linux/ioctl.h>

#include <cstddef>
#include <cstdint>

namespace blk::server::abi {

// ---- Control commands (on /dev/ublk-control) ----
// Legacy opcodes: the only encoding kernels before 6.4 understand. Newer kernels accept them only
// with CONFIG_BLKDEV_UBLK_LEGACY_OPCODES.
// ublk counts capacity and request offsets in 512-byte sectors.
inline constexpr uint32_t kSectorShift = 9;

inline constexpr uint32_t kCmdGetQueueAffinity = 0x01;
inline constexpr uint32_t kCmdGetDevInfo = 0x02;
inline constexpr uint32_t kCmdAddDev = 0x04;
inline constexpr uint32_t kCmdDelDev = 0x05;
inline constexpr uint32_t kCmdStartDev = 0x06;
inline constexpr uint32_t kCmdStopDev = 0x07;
inline constexpr uint32_t kCmdSetParams = 0x08;
inline constexpr uint32_t kCmdGetParams = 0x09;
inline constexpr uint32_t kCmdStartUserRecovery = 0x10;
inline constexpr uint32_t kCmdEndUserRecovery = 0x11;
inline constexpr uint32_t kCmdGetDevInfo2 = 0x12;
// Numbers of the commands that exist only in the ioctl encoding.
inline constexpr uint32_t kCmdGetFeaturesNr = 0x13;
inline constexpr uint32_t kCmdDelDevAsyncNr = 0x14;
inline constexpr uint32_t kCmdUpdateSizeNr = 0x15;
inline constexpr uint32_t kCmdQuiesceDevNr = 0x16;
inline constexpr uint32_t kCmdTryStopDevNr = 0x17;

// ---- I/O commands (on /dev/ublkcN), legacy encoding ----
inline constexpr uint32_t kIoFetchReq = 0x20;
inline constexpr uint32_t kIoCommitAndFetchReq = 0x21;
inline constexpr uint32_t kIoNeedGetData = 0x22;
inline constexpr uint32_t kIoRegisterIoBufNr = 0x23;
inline constexpr uint32_t kIoUnregisterIoBufNr = 0x24;
// UBLK_F_BATCH_IO's per-queue commands (ioctl encoding only, with struct BatchIo).
inline constexpr uint32_t kIoPrepIoCmdsNr = 0x25;
inline constexpr uint32_t kIoCommitIoCmdsNr = 0x26;
inline constexpr uint32_t kIoFetchIoCmdsNr = 0x27;

// Results of FETCH / COMMIT_AND_FETCH completions. Only ABORT means "no re-fetch".
inline constexpr int32_t kIoResOk = 0;
inline constexpr int32_t kIoResNeedGetData = 1;
inline constexpr int32_t kIoResAbort = -19;  // -ENODEV

// mmap offsets on /dev/ublkcN.
inline constexpr uint64_t kCmdBufOffset = 0;
inline constexpr uint64_t kIoBufOffset = 0x80000000;

inline constexpr uint32_t kMaxQueueDepth = 4096;
inline constexpr uint32_t kMaxQueues = 4096;

// ---- Feature flags (ublksrv_ctrl_dev_info.flags, GET_FEATURES) ----
inline constexpr uint64_t kFSupportZeroCopy = 1ULL << 0;
inline constexpr uint64_t kFUringCmdCompInTask = 1ULL << 1;
inline constexpr uint64_t kFNeedGetData = 1ULL << 2;
inline constexpr uint64_t kFUserRecovery = 1ULL << 3;
inline constexpr uint64_t kFUserRecoveryReissue = 1ULL << 4;
inline constexpr uint64_t kFUnprivilegedDev = 1ULL << 5;
inline constexpr uint64_t kFCmdIoctlEncode = 1ULL << 6;
inline constexpr uint64_t kFUserCopy = 1ULL << 7;
inline constexpr uint64_t kFZoned = 1ULL << 8;
inline constexpr uint64_t kFUserRecoveryFailIo = 1ULL << 9;
inline constexpr uint64_t kFUpdateSize = 1ULL << 10;
inline constexpr uint64_t kFAutoBufReg = 1ULL << 11;
inline constexpr uint64_t kFQuiesce = 1ULL << 12;
inline constexpr uint64_t kFPerIoDaemon = 1ULL << 13;
inline constexpr uint64_t kFBufRegOffDaemon = 1ULL << 14;
inline constexpr uint64_t kFBatchIo = 1ULL << 15;
inline constexpr uint64_t kFIntegrity = 1ULL << 16;
inline constexpr uint64_t kFSafeStopDev = 1ULL << 17;
inline constexpr uint64_t kFNoAutoPartScan = 1ULL << 18;
inline constexpr uint64_t kFShmemZc = 1ULL << 19;
inline constexpr uint64_t kFIoDescSize = 1ULL << 20;
// The flags of released kernels (bits 0..20, IO_DESC_SIZE in 7.3 the newest). Anything above is
// a bit this build cannot name; the agent asks for such a bit only when an operator names it
// (blkagent --rq-affinity-feature-bit).
inline constexpr unsigned kKnownFeatureBits = 21;
inline constexpr uint64_t kFKnownFeatures = (1ULL << kKnownFeatureBits) - 1;

// ---- Device states ----
inline constexpr uint16_t kDevStateDead = 0;
inline constexpr uint16_t kDevStateLive = 1;
inline constexpr uint16_t kDevStateQuiesced = 2;
inline constexpr uint16_t kDevStateFailIo = 3;

// ---- I/O ops (low 8 bits of ublksrv_io_desc.op_flags) and flags ----
inline constexpr uint8_t kIoOpRead = 0;
inline constexpr uint8_t kIoOpWrite = 1;
inline constexpr uint8_t kIoOpFlush = 2;
inline constexpr uint8_t kIoOpDiscard = 3;
inline constexpr uint8_t kIoOpWriteSame = 4;
inline constexpr uint8_t kIoOpWriteZeroes = 5;
inline constexpr uint8_t kIoOpZoneOpen = 10;
inline constexpr uint8_t kIoOpZoneClose = 11;
inline constexpr uint8_t kIoOpZoneFinish = 12;
inline constexpr uint8_t kIoOpZoneAppend = 13;
inline constexpr uint8_t kIoOpZoneResetAll = 14;
inline constexpr uint8_t kIoOpZoneReset = 15;
inline constexpr uint8_t kIoOpReportZones = 18;

// These are positions in op_flags (bits 8..31), as the kernel defines them.
inline constexpr uint32_t kIoFFailfastDev = 1U << 8;
inline constexpr uint32_t kIoFFailfastTransport = 1U << 9;
inline constexpr uint32_t kIoFFailfastDriver = 1U << 10;
inline constexpr uint32_t kIoFMeta = 1U << 11;
inline constexpr uint32_t kIoFFua = 1U << 13;
inline constexpr uint32_t kIoFNoUnmap = 1U << 15;
inline constexpr uint32_t kIoFSwap = 1U << 16;
inline constexpr uint32_t kIoFNeedRegBuf = 1U << 17;
inline constexpr uint32_t kIoFIntegrity = 1U << 18;
inline constexpr uint32_t kIoFShmemZc = 1U << 19;

// UBLK_F_AUTO_BUF_REG: FETCH_REQ and COMMIT_AND_FETCH_REQ carry struct ublk_auto_buf_reg in the
// SQE's addr field (the command's own addr stays 0): bits 0-15 the index in the ring's buffer
// table where the kernel registers the next request's pages, bits 16-23 flags, the rest reserved
// (zero). The ring needs a (sparse) buffer table; the commit unregisters the buffer.
inline constexpr uint8_t kAutoBufRegFallback = 1U << 0;
inline constexpr uint64_t AutoBufRegSqeAddr(uint16_t index, uint8_t flags = 0) {
  return uint64_t{index} | (uint64_t{flags} << 16);
}

// UBLK_F_BATCH_IO: PREP_IO_CMDS and COMMIT_IO_CMDS carry, at the SQE's addr, nr_elem elements of
// elem_bytes each: ElemHeader, then buf_addr (with kBatchFHasBufAddr: copy mode, where the kernel
// copies between the request and our buffer), then zone_lba (kBatchFHasZoneLba). The kernel checks
// that elem_bytes matches the flags exactly. FETCH_IO_CMDS (multishot) writes u16 tags into a
// buffer of the provided buffer ring whose group is the SQE's buf_group.
inline constexpr uint16_t kBatchFHasZoneLba = 1U << 0;
inline constexpr uint16_t kBatchFHasBufAddr = 1U << 1;
inline constexpr uint16_t kBatchFAutoBufRegFallback = 1U << 2;

// ---- Parameters ----
inline constexpr uint32_t kAttrReadOnly = 1U << 0;
inline constexpr uint32_t kAttrRotational = 1U << 1;
inline constexpr uint32_t kAttrVolatileCache = 1U << 2;
inline constexpr uint32_t kAttrFua = 1U << 3;

inline constexpr uint32_t kParamTypeBasic = 1U << 0;
inline constexpr uint32_t kParamTypeDiscard = 1U << 1;
inline constexpr uint32_t kParamTypeDevt = 1U << 2;
inline constexpr uint32_t kParamTypeZoned = 1U << 3;
inline constexpr uint32_t kParamTypeDmaAlign = 1U << 4;
inline constexpr uint32_t kParamTypeSegment = 1U << 5;
inline constexpr uint32_t kParamTypeIntegrity = 1U << 6;

// ---- Structures ----

// Carried in the 80-byte command area of a 128-byte SQE.
struct CtrlCmd {
  uint32_t dev_id;
  uint16_t queue_id;  // 0xffff when the command is not for a queue
  uint16_t len;       // length of the buffer at addr
  uint64_t addr;
  uint64_t data[1];
  // Kernels before 6.5 declared data[2]; the second word is now these fields.
  uint16_t dev_path_len;
  uint16_t pad;
  uint32_t reserved;
};

struct CtrlDevInfo {
  uint16_t nr_hw_queues;
  uint16_t queue_depth;
  uint16_t state;
  uint16_t io_desc_size;  // pad0 before UBLK_F_IO_DESC_SIZE (7.3)
  uint32_t max_io_buf_bytes;
  uint32_t dev_id;
  int32_t ublksrv_pid;
  uint32_t pad1;
  uint64_t flags;
  uint64_t ublksrv_flags;  // server-private, the kernel ignores it
  uint32_t owner_uid;
  uint32_t owner_gid;
  uint64_t reserved1;
  uint64_t reserved2;
};

// One per tag, in the read-only mapping of /dev/ublkcN.
struct IoDesc {
  uint32_t op_flags;    // op: bits 0-7, flags: bits 8-31
  uint32_t nr_sectors;  // nr_zones for REPORT_ZONES
  uint64_t start_sector;
  uint64_t addr;
};

// Carried in the 16-byte command area of a 64-byte SQE.
struct IoCmd {
  uint16_t q_id;
  uint16_t tag;
  int32_t result;
  uint64_t addr;  // zone_append_lba for zone append commits
};

// UBLK_F_BATCH_IO's command, in the 16-byte command area of a 64-byte SQE (struct ublk_batch_io).
struct BatchIo {
  uint16_t q_id;
  uint16_t flags;  // kBatchF*
  uint16_t nr_elem;
  uint8_t elem_bytes;
  uint8_t reserved;
  uint64_t reserved2;
};

// The mandatory head of every PREP/COMMIT element (struct ublk_elem_header).
struct ElemHeader {
  uint16_t tag;
  uint16_t buf_index;  // AUTO_BUF_REG: where the kernel registers the tag's next request's pages
  int32_t result;      // COMMIT only
};

struct ParamBasic {
  uint32_t attrs;
  uint8_t logical_bs_shift;
  uint8_t physical_bs_shift;
  uint8_t io_opt_shift;
  uint8_t io_min_shift;
  uint32_t max_sectors;
  uint32_t chunk_sectors;
  uint64_t dev_sectors;
  uint64_t virt_boundary_mask;
};

struct ParamDiscard {
  uint32_t discard_alignment;
  uint32_t discard_granularity;
  uint32_t max_discard_sectors;
  uint32_t max_write_zeroes_sectors;
  uint16_t max_discard_segments;
  uint16_t reserved0;
};

// Read only: filled by GET_PARAMS once the device is started.
struct ParamDevt {
  uint32_t char_major;
  uint32_t char_minor;
  uint32_t disk_major;
  uint32_t disk_minor;
};

struct ParamZoned {
  uint32_t max_open_zones;
  uint32_t max_active_zones;
  uint32_t max_zone_append_sectors;
  uint8_t reserved[20];
};

struct ParamDmaAlign {
  uint32_t alignment;
  uint8_t pad[4];
};

struct ParamSegment {
  uint64_t seg_boundary_mask;
  uint32_t max_segment_size;
  uint16_t max_segments;
  uint8_t pad[2];
};

struct ParamIntegrity {
  uint32_t flags;
  uint16_t max_integrity_segments;
  uint8_t interval_exp;
  uint8_t metadata_size;
  uint8_t pi_offset;
  uint8_t csum_type;
  uint8_t tag_size;
  uint8_t pad[5];
};

// The kernel reads min(len, its own sizeof) bytes, so the newest layout works on older kernels as
// long as `types` names only parts they know.
struct Params {
  uint32_t len;
  uint32_t types;
  ParamBasic basic;
  ParamDiscard discard;
  ParamDevt devt;
  ParamZoned zoned;
  ParamDmaAlign dma;
  ParamSegment seg;
  ParamIntegrity integrity;
};

static_assert(sizeof(CtrlCmd) == 32);
static_assert(sizeof(CtrlDevInfo) == 64);
static_assert(sizeof(IoDesc) == 24);
static_assert(sizeof(IoCmd) == 16);
static_assert(sizeof(BatchIo) == 16);
static_assert(sizeof(ElemHeader) == 8);
static_assert(sizeof(ParamBasic) == 32);
static_assert(sizeof(ParamDiscard) == 20);
static_assert(sizeof(ParamDevt) == 16);
static_assert(sizeof(ParamZoned) == 32);
static_assert(sizeof(ParamDmaAlign) == 8);
static_assert(sizeof(ParamSegment) == 16);
static_assert(sizeof(ParamIntegrity) == 16);
static_assert(offsetof(Params, basic) == 8);
static_assert(offsetof(Params, discard) == 40);
static_assert(offsetof(Params, devt) == 60);
static_assert(offsetof(Params, zoned) == 76);
static_assert(offsetof(Params, dma) == 108);
static_assert(offsetof(Params, seg) == 120);
static_assert(offsetof(Params, integrity) == 136);
static_assert(sizeof(Params) == 152);

// ---- Opcode encodings ----
inline constexpr uint32_t CtrlIoctlRead(uint32_t nr) { return _IOR('u', nr, CtrlCmd); }
inline constexpr uint32_t CtrlIoctlReadWrite(uint32_t nr) { return _IOWR('u', nr, CtrlCmd); }
inline constexpr uint32_t IoIoctl(uint32_t nr) { return _IOWR('u', nr, IoCmd); }
inline constexpr uint32_t BatchIoctl(uint32_t nr) { return _IOWR('u', nr, BatchIo); }

inline constexpr uint32_t kUCmdGetQueueAffinity = CtrlIoctlRead(kCmdGetQueueAffinity);
inline constexpr uint32_t kUCmdGetDevInfo = CtrlIoctlRead(kCmdGetDevInfo);
inline constexpr uint32_t kUCmdAddDev = CtrlIoctlReadWrite(kCmdAddDev);
inline constexpr uint32_t kUCmdDelDev = CtrlIoctlReadWrite(kCmdDelDev);
inline constexpr uint32_t kUCmdStartDev = CtrlIoctlReadWrite(kCmdStartDev);
inline constexpr uint32_t kUCmdStopDev = CtrlIoctlReadWrite(kCmdStopDev);
inline constexpr uint32_t kUCmdSetParams = CtrlIoctlReadWrite(kCmdSetParams);
inline constexpr uint32_t kUCmdGetParams = CtrlIoctlRead(kCmdGetParams);
inline constexpr uint32_t kUCmdStartUserRecovery = CtrlIoctlReadWrite(kCmdStartUserRecovery);
inline constexpr uint32_t kUCmdEndUserRecovery = CtrlIoctlReadWrite(kCmdEndUserRecovery);
inline constexpr uint32_t kUCmdGetDevInfo2 = CtrlIoctlRead(kCmdGetDevInfo2);
inline constexpr uint32_t kUCmdGetFeatures = CtrlIoctlRead(kCmdGetFeaturesNr);
inline constexpr uint32_t kUCmdDelDevAsync = CtrlIoctlRead(kCmdDelDevAsyncNr);
inline constexpr uint32_t kUCmdUpdateSize = CtrlIoctlReadWrite(kCmdUpdateSizeNr);
inline constexpr uint32_t kUCmdQuiesceDev = CtrlIoctlReadWrite(kCmdQuiesceDevNr);
inline constexpr uint32_t kUCmdTryStopDev = CtrlIoctlReadWrite(kCmdTryStopDevNr);

inline constexpr uint32_t kUIoFetchReq = IoIoctl(kIoFetchReq);
inline constexpr uint32_t kUIoCommitAndFetchReq = IoIoctl(kIoCommitAndFetchReq);
inline constexpr uint32_t kUIoNeedGetData = IoIoctl(kIoNeedGetData);
inline constexpr uint32_t kUIoRegisterIoBuf = IoIoctl(kIoRegisterIoBufNr);
inline constexpr uint32_t kUIoUnregisterIoBuf = IoIoctl(kIoUnregisterIoBufNr);
inline constexpr uint32_t kUIoPrepIoCmds = BatchIoctl(kIoPrepIoCmdsNr);
inline constexpr uint32_t kUIoCommitIoCmds = BatchIoctl(kIoCommitIoCmdsNr);
inline constexpr uint32_t kUIoFetchIoCmds = BatchIoctl(kIoFetchIoCmdsNr);

// ---- Descriptor area ----
// Every queue's descriptors start at a fixed stride sized for the maximum depth; the kernel
// derives the queue from the mmap offset and insists on the exact per-queue length.
inline constexpr uint64_t RoundUp(uint64_t value, uint64_t to) {
  return (value + to - 1) / to * to;
}
inline constexpr uint64_t MaxDescAreaBytes(uint64_t page_size) {
  return RoundUp(uint64_t{kMaxQueueDepth} * sizeof(IoDesc), page_size);
}
inline constexpr uint64_t DescAreaOffset(uint16_t queue, uint64_t page_size) {
  return kCmdBufOffset + queue * MaxDescAreaBytes(page_size);
}
inline constexpr uint64_t DescAreaBytes(uint16_t depth, uint64_t page_size) {
  return RoundUp(uint64_t{depth} * sizeof(IoDesc), page_size);
}

inline uint8_t OpOf(const IoDesc& desc) { return desc.op_flags & 0xff; }
// Flags keep their kernel bit positions (compare with kIoF*).
inline uint32_t FlagsOf(const IoDesc& desc) { return desc.op_flags & ~0xffU; }

}  // namespace blk::server::abi
