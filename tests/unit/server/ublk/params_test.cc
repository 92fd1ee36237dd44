#include "server/ublk/params.h"

#include "gtest/gtest.h"

namespace blk::server {
namespace {

DeviceConfig TypicalConfig() {
  DeviceConfig config;
  config.size_bytes = 1ULL << 30;
  config.logical_block_size = 512;
  config.queues = 2;
  config.queue_depth = 64;
  config.max_io_bytes = 512 * 1024;
  return config;
}

TEST(ChooseDeviceFlags, AsksForIoctlEncodingWhenTheKernelOffersIt) {
  EXPECT_EQ(ChooseDeviceFlags(abi::kFCmdIoctlEncode | abi::kFZoned, TypicalConfig()),
            abi::kFCmdIoctlEncode);
  EXPECT_NE(ChooseDeviceFlags(0x1fffff, TypicalConfig()) & abi::kFCmdIoctlEncode, 0u);
}

TEST(ChooseDeviceFlags, AsksForRecoveryWithReissueWhenOffered) {
  const uint64_t offered = 0x1fffff;  // a 7.x kernel
  EXPECT_EQ(
      ChooseDeviceFlags(offered, TypicalConfig()),
      abi::kFCmdIoctlEncode | abi::kFUserRecovery | abi::kFUserRecoveryReissue | abi::kFBatchIo);
}

TEST(ChooseDeviceFlags, AsksForPlainRecoveryWhenReissueIsNotOffered) {
  EXPECT_EQ(ChooseDeviceFlags(abi::kFUserRecovery, TypicalConfig()), abi::kFUserRecovery);
}

TEST(ChooseDeviceFlags, FailFastAsksForFailIoInsteadOfReissue) {
  DeviceConfig config = TypicalConfig();
  config.fail_fast = true;
  EXPECT_EQ(ChooseDeviceFlags(0x1fffff, config), abi::kFCmdIoctlEncode | abi::kFUserRecovery |
                                                     abi::kFUserRecoveryFailIo | abi::kFBatchIo);
}

TEST(ChooseDeviceFlags, FailFastWithoutFailIoAsksForNoRecoverySoIoFailsWhenTheServerDies) {
  DeviceConfig config = TypicalConfig();
  config.fail_fast = true;
  const uint64_t offered = abi::kFUserRecovery | abi::kFUserRecoveryReissue;
  EXPECT_EQ(ChooseDeviceFlags(offered, config), 0u);
}

TEST(ChooseDeviceFlags, AsksForNothingOnKernelsWithoutGetFeatures) {
  EXPECT_EQ(ChooseDeviceFlags(0, TypicalConfig()), 0u);
}

TEST(ChooseDeviceFlags, NeverAsksForWhatTheKernelDoesNotOffer) {
  const uint64_t offered = abi::kFUserRecovery | abi::kFZoned;
  EXPECT_EQ(ChooseDeviceFlags(offered, TypicalConfig()) & ~offered, 0u);
}

constexpr uint64_t kEveryBit = ~uint64_t{0};

TEST(ChooseDeviceFlags, AsksForNoUnknownBitWithoutTheRqAffinityOption) {
  // A kernel that advertises every bit, 21 and up included: none of those is asked for.
  EXPECT_EQ(ChooseDeviceFlags(kEveryBit, TypicalConfig()) & ~abi::kFKnownFeatures, 0u);
  DeviceConfig fail_fast = TypicalConfig();
  fail_fast.fail_fast = true;
  EXPECT_EQ(ChooseDeviceFlags(kEveryBit, fail_fast) & ~abi::kFKnownFeatures, 0u);
}

TEST(ChooseDeviceFlags, AsksForExactlyTheNamedRqAffinityBitWhenAdvertised) {
  for (int bit : {21, 22, 40, 63}) {
    DeviceConfig config = TypicalConfig();
    config.rq_affinity_flag = *RqAffinityFeatureFlag(bit);
    EXPECT_EQ(ChooseDeviceFlags(kEveryBit, config) & ~abi::kFKnownFeatures, uint64_t{1} << bit)
        << "bit " << bit;
    // Not advertised: not asked for, even with every other bit offered.
    EXPECT_EQ(
        ChooseDeviceFlags(kEveryBit & ~config.rq_affinity_flag, config) & ~abi::kFKnownFeatures, 0u)
        << "bit " << bit;
    // The rest of the choice does not change.
    EXPECT_EQ(ChooseDeviceFlags(0x1fffff | config.rq_affinity_flag, config),
              ChooseDeviceFlags(0x1fffff, TypicalConfig()) | config.rq_affinity_flag);
  }
}

TEST(ChooseDeviceFlags, AsksForNoRqAffinityBitOnTheTestKernels) {
  DeviceConfig config = TypicalConfig();
  config.rq_affinity_flag = *RqAffinityFeatureFlag(21);
  for (uint64_t offered : {uint64_t{0x1fe}, uint64_t{0x1fffff}, uint64_t{0}}) {  // 6.12, 7.3, <6.5
    EXPECT_EQ(ChooseDeviceFlags(offered, config) & ~abi::kFKnownFeatures, 0u)
        << "offered 0x" << std::hex << offered;
  }
}

TEST(RqAffinityFeatureFlag, TakesAFreeBit) {
  EXPECT_EQ(*RqAffinityFeatureFlag(21), uint64_t{1} << 21);
  EXPECT_EQ(*RqAffinityFeatureFlag(63), uint64_t{1} << 63);
}

TEST(RqAffinityFeatureFlag, RefusesBitsOutOfRange) {
  for (int bit : {-1, 64, 1000}) {
    absl::StatusOr<uint64_t> flag = RqAffinityFeatureFlag(bit);
    EXPECT_EQ(flag.status().code(), absl::StatusCode::kInvalidArgument) << bit;
    EXPECT_NE(flag.status().message().find("must be 0..63"), std::string::npos)
        << flag.status().message();
  }
}

TEST(RqAffinityFeatureFlag, RefusesTheBitOfAReleasedFlagNamingIt) {
  absl::StatusOr<uint64_t> recovery = RqAffinityFeatureFlag(3);
  EXPECT_EQ(recovery.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(recovery.status().message().find("UBLK_F_USER_RECOVERY"), std::string::npos)
      << recovery.status().message();
  for (int bit = 0; bit < 21; ++bit) EXPECT_FALSE(RqAffinityFeatureFlag(bit).ok()) << bit;
  EXPECT_NE(RqAffinityFeatureFlag(20).status().message().find("UBLK_F_IO_DESC_SIZE"),
            std::string::npos);
}

TEST(RqAffinityRedirected, OnlyWhenNamedOfferedAndGranted) {
  const uint64_t flag = *RqAffinityFeatureFlag(21);
  DeviceConfig config = TypicalConfig();
  config.rq_affinity_flag = flag;
  const uint64_t with = 0x1fffff | flag;
  EXPECT_TRUE(RqAffinityRedirected(with, ChooseDeviceFlags(with, config), flag));
  EXPECT_FALSE(RqAffinityRedirected(0x1fffff, ChooseDeviceFlags(0x1fffff, config), flag));
  // Not named: never, even when the kernel offers the bit and the device has it (a device an
  // agent with the option created, recovered by one without it).
  EXPECT_FALSE(RqAffinityRedirected(kEveryBit, ChooseDeviceFlags(kEveryBit, TypicalConfig()), 0));
  EXPECT_FALSE(RqAffinityRedirected(kEveryBit, kEveryBit, 0));
  // Offered but not granted (a device created by an agent without the option), or the reverse.
  EXPECT_FALSE(RqAffinityRedirected(with, abi::kFUserRecovery, flag));
  EXPECT_FALSE(RqAffinityRedirected(0x1fffff, flag, flag));
}

abi::CtrlDevInfo KernelDevice(uint16_t queues, uint16_t depth) {
  abi::CtrlDevInfo info{};
  info.nr_hw_queues = queues;
  info.queue_depth = depth;
  info.max_io_buf_bytes = 512 * 1024;
  info.flags = abi::kFUserRecovery | abi::kFUserRecoveryReissue;
  return info;
}

TEST(RecoveryConfig, RunsTheKernelsGeometryWhateverTheSpecSays) {
  const DeviceConfig asked = TypicalConfig();  // 2 queues of depth 64
  for (const auto& [queues, depth] :
       {std::pair<uint16_t, uint16_t>{4, 64}, {1, 64}, {2, 128}, {3, 32}}) {
    const DeviceConfig config = RecoveryConfig(asked, KernelDevice(queues, depth));
    EXPECT_EQ(config.queues, queues);
    EXPECT_EQ(config.queue_depth, depth);
    // The rest is the spec's.
    EXPECT_EQ(config.size_bytes, asked.size_bytes);
    EXPECT_EQ(config.max_io_bytes, asked.max_io_bytes);
    EXPECT_TRUE(ValidateDeviceConfig(config).ok());
  }
}

TEST(GeometryDisagreement, NamesWhatTheSpecSaidOtherwise) {
  const DeviceConfig asked = TypicalConfig();
  EXPECT_EQ(GeometryDisagreement(asked, RecoveryConfig(asked, KernelDevice(2, 64))), "");
  EXPECT_EQ(GeometryDisagreement(asked, RecoveryConfig(asked, KernelDevice(4, 64))),
            "queues 4 (asked 2)");
  EXPECT_EQ(GeometryDisagreement(asked, RecoveryConfig(asked, KernelDevice(1, 128))),
            "queues 1 (asked 2), queue depth 128 (asked 64)");
}

TEST(BuildDevInfo, LetsTheKernelPickTheIdAndCarriesTheGeometry) {
  abi::CtrlDevInfo info = BuildDevInfo(TypicalConfig(), abi::kFCmdIoctlEncode);
  EXPECT_EQ(info.dev_id, 0xffffffffu);
  EXPECT_EQ(info.nr_hw_queues, 2);
  EXPECT_EQ(info.queue_depth, 64);
  EXPECT_EQ(info.max_io_buf_bytes, 512u * 1024);
  EXPECT_EQ(info.flags, abi::kFCmdIoctlEncode);
}

TEST(BuildDevInfo, AsksForAGivenIdWhenTold) {
  EXPECT_EQ(BuildDevInfo(TypicalConfig(), 0, 7).dev_id, 7u);
}

TEST(BuildParams, DescribesSizeBlockSizeAndTransferLimit) {
  abi::Params params = BuildParams(TypicalConfig(), 256 * 1024);
  EXPECT_EQ(params.len, sizeof(abi::Params));
  EXPECT_EQ(params.types, abi::kParamTypeBasic | abi::kParamTypeDiscard);
  EXPECT_EQ(params.basic.logical_bs_shift, 9);
  EXPECT_EQ(params.basic.physical_bs_shift, 12);
  EXPECT_GE(params.basic.physical_bs_shift, params.basic.logical_bs_shift);
  EXPECT_EQ(params.basic.max_sectors, 512u);  // 256 KiB in sectors: the kernel's accepted size
  EXPECT_EQ(params.basic.dev_sectors, (1ULL << 30) / 512);
}

TEST(BuildParams, FourKibibyteBlocksShiftByTwelve) {
  DeviceConfig config = TypicalConfig();
  config.logical_block_size = 4096;
  abi::Params params = BuildParams(config, config.max_io_bytes);
  EXPECT_EQ(params.basic.logical_bs_shift, 12);
  EXPECT_EQ(params.basic.physical_bs_shift, 12);
  EXPECT_EQ(params.discard.discard_granularity, 4096u);
}

TEST(BuildParams, VolatileCacheAndFuaSoFlushAndFuaReachTheBackend) {
  abi::Params params = BuildParams(TypicalConfig(), 512 * 1024);
  EXPECT_NE(params.basic.attrs & abi::kAttrVolatileCache, 0u);
  EXPECT_NE(params.basic.attrs & abi::kAttrFua, 0u);
  EXPECT_EQ(params.basic.attrs & abi::kAttrReadOnly, 0u);
}

TEST(BuildParams, ReadOnlyDeviceIsMarkedReadOnly) {
  DeviceConfig config = TypicalConfig();
  config.read_only = true;
  EXPECT_NE(BuildParams(config, 512 * 1024).basic.attrs & abi::kAttrReadOnly, 0u);
}

TEST(BuildParams, DiscardAndWriteZeroesAreEnabled) {
  abi::Params params = BuildParams(TypicalConfig(), 512 * 1024);
  EXPECT_EQ(params.discard.discard_granularity, 512u);
  EXPECT_GT(params.discard.max_discard_sectors, 0u);
  EXPECT_GT(params.discard.max_write_zeroes_sectors, 0u);
  EXPECT_EQ(params.discard.max_discard_segments, 1);
}

TEST(BuildParams, StorageWithoutDiscardOrWriteZeroesAdvertisesNeither) {
  StorageTraits storage;
  storage.discard = false;
  storage.write_zeroes = false;
  abi::Params params = BuildParams(TypicalConfig(), 512 * 1024, storage);
  EXPECT_EQ(params.types & abi::kParamTypeDiscard, 0u);
  EXPECT_EQ(params.discard.max_discard_sectors, 0u);
  EXPECT_EQ(params.discard.max_write_zeroes_sectors, 0u);
}

TEST(BuildParams, StorageWithOnlyWriteZeroesAdvertisesItWithinItsLimit) {
  StorageTraits storage;
  storage.discard = false;
  storage.max_write_zeroes_bytes = 32 << 20;
  abi::Params params = BuildParams(TypicalConfig(), 512 * 1024, storage);
  EXPECT_NE(params.types & abi::kParamTypeDiscard, 0u);
  EXPECT_EQ(params.discard.max_discard_sectors, 0u);
  EXPECT_EQ(params.discard.max_write_zeroes_sectors, (32u << 20) / 512);
}

TEST(BuildParams, StorageWithoutVolatileCacheGetsNeitherFlushNorFua) {
  StorageTraits storage;
  storage.volatile_cache = false;
  EXPECT_EQ(BuildParams(TypicalConfig(), 512 * 1024, storage).basic.attrs &
                (abi::kAttrVolatileCache | abi::kAttrFua),
            0u);
}

TEST(ChooseDeviceFlags, ZeroCopyWhenTheStorageCanAndTheKernelOffersAutoBufReg) {
  StorageTraits zero_copy;
  zero_copy.zero_copy = true;
  const uint64_t flags = ChooseDeviceFlags(0x1fffff, TypicalConfig(), zero_copy);
  EXPECT_NE(flags & abi::kFAutoBufReg, 0u);
  EXPECT_STREQ(CopyModeName(flags), "zero_copy");
}

TEST(ChooseDeviceFlags, CopyModeOnKernelsWithoutAutoBufRegOrForStorageThatCannot) {
  StorageTraits zero_copy;
  zero_copy.zero_copy = true;
  // 6.12 offers 0x1fe: no AUTO_BUF_REG.
  const uint64_t lts = ChooseDeviceFlags(0x1fe, TypicalConfig(), zero_copy);
  EXPECT_EQ(lts & abi::kFAutoBufReg, 0u);
  EXPECT_STREQ(CopyModeName(lts), "copy");
  EXPECT_EQ(ChooseDeviceFlags(0x1fffff, TypicalConfig()) & abi::kFAutoBufReg, 0u);
}

TEST(ChooseDeviceFlags, ZeroCopySwitchedOffMeansCopyModeEvenWhereOffered) {
  StorageTraits zero_copy;
  zero_copy.zero_copy = true;
  DeviceConfig config = TypicalConfig();
  config.zero_copy = false;
  EXPECT_EQ(ChooseDeviceFlags(0x1fffff, config, zero_copy) & abi::kFAutoBufReg, 0u);
}

TEST(ChooseDeviceFlags, BatchIoWhereTheKernelOffersItWithRecoveryAndZeroCopyKept) {
  StorageTraits zero_copy;
  zero_copy.zero_copy = true;
  const uint64_t flags = ChooseDeviceFlags(0x1fffff, TypicalConfig(), zero_copy);
  EXPECT_NE(flags & abi::kFBatchIo, 0u);
  EXPECT_NE(flags & abi::kFAutoBufReg, 0u);
  EXPECT_NE(flags & abi::kFUserRecovery, 0u);
  EXPECT_NE(flags & abi::kFUserRecoveryReissue, 0u);
  EXPECT_STREQ(IoModeName(flags), "batch");
}

TEST(ChooseDeviceFlags, ClassicOnA612LikeKernelWithoutBatchIo) {
  // 6.12 offers 0x1fe: no BATCH_IO (bit 15).
  const uint64_t lts = ChooseDeviceFlags(0x1fe, TypicalConfig());
  EXPECT_EQ(lts & abi::kFBatchIo, 0u);
  EXPECT_STREQ(IoModeName(lts), "classic");
}

TEST(ChooseDeviceFlags, BatchIoSwitchedOffMeansClassicEvenWhereOffered) {
  DeviceConfig config = TypicalConfig();
  config.batch_io = false;
  const uint64_t flags = ChooseDeviceFlags(0x1fffff, config);
  EXPECT_EQ(flags & abi::kFBatchIo, 0u);
  EXPECT_STREQ(IoModeName(flags), "classic");
}

TEST(ChooseDeviceFlags, BatchIoNeedsTheIoctlEncodingItsCommandsUse) {
  EXPECT_EQ(ChooseDeviceFlags(abi::kFBatchIo, TypicalConfig()) & abi::kFBatchIo, 0u);
  EXPECT_NE(
      ChooseDeviceFlags(abi::kFBatchIo | abi::kFCmdIoctlEncode, TypicalConfig()) & abi::kFBatchIo,
      0u);
}

TEST(ValidateDeviceConfig, AcceptsATypicalConfig) {
  EXPECT_TRUE(ValidateDeviceConfig(TypicalConfig()).ok());
}

TEST(ValidateDeviceConfig, RejectsOddBlockSizeNamingTheField) {
  DeviceConfig config = TypicalConfig();
  config.logical_block_size = 1024;
  absl::Status status = ValidateDeviceConfig(config);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("logical_block_size"), absl::string_view::npos);
}

TEST(ValidateDeviceConfig, RejectsSizeThatIsNotAWholeNumberOfBlocks) {
  DeviceConfig config = TypicalConfig();
  config.logical_block_size = 4096;
  config.size_bytes = 4096 * 10 + 512;
  EXPECT_EQ(ValidateDeviceConfig(config).code(), absl::StatusCode::kInvalidArgument);
  config.size_bytes = 0;
  EXPECT_EQ(ValidateDeviceConfig(config).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ValidateDeviceConfig, RejectsZeroQueuesAndDepthBeyondTheKernelLimit) {
  DeviceConfig config = TypicalConfig();
  config.queues = 0;
  EXPECT_NE(ValidateDeviceConfig(config).message().find("queues"), absl::string_view::npos);
  config = TypicalConfig();
  config.queue_depth = 4097;
  EXPECT_NE(ValidateDeviceConfig(config).message().find("queue_depth"), absl::string_view::npos);
}

TEST(ValidateDeviceConfig, RejectsUnalignedMaxIoBytes) {
  DeviceConfig config = TypicalConfig();
  config.max_io_bytes = 1000;
  EXPECT_NE(ValidateDeviceConfig(config).message().find("max_io_bytes"), absl::string_view::npos);
}

}  // namespace
}  // namespace blk::server
