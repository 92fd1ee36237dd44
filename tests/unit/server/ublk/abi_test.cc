#include "server/ublk/abi.h"

#include <cerrno>
#include <cstddef>

#include "gtest/gtest.h"

#if __has_include(<linux/ublk_cmd.h>)
#include <linux/ublk_cmd.h>
#define BLK_HAVE_SYSTEM_UBLK_HEADER 1
#endif

namespace blk::server::abi {
namespace {

TEST(UblkAbi, StructLayoutsMatchTheKernelUapi) {
  EXPECT_EQ(sizeof(CtrlCmd), 32u);
  EXPECT_EQ(offsetof(CtrlCmd, addr), 8u);
  EXPECT_EQ(offsetof(CtrlCmd, data), 16u);
  EXPECT_EQ(offsetof(CtrlCmd, dev_path_len), 24u);
  EXPECT_EQ(sizeof(CtrlDevInfo), 64u);
  EXPECT_EQ(offsetof(CtrlDevInfo, max_io_buf_bytes), 8u);
  EXPECT_EQ(offsetof(CtrlDevInfo, ublksrv_pid), 16u);
  EXPECT_EQ(offsetof(CtrlDevInfo, flags), 24u);
  EXPECT_EQ(offsetof(CtrlDevInfo, owner_uid), 40u);
  EXPECT_EQ(sizeof(IoDesc), 24u);
  EXPECT_EQ(offsetof(IoDesc, start_sector), 8u);
  EXPECT_EQ(sizeof(IoCmd), 16u);
  EXPECT_EQ(offsetof(IoCmd, addr), 8u);
  EXPECT_EQ(offsetof(Params, discard), 40u);
  EXPECT_EQ(sizeof(Params), 152u);
}

TEST(UblkAbi, IoctlEncodedOpcodesHaveTheKernelValues) {
  // _IOR/_IOWR('u', nr, 32-byte ctrl cmd) and _IOWR('u', nr, 16-byte io cmd), spelled out.
  EXPECT_EQ(kUCmdGetFeatures, 0x80207513u);
  EXPECT_EQ(kUCmdGetQueueAffinity, 0x80207501u);
  EXPECT_EQ(kUCmdAddDev, 0xc0207504u);
  EXPECT_EQ(kUCmdDelDev, 0xc0207505u);
  EXPECT_EQ(kUCmdStartDev, 0xc0207506u);
  EXPECT_EQ(kUCmdStopDev, 0xc0207507u);
  EXPECT_EQ(kUCmdSetParams, 0xc0207508u);
  EXPECT_EQ(kUCmdTryStopDev, 0xc0207517u);
  EXPECT_EQ(kUIoFetchReq, 0xc0107520u);
  EXPECT_EQ(kUIoCommitAndFetchReq, 0xc0107521u);
  // _IOWR('u', 0x25..0x27, struct ublk_batch_io), 16 bytes, as in the 7.3 uapi.
  EXPECT_EQ(kUIoPrepIoCmds, 0xc0107525u);
  EXPECT_EQ(kUIoCommitIoCmds, 0xc0107526u);
  EXPECT_EQ(kUIoFetchIoCmds, 0xc0107527u);
}

TEST(UblkAbi, DescriptorAreaOfEachQueueStartsAtAFixedStride) {
  EXPECT_EQ(MaxDescAreaBytes(4096), 98304u);
  EXPECT_EQ(DescAreaOffset(0, 4096), 0u);
  EXPECT_EQ(DescAreaOffset(3, 4096), 3u * 98304u);
  EXPECT_EQ(DescAreaBytes(128, 4096), 4096u);
  EXPECT_EQ(DescAreaBytes(171, 4096), 8192u);
}

TEST(UblkAbi, FeatureBitsOfTheKernelsWeTestAreAllNamed) {
  // TESTING.md: 6.12 reports 0x1fe, 7.3 reports 0x1fffff.
  EXPECT_EQ(kFUringCmdCompInTask | kFNeedGetData | kFUserRecovery | kFUserRecoveryReissue |
                kFUnprivilegedDev | kFCmdIoctlEncode | kFUserCopy | kFZoned,
            0x1feu);
  EXPECT_EQ(kFIoDescSize, 1u << 20);
  EXPECT_EQ(kFSafeStopDev, 1u << 17);
  EXPECT_EQ(kFAutoBufReg, 1u << 11);
  EXPECT_EQ(kFBatchIo, 1u << 15);
}

TEST(UblkAbi, KnownFeaturesAreTheReleasedOnes) {
  // 7.3, the newest test kernel, sets every released bit; IO_DESC_SIZE is the highest.
  EXPECT_EQ(kFKnownFeatures, 0x1fffffu);
  EXPECT_EQ(kFIoDescSize & kFKnownFeatures, kFIoDescSize);
  EXPECT_EQ(kFKnownFeatures >> kKnownFeatureBits, 0u);
}

#ifdef BLK_HAVE_SYSTEM_UBLK_HEADER
TEST(UblkAbi, AgreesWithTheSystemHeader) {
  EXPECT_EQ(sizeof(CtrlCmd), sizeof(ublksrv_ctrl_cmd));
  EXPECT_EQ(offsetof(CtrlCmd, addr), offsetof(ublksrv_ctrl_cmd, addr));
  EXPECT_EQ(offsetof(CtrlCmd, data), offsetof(ublksrv_ctrl_cmd, data));
  EXPECT_EQ(offsetof(CtrlCmd, len), offsetof(ublksrv_ctrl_cmd, len));
  EXPECT_EQ(offsetof(CtrlCmd, queue_id), offsetof(ublksrv_ctrl_cmd, queue_id));
  EXPECT_EQ(sizeof(CtrlDevInfo), sizeof(ublksrv_ctrl_dev_info));
  EXPECT_EQ(offsetof(CtrlDevInfo, nr_hw_queues), offsetof(ublksrv_ctrl_dev_info, nr_hw_queues));
  EXPECT_EQ(offsetof(CtrlDevInfo, queue_depth), offsetof(ublksrv_ctrl_dev_info, queue_depth));
  EXPECT_EQ(offsetof(CtrlDevInfo, state), offsetof(ublksrv_ctrl_dev_info, state));
  EXPECT_EQ(offsetof(CtrlDevInfo, max_io_buf_bytes),
            offsetof(ublksrv_ctrl_dev_info, max_io_buf_bytes));
  EXPECT_EQ(offsetof(CtrlDevInfo, dev_id), offsetof(ublksrv_ctrl_dev_info, dev_id));
  EXPECT_EQ(offsetof(CtrlDevInfo, ublksrv_pid), offsetof(ublksrv_ctrl_dev_info, ublksrv_pid));
  EXPECT_EQ(offsetof(CtrlDevInfo, flags), offsetof(ublksrv_ctrl_dev_info, flags));
  EXPECT_EQ(offsetof(CtrlDevInfo, ublksrv_flags), offsetof(ublksrv_ctrl_dev_info, ublksrv_flags));
  EXPECT_EQ(sizeof(IoDesc), sizeof(ublksrv_io_desc));
  EXPECT_EQ(offsetof(IoDesc, op_flags), offsetof(ublksrv_io_desc, op_flags));
  EXPECT_EQ(offsetof(IoDesc, nr_sectors), offsetof(ublksrv_io_desc, nr_sectors));
  EXPECT_EQ(offsetof(IoDesc, start_sector), offsetof(ublksrv_io_desc, start_sector));
  EXPECT_EQ(offsetof(IoDesc, addr), offsetof(ublksrv_io_desc, addr));
  EXPECT_EQ(sizeof(IoCmd), sizeof(ublksrv_io_cmd));
  EXPECT_EQ(offsetof(IoCmd, tag), offsetof(ublksrv_io_cmd, tag));
  EXPECT_EQ(offsetof(IoCmd, result), offsetof(ublksrv_io_cmd, result));
  EXPECT_EQ(offsetof(IoCmd, addr), offsetof(ublksrv_io_cmd, addr));
  EXPECT_EQ(sizeof(ParamBasic), sizeof(ublk_param_basic));
  EXPECT_EQ(offsetof(ParamBasic, max_sectors), offsetof(ublk_param_basic, max_sectors));
  EXPECT_EQ(offsetof(ParamBasic, dev_sectors), offsetof(ublk_param_basic, dev_sectors));
  EXPECT_EQ(offsetof(ParamBasic, virt_boundary_mask),
            offsetof(ublk_param_basic, virt_boundary_mask));
  EXPECT_EQ(sizeof(ParamDiscard), sizeof(ublk_param_discard));
  EXPECT_EQ(offsetof(ParamDiscard, max_write_zeroes_sectors),
            offsetof(ublk_param_discard, max_write_zeroes_sectors));
  EXPECT_EQ(offsetof(ParamDiscard, max_discard_segments),
            offsetof(ublk_param_discard, max_discard_segments));
  EXPECT_EQ(offsetof(Params, types), offsetof(ublk_params, types));
  EXPECT_EQ(offsetof(Params, basic), offsetof(ublk_params, basic));
  EXPECT_EQ(offsetof(Params, discard), offsetof(ublk_params, discard));
  EXPECT_GE(sizeof(Params), sizeof(ublk_params));

  EXPECT_EQ(kCmdGetQueueAffinity, UBLK_CMD_GET_QUEUE_AFFINITY);
  EXPECT_EQ(kCmdGetDevInfo, UBLK_CMD_GET_DEV_INFO);
  EXPECT_EQ(kCmdAddDev, UBLK_CMD_ADD_DEV);
  EXPECT_EQ(kCmdDelDev, UBLK_CMD_DEL_DEV);
  EXPECT_EQ(kCmdStartDev, UBLK_CMD_START_DEV);
  EXPECT_EQ(kCmdStopDev, UBLK_CMD_STOP_DEV);
  EXPECT_EQ(kCmdSetParams, UBLK_CMD_SET_PARAMS);
  EXPECT_EQ(kCmdGetParams, UBLK_CMD_GET_PARAMS);
  EXPECT_EQ(kCmdStartUserRecovery, UBLK_CMD_START_USER_RECOVERY);
  EXPECT_EQ(kCmdEndUserRecovery, UBLK_CMD_END_USER_RECOVERY);
  EXPECT_EQ(kIoFetchReq, UBLK_IO_FETCH_REQ);
  EXPECT_EQ(kIoCommitAndFetchReq, UBLK_IO_COMMIT_AND_FETCH_REQ);
  EXPECT_EQ(kIoNeedGetData, UBLK_IO_NEED_GET_DATA);
  EXPECT_EQ(kIoResOk, UBLK_IO_RES_OK);
  EXPECT_EQ(kIoResNeedGetData, UBLK_IO_RES_NEED_GET_DATA);
  EXPECT_EQ(kIoResAbort, UBLK_IO_RES_ABORT);
  EXPECT_EQ(kCmdBufOffset, UBLKSRV_CMD_BUF_OFFSET);
  EXPECT_EQ(kIoBufOffset, UBLKSRV_IO_BUF_OFFSET);
  EXPECT_EQ(kMaxQueueDepth, UBLK_MAX_QUEUE_DEPTH);
  EXPECT_EQ(kFSupportZeroCopy, UBLK_F_SUPPORT_ZERO_COPY);
  EXPECT_EQ(kFUringCmdCompInTask, UBLK_F_URING_CMD_COMP_IN_TASK);
  EXPECT_EQ(kFNeedGetData, UBLK_F_NEED_GET_DATA);
  EXPECT_EQ(kFUserRecovery, UBLK_F_USER_RECOVERY);
  EXPECT_EQ(kFUserRecoveryReissue, UBLK_F_USER_RECOVERY_REISSUE);
  EXPECT_EQ(kDevStateDead, UBLK_S_DEV_DEAD);
  EXPECT_EQ(kDevStateLive, UBLK_S_DEV_LIVE);
  EXPECT_EQ(kDevStateQuiesced, UBLK_S_DEV_QUIESCED);
  EXPECT_EQ(kIoOpRead, UBLK_IO_OP_READ);
  EXPECT_EQ(kIoOpWrite, UBLK_IO_OP_WRITE);
  EXPECT_EQ(kIoOpFlush, UBLK_IO_OP_FLUSH);
  EXPECT_EQ(kIoOpDiscard, UBLK_IO_OP_DISCARD);
  EXPECT_EQ(kIoOpWriteSame, UBLK_IO_OP_WRITE_SAME);
  EXPECT_EQ(kIoOpWriteZeroes, UBLK_IO_OP_WRITE_ZEROES);
  EXPECT_EQ(kIoFFailfastDev, UBLK_IO_F_FAILFAST_DEV);
  EXPECT_EQ(kIoFFailfastTransport, UBLK_IO_F_FAILFAST_TRANSPORT);
  EXPECT_EQ(kIoFFailfastDriver, UBLK_IO_F_FAILFAST_DRIVER);
  EXPECT_EQ(kIoFMeta, UBLK_IO_F_META);
  EXPECT_EQ(kIoFFua, UBLK_IO_F_FUA);
  EXPECT_EQ(kIoFNoUnmap, UBLK_IO_F_NOUNMAP);
  EXPECT_EQ(kIoFSwap, UBLK_IO_F_SWAP);
  EXPECT_EQ(kAttrReadOnly, UBLK_ATTR_READ_ONLY);
  EXPECT_EQ(kAttrRotational, UBLK_ATTR_ROTATIONAL);
  EXPECT_EQ(kAttrVolatileCache, UBLK_ATTR_VOLATILE_CACHE);
  EXPECT_EQ(kAttrFua, UBLK_ATTR_FUA);
  EXPECT_EQ(kParamTypeBasic, UBLK_PARAM_TYPE_BASIC);
  EXPECT_EQ(kParamTypeDiscard, UBLK_PARAM_TYPE_DISCARD);
#ifdef UBLK_F_UNPRIVILEGED_DEV
  EXPECT_EQ(kFUnprivilegedDev, UBLK_F_UNPRIVILEGED_DEV);
#endif
#ifdef UBLK_F_CMD_IOCTL_ENCODE
  EXPECT_EQ(kFCmdIoctlEncode, UBLK_F_CMD_IOCTL_ENCODE);
#endif
#ifdef UBLK_F_USER_COPY
  EXPECT_EQ(kFUserCopy, UBLK_F_USER_COPY);
#endif
#ifdef UBLK_F_ZONED
  EXPECT_EQ(kFZoned, UBLK_F_ZONED);
#endif
#ifdef UBLK_F_USER_RECOVERY_FAIL_IO
  EXPECT_EQ(kFUserRecoveryFailIo, UBLK_F_USER_RECOVERY_FAIL_IO);
#endif
#ifdef UBLK_F_UPDATE_SIZE
  EXPECT_EQ(kFUpdateSize, UBLK_F_UPDATE_SIZE);
#endif
#ifdef UBLK_F_AUTO_BUF_REG
  EXPECT_EQ(kFAutoBufReg, UBLK_F_AUTO_BUF_REG);
#endif
#ifdef UBLK_F_QUIESCE
  EXPECT_EQ(kFQuiesce, UBLK_F_QUIESCE);
#endif
#ifdef UBLK_F_PER_IO_DAEMON
  EXPECT_EQ(kFPerIoDaemon, UBLK_F_PER_IO_DAEMON);
#endif
#ifdef UBLK_F_BUF_REG_OFF_DAEMON
  EXPECT_EQ(kFBufRegOffDaemon, UBLK_F_BUF_REG_OFF_DAEMON);
#endif
#ifdef UBLK_F_BATCH_IO
  EXPECT_EQ(kFBatchIo, UBLK_F_BATCH_IO);
#endif
#ifdef UBLK_F_INTEGRITY
  EXPECT_EQ(kFIntegrity, UBLK_F_INTEGRITY);
#endif
#ifdef UBLK_F_SAFE_STOP_DEV
  EXPECT_EQ(kFSafeStopDev, UBLK_F_SAFE_STOP_DEV);
#endif
#ifdef UBLK_F_NO_AUTO_PART_SCAN
  EXPECT_EQ(kFNoAutoPartScan, UBLK_F_NO_AUTO_PART_SCAN);
#endif
#ifdef UBLK_F_SHMEM_ZC
  EXPECT_EQ(kFShmemZc, UBLK_F_SHMEM_ZC);
#endif
#ifdef UBLK_F_IO_DESC_SIZE
  EXPECT_EQ(kFIoDescSize, UBLK_F_IO_DESC_SIZE);
#endif
#ifdef UBLK_S_DEV_FAIL_IO
  EXPECT_EQ(kDevStateFailIo, UBLK_S_DEV_FAIL_IO);
#endif
#ifdef UBLK_CMD_GET_DEV_INFO2
  EXPECT_EQ(kCmdGetDevInfo2, UBLK_CMD_GET_DEV_INFO2);
#endif
#ifdef UBLK_U_CMD_GET_FEATURES
  EXPECT_EQ(kUCmdGetQueueAffinity, UBLK_U_CMD_GET_QUEUE_AFFINITY);
  EXPECT_EQ(kUCmdGetDevInfo, UBLK_U_CMD_GET_DEV_INFO);
  EXPECT_EQ(kUCmdAddDev, UBLK_U_CMD_ADD_DEV);
  EXPECT_EQ(kUCmdDelDev, UBLK_U_CMD_DEL_DEV);
  EXPECT_EQ(kUCmdStartDev, UBLK_U_CMD_START_DEV);
  EXPECT_EQ(kUCmdStopDev, UBLK_U_CMD_STOP_DEV);
  EXPECT_EQ(kUCmdSetParams, UBLK_U_CMD_SET_PARAMS);
  EXPECT_EQ(kUCmdGetParams, UBLK_U_CMD_GET_PARAMS);
  EXPECT_EQ(kUCmdStartUserRecovery, UBLK_U_CMD_START_USER_RECOVERY);
  EXPECT_EQ(kUCmdEndUserRecovery, UBLK_U_CMD_END_USER_RECOVERY);
  EXPECT_EQ(kUCmdGetDevInfo2, UBLK_U_CMD_GET_DEV_INFO2);
  EXPECT_EQ(kUCmdGetFeatures, UBLK_U_CMD_GET_FEATURES);
#endif
#ifdef UBLK_U_CMD_DEL_DEV_ASYNC
  EXPECT_EQ(kUCmdDelDevAsync, UBLK_U_CMD_DEL_DEV_ASYNC);
#endif
#ifdef UBLK_U_CMD_UPDATE_SIZE
  EXPECT_EQ(kUCmdUpdateSize, UBLK_U_CMD_UPDATE_SIZE);
#endif
#ifdef UBLK_U_CMD_QUIESCE_DEV
  EXPECT_EQ(kUCmdQuiesceDev, UBLK_U_CMD_QUIESCE_DEV);
#endif
#ifdef UBLK_U_CMD_TRY_STOP_DEV
  EXPECT_EQ(kUCmdTryStopDev, UBLK_U_CMD_TRY_STOP_DEV);
#endif
#ifdef UBLK_U_IO_FETCH_REQ
  EXPECT_EQ(kUIoFetchReq, UBLK_U_IO_FETCH_REQ);
  EXPECT_EQ(kUIoCommitAndFetchReq, UBLK_U_IO_COMMIT_AND_FETCH_REQ);
  EXPECT_EQ(kUIoNeedGetData, UBLK_U_IO_NEED_GET_DATA);
#endif
#ifdef UBLK_U_IO_REGISTER_IO_BUF
  EXPECT_EQ(kUIoRegisterIoBuf, UBLK_U_IO_REGISTER_IO_BUF);
  EXPECT_EQ(kUIoUnregisterIoBuf, UBLK_U_IO_UNREGISTER_IO_BUF);
#endif
#ifdef UBLK_IO_OP_ZONE_OPEN
  EXPECT_EQ(kIoOpZoneOpen, UBLK_IO_OP_ZONE_OPEN);
  EXPECT_EQ(kIoOpZoneClose, UBLK_IO_OP_ZONE_CLOSE);
  EXPECT_EQ(kIoOpZoneFinish, UBLK_IO_OP_ZONE_FINISH);
  EXPECT_EQ(kIoOpZoneAppend, UBLK_IO_OP_ZONE_APPEND);
  EXPECT_EQ(kIoOpZoneResetAll, UBLK_IO_OP_ZONE_RESET_ALL);
  EXPECT_EQ(kIoOpZoneReset, UBLK_IO_OP_ZONE_RESET);
  EXPECT_EQ(kIoOpReportZones, UBLK_IO_OP_REPORT_ZONES);
#endif
#ifdef UBLK_PARAM_TYPE_DEVT
  EXPECT_EQ(kParamTypeDevt, UBLK_PARAM_TYPE_DEVT);
  EXPECT_EQ(offsetof(Params, devt), offsetof(ublk_params, devt));
#endif
#ifdef UBLK_PARAM_TYPE_ZONED
  EXPECT_EQ(kParamTypeZoned, UBLK_PARAM_TYPE_ZONED);
  EXPECT_EQ(offsetof(Params, zoned), offsetof(ublk_params, zoned));
#endif
#ifdef UBLK_PARAM_TYPE_DMA_ALIGN
  EXPECT_EQ(kParamTypeDmaAlign, UBLK_PARAM_TYPE_DMA_ALIGN);
  EXPECT_EQ(offsetof(Params, dma), offsetof(ublk_params, dma));
#endif
#ifdef UBLK_PARAM_TYPE_SEGMENT
  EXPECT_EQ(kParamTypeSegment, UBLK_PARAM_TYPE_SEGMENT);
  EXPECT_EQ(offsetof(Params, seg), offsetof(ublk_params, seg));
#endif
#ifdef UBLK_PARAM_TYPE_INTEGRITY
  EXPECT_EQ(kParamTypeIntegrity, UBLK_PARAM_TYPE_INTEGRITY);
  EXPECT_EQ(offsetof(Params, integrity), offsetof(ublk_params, integrity));
#endif
}
#endif

}  // namespace
}  // namespace blk::server::abi
