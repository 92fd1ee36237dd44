#include "server/nvme/command.h"

#include <array>
#include <cerrno>
#include <cstdint>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/nvme/abi.h"
#include "server/ublk/abi.h"

namespace blk::server::nvme {
namespace {

using ::testing::HasSubstr;

NamespaceProfile Profile(uint32_t lba_shift, uint64_t namespace_bytes) {
  NamespaceProfile profile;
  profile.nsid = 1;
  profile.format.lba_shift = lba_shift;
  profile.format.lba_bytes = 1u << lba_shift;
  profile.format.size_blocks = namespace_bytes >> lba_shift;
  profile.format.capacity_blocks = profile.format.size_blocks;
  profile.controller.max_transfer_bytes = 128 * 1024;
  profile.controller.write_zeroes = true;
  profile.controller.dataset_management = true;
  profile.controller.volatile_write_cache = true;
  return profile;
}

NamespaceTarget Target(uint32_t lba_shift, uint64_t offset_bytes = 0, uint64_t size_bytes = 0) {
  auto target = MakeNamespaceTarget(Profile(lba_shift, 1ull << 30), offset_bytes, size_bytes);
  EXPECT_TRUE(target.ok()) << target.status();
  return *target;
}

BlockRequest Request(uint8_t op, uint64_t offset, uint32_t length, bool fua = false) {
  return BlockRequest{op, offset, length, fua, 0x7f0000000000};
}

struct Built {
  int count;
  std::array<UringCmd, 64> cmds{};
  DsmRange range{};
};

Built Build(const NamespaceTarget& target, const BlockRequest& request) {
  Built built{};
  built.count = BuildCommands(target, request, built.cmds, &built.range);
  return built;
}

TEST(NvmeCommand, AVolumeGrowsUpToTheNamespacesEndAndNoFurther) {
  const NamespaceTarget target = Target(12, 256 << 20, 128 << 20);  // 1 GiB namespace
  EXPECT_EQ(GrownSizeBlocks(target, 1ull << 30, 512 << 20).value(), (512u << 20) >> 12);
  EXPECT_EQ(GrownSizeBlocks(target, 1ull << 30, 768 << 20).value(), (768u << 20) >> 12);
  EXPECT_EQ(GrownSizeBlocks(target, 1ull << 30, 128 << 20).value(), (128u << 20) >> 12);

  absl::StatusOr<uint64_t> beyond = GrownSizeBlocks(target, 1ull << 30, (768 << 20) + 4096);
  EXPECT_EQ(beyond.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(beyond.status().message()), HasSubstr("1073741824 bytes"));
  EXPECT_THAT(std::string(beyond.status().message()), HasSubstr("at most 805306368 bytes"));
  // A namespace that grew since the volume was placed gives it more room.
  EXPECT_EQ(GrownSizeBlocks(target, 2ull << 30, (768 << 20) + 4096).value(),
            ((768u << 20) + 4096) >> 12);

  EXPECT_EQ(GrownSizeBlocks(target, 1ull << 30, (256 << 20) + 512).status().code(),
            absl::StatusCode::kInvalidArgument);  // not a multiple of the 4096-byte LBA
  EXPECT_EQ(GrownSizeBlocks(target, 1ull << 30, 64 << 20).status().code(),
            absl::StatusCode::kInvalidArgument);  // smaller
  // A namespace shrunk to before the volume's offset leaves it no room at all.
  EXPECT_EQ(GrownSizeBlocks(target, 128 << 20, 128 << 20).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(NvmeCommand, ReadOf512ByteBlocksCarriesSlbaAndZeroBasedCount) {
  Built b = Build(Target(9), Request(abi::kIoOpRead, 4096, 8192));
  ASSERT_EQ(b.count, 1);
  const UringCmd& cmd = b.cmds[0];
  EXPECT_EQ(cmd.opcode, kOpRead);
  EXPECT_EQ(cmd.nsid, 1u);
  EXPECT_EQ(cmd.cdw10, 8u);
  EXPECT_EQ(cmd.cdw11, 0u);
  EXPECT_EQ(cmd.cdw12, 15u);
  EXPECT_EQ(cmd.cdw13, 0u);
  EXPECT_EQ(cmd.addr, 0x7f0000000000u);
  EXPECT_EQ(cmd.data_len, 8192u);
  EXPECT_EQ(cmd.metadata, 0u);
  EXPECT_EQ(cmd.metadata_len, 0u);
}

TEST(NvmeCommand, WriteOn4KiBNamespaceCountsIn4KiBBlocks) {
  Built b = Build(Target(12), Request(abi::kIoOpWrite, 1 << 20, 16384));
  ASSERT_EQ(b.count, 1);
  EXPECT_EQ(b.cmds[0].opcode, kOpWrite);
  EXPECT_EQ(b.cmds[0].cdw10, 256u);
  EXPECT_EQ(b.cmds[0].cdw12, 3u);
  EXPECT_EQ(b.cmds[0].data_len, 16384u);
}

TEST(NvmeCommand, FuaSetsBit30OfCdw12) {
  Built b = Build(Target(9), Request(abi::kIoOpWrite, 0, 512, /*fua=*/true));
  ASSERT_EQ(b.count, 1);
  EXPECT_EQ(b.cmds[0].cdw12, kCdw12Fua | 0u);
  EXPECT_EQ(kCdw12Fua, 0x40000000u);
}

TEST(NvmeCommand, VolumeOffsetShiftsTheLbaAndReachesTheHighDword) {
  NamespaceProfile profile = Profile(12, 1ull << 46);
  auto target = MakeNamespaceTarget(profile, (1ull << 44), 1ull << 40);
  ASSERT_TRUE(target.ok()) << target.status();
  Built b = Build(*target, Request(abi::kIoOpRead, 4096, 4096));
  ASSERT_EQ(b.count, 1);
  const uint64_t lba = (1ull << 32) + 1;  // 2^44 / 4096 + 1
  EXPECT_EQ(b.cmds[0].cdw10, static_cast<uint32_t>(lba));
  EXPECT_EQ(b.cmds[0].cdw11, 1u);
  EXPECT_EQ(b.cmds[0].cdw12, 0u);
}

TEST(NvmeCommand, RequestsBeyondMdtsSplitIntoContiguousPiecesThatEachKeepFua) {
  Built b = Build(Target(9), Request(abi::kIoOpWrite, 512, 300 * 1024, /*fua=*/true));
  ASSERT_EQ(b.count, 3);  // 128 KiB + 128 KiB + 44 KiB
  const uint32_t piece_bytes[] = {128 * 1024, 128 * 1024, 44 * 1024};
  uint64_t lba = 1;
  uint64_t addr = 0x7f0000000000;
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(b.cmds[i].opcode, kOpWrite);
    EXPECT_EQ(b.cmds[i].cdw10, lba);
    EXPECT_EQ(b.cmds[i].cdw12, kCdw12Fua | (piece_bytes[i] / 512 - 1));
    EXPECT_EQ(b.cmds[i].addr, addr);
    EXPECT_EQ(b.cmds[i].data_len, piece_bytes[i]);
    lba += piece_bytes[i] / 512;
    addr += piece_bytes[i];
  }
}

TEST(NvmeCommand, MisalignedRequestsFailWithEinvalAndBuildNothing) {
  const NamespaceTarget target = Target(12);
  for (const BlockRequest& request :
       {Request(abi::kIoOpRead, 512, 4096), Request(abi::kIoOpWrite, 0, 512),
        Request(abi::kIoOpWrite, 4096, 4096 + 512), Request(abi::kIoOpDiscard, 2048, 4096),
        Request(abi::kIoOpWriteZeroes, 0, 1024)}) {
    Built b = Build(target, request);
    EXPECT_EQ(b.count, -EINVAL) << "op " << int{request.op} << " at " << request.offset_bytes;
    EXPECT_EQ(b.cmds[0].opcode, 0);
    EXPECT_EQ(b.cmds[0].data_len, 0u);
  }
}

TEST(NvmeCommand, RequestsBeyondTheVolumeFailWithEinval) {
  const NamespaceTarget target = Target(9, 1 << 20, 1 << 20);
  EXPECT_EQ(Build(target, Request(abi::kIoOpRead, (1 << 20) - 512, 512)).count, 1);
  EXPECT_EQ(Build(target, Request(abi::kIoOpRead, (1 << 20) - 512, 1024)).count, -EINVAL);
  EXPECT_EQ(Build(target, Request(abi::kIoOpWrite, 1 << 20, 512)).count, -EINVAL);
}

TEST(NvmeCommand, FlushIsSentOnlyWhenTheNamespaceHasAVolatileWriteCache) {
  NamespaceTarget target = Target(9);
  Built b = Build(target, Request(abi::kIoOpFlush, 0, 0));
  ASSERT_EQ(b.count, 1);
  EXPECT_EQ(b.cmds[0].opcode, kOpFlush);
  EXPECT_EQ(b.cmds[0].nsid, 1u);
  EXPECT_EQ(b.cmds[0].data_len, 0u);
  target.volatile_write_cache = false;
  EXPECT_EQ(Build(target, Request(abi::kIoOpFlush, 0, 0)).count, 0);
}

TEST(NvmeCommand, DiscardIsOneDatasetManagementDeallocateRange) {
  const NamespaceTarget target = Target(12, 1 << 20);
  Built b = Build(target, Request(abi::kIoOpDiscard, 8192, 1 << 20));
  ASSERT_EQ(b.count, 1);
  const UringCmd& cmd = b.cmds[0];
  EXPECT_EQ(cmd.opcode, kOpDatasetManagement);
  EXPECT_EQ(cmd.cdw10, 0u);  // one range
  EXPECT_EQ(cmd.cdw11, kDsmAttrDeallocate);
  EXPECT_EQ(kDsmAttrDeallocate, 4u);
  EXPECT_EQ(cmd.data_len, 16u);
  EXPECT_EQ(cmd.addr, reinterpret_cast<uintptr_t>(&b.range));
  EXPECT_EQ(b.range.context_attributes, 0u);
  EXPECT_EQ(b.range.length_blocks, 256u);  // 1-based
  EXPECT_EQ(b.range.starting_lba, 256u + 2);
}

TEST(NvmeCommand, DiscardWithoutDatasetManagementIsNotSupported) {
  NamespaceTarget target = Target(9);
  target.dataset_management = false;
  EXPECT_EQ(Build(target, Request(abi::kIoOpDiscard, 0, 4096)).count, -EOPNOTSUPP);
}

TEST(NvmeCommand, WriteZeroesCarriesNoDataAndSplitsAtTheBlockCountLimit) {
  Built b = Build(Target(9), Request(abi::kIoOpWriteZeroes, 0, 40u << 20, /*fua=*/true));
  ASSERT_EQ(b.count, 2);  // 81920 blocks = 65536 + 16384, MDTS does not apply
  EXPECT_EQ(b.cmds[0].opcode, kOpWriteZeroes);
  EXPECT_EQ(b.cmds[0].cdw10, 0u);
  EXPECT_EQ(b.cmds[0].cdw12, kCdw12Fua | 0xffffu);
  EXPECT_EQ(b.cmds[0].addr, 0u);
  EXPECT_EQ(b.cmds[0].data_len, 0u);
  EXPECT_EQ(b.cmds[1].cdw10, 65536u);
  EXPECT_EQ(b.cmds[1].cdw12, kCdw12Fua | 16383u);
}

TEST(NvmeCommand, WriteZeroesWithoutSupportIsNotSupported) {
  NamespaceTarget target = Target(9);
  target.write_zeroes = false;
  EXPECT_EQ(Build(target, Request(abi::kIoOpWriteZeroes, 0, 4096)).count, -EOPNOTSUPP);
}

TEST(NvmeCommand, UnservedUblkOpsAreNotSupported) {
  EXPECT_EQ(Build(Target(9), Request(abi::kIoOpWriteSame, 0, 512)).count, -EOPNOTSUPP);
  EXPECT_EQ(Build(Target(9), Request(abi::kIoOpZoneAppend, 0, 512)).count, -EOPNOTSUPP);
}

TEST(NvmeCommand, TooSmallCommandArrayOverflowsInsteadOfWritingPastIt) {
  std::array<UringCmd, 2> cmds{};
  DsmRange range{};
  EXPECT_EQ(BuildCommands(Target(9), Request(abi::kIoOpRead, 0, 512 * 1024), cmds, &range),
            -EOVERFLOW);
}

TEST(NvmeCommand, TargetWithoutATransferLimitIsRefusedRatherThanDividingByZero) {
  NamespaceTarget target;
  target.size_blocks = 1024;
  EXPECT_EQ(Build(target, Request(abi::kIoOpRead, 0, 512)).count, -EINVAL);
  EXPECT_EQ(MaxCommandsPerRequest(target, 4096), 1u);
}

TEST(NvmeCommand, MaxCommandsPerRequestCoversTheLargestRequest) {
  const NamespaceTarget target = Target(9);
  EXPECT_EQ(MaxCommandsPerRequest(target, 512 * 1024), 4u);
  EXPECT_EQ(MaxCommandsPerRequest(target, 300 * 1024), 3u);
  EXPECT_EQ(MaxCommandsPerRequest(target, 4096), 1u);
}

TEST(NvmeCommand, MdtsLargerThanTheBlockCountLimitIsCappedByIt) {
  NamespaceProfile profile = Profile(9, 1ull << 36);
  profile.controller.max_transfer_bytes = 0;  // no MDTS limit
  auto target = MakeNamespaceTarget(profile, 0, 0);
  ASSERT_TRUE(target.ok());
  EXPECT_EQ(target->max_transfer_bytes, 65536u * 512);
}

TEST(NvmeTarget, VolumeSizeDefaultsToTheRestOfTheNamespace) {
  auto target = MakeNamespaceTarget(Profile(12, 1ull << 30), 1 << 20, 0);
  ASSERT_TRUE(target.ok());
  EXPECT_EQ(target->offset_blocks, 256u);
  EXPECT_EQ(target->size_blocks, ((1u << 30) - (1u << 20)) / 4096);
  EXPECT_EQ(target->max_transfer_bytes, 128u * 1024);
}

TEST(NvmeTarget, VolumeLargerThanTheNamespaceIsRefused) {
  auto target = MakeNamespaceTarget(Profile(9, 1ull << 30), 4096, 1ull << 30);
  ASSERT_FALSE(target.ok());
  EXPECT_THAT(target.status().message(), HasSubstr("does not fit in the namespace"));
  EXPECT_FALSE(MakeNamespaceTarget(Profile(9, 1ull << 30), 1ull << 30, 0).ok());
}

TEST(NvmeTarget, OffsetAndSizeMustBeLbaMultiples) {
  auto target = MakeNamespaceTarget(Profile(12, 1ull << 30), 512, 0);
  ASSERT_FALSE(target.ok());
  EXPECT_THAT(target.status().message(),
              HasSubstr("multiples of the namespace's LBA size of 4096"));
  EXPECT_FALSE(MakeNamespaceTarget(Profile(12, 1ull << 30), 0, 4096 + 512).ok());
}

uint32_t Status(uint8_t sct, uint8_t sc, bool dnr = false) {
  return sc | (uint32_t{sct} << kStatusSctShift) | (dnr ? kStatusDnr : 0);
}

TEST(NvmeStatus, MapsStatusCodesToBlockLayerErrnos) {
  EXPECT_EQ(ErrnoFromStatus(0), 0);
  EXPECT_EQ(ErrnoFromStatus(Status(kSctGeneric, kScInvalidOpcode, true)), EOPNOTSUPP);
  EXPECT_EQ(ErrnoFromStatus(Status(kSctGeneric, kScInvalidField, true)), EOPNOTSUPP);
  EXPECT_EQ(ErrnoFromStatus(Status(kSctGeneric, kScInvalidNamespace, true)), ENODEV);
  EXPECT_EQ(ErrnoFromStatus(Status(kSctGeneric, kScLbaOutOfRange, true)), EREMOTEIO);
  EXPECT_EQ(ErrnoFromStatus(Status(kSctGeneric, kScCapacityExceeded)), ENOSPC);
  EXPECT_EQ(ErrnoFromStatus(Status(kSctGeneric, kScInternalError)), EIO);
  EXPECT_EQ(ErrnoFromStatus(Status(kSctCommandSpecific, kScWriteToReadOnlyRange)), EROFS);
  EXPECT_EQ(ErrnoFromStatus(Status(kSctMediaError, kScUnrecoveredReadError)), ENODATA);
  EXPECT_EQ(ErrnoFromStatus(Status(kSctMediaError, kScWriteFault)), ENODATA);
  EXPECT_EQ(ErrnoFromStatus(Status(kSctMediaError, kScGuardCheckError)), EILSEQ);
  EXPECT_EQ(ErrnoFromStatus(Status(kSctMediaError, kScAccessDenied)), EACCES);
  EXPECT_EQ(ErrnoFromStatus(Status(kSctPathRelated, 0x02)), ENOLINK);
  EXPECT_EQ(ErrnoFromStatus(Status(kSctVendorSpecific, 0x01)), EIO);
}

TEST(NvmeStatus, SuccessCodeOfAnotherTypeIsNotSuccess) {
  EXPECT_EQ(ErrnoFromStatus(Status(kSctMediaError, 0x00)), EIO);
  EXPECT_EQ(ErrnoFromStatus(Status(kSctPathRelated, 0x00)), ENOLINK);
}

TEST(NvmeStatus, CompletionResIsKernelErrnoWhenNegativeAndNvmeStatusWhenPositive) {
  EXPECT_EQ(ErrnoFromCompletion(0), 0);
  EXPECT_EQ(ErrnoFromCompletion(-EINTR), EINTR);
  EXPECT_EQ(ErrnoFromCompletion(-ENODEV), ENODEV);
  EXPECT_EQ(ErrnoFromCompletion(static_cast<int32_t>(Status(kSctGeneric, kScCapacityExceeded))),
            ENOSPC);
}

TEST(NvmeStatus, ARemovedDeviceOrAMissingPathOrNamespaceIsAGoneNamespace) {
  EXPECT_TRUE(NamespaceGone(-ENODEV));
  EXPECT_TRUE(NamespaceGone(-ENXIO));
  EXPECT_TRUE(NamespaceGone(static_cast<int32_t>(Status(kSctPathRelated, 0x70))));
  EXPECT_TRUE(NamespaceGone(static_cast<int32_t>(Status(kSctGeneric, kScInvalidNamespace))));
  EXPECT_FALSE(NamespaceGone(0));
  EXPECT_FALSE(NamespaceGone(-EINVAL));
  EXPECT_FALSE(NamespaceGone(static_cast<int32_t>(Status(kSctMediaError, kScWriteFault))));
  EXPECT_FALSE(NamespaceGone(static_cast<int32_t>(Status(kSctGeneric, kScLbaOutOfRange))));
}

TEST(NvmeStatus, PathAndTransportFailuresAreRetriedOnAnotherPathAndMediaErrorsAreNot) {
  EXPECT_TRUE(PathFailure(-EINVAL));  // the head found no live path
  EXPECT_TRUE(PathFailure(-ENODEV));
  EXPECT_TRUE(PathFailure(-EAGAIN));
  EXPECT_TRUE(PathFailure(static_cast<int32_t>(Status(kSctPathRelated, 0x70))));  // host path
  EXPECT_TRUE(PathFailure(static_cast<int32_t>(Status(kSctPathRelated, 0x71))));  // host abort
  EXPECT_TRUE(PathFailure(static_cast<int32_t>(Status(kSctPathRelated, 0x03))));  // ANA change
  EXPECT_FALSE(PathFailure(0));
  EXPECT_FALSE(PathFailure(-EIO));
  EXPECT_FALSE(PathFailure(-EOPNOTSUPP));
  EXPECT_FALSE(PathFailure(static_cast<int32_t>(Status(kSctMediaError, kScUnrecoveredReadError))));
  EXPECT_FALSE(PathFailure(static_cast<int32_t>(Status(kSctGeneric, kScLbaOutOfRange))));
  EXPECT_FALSE(PathFailure(static_cast<int32_t>(Status(kSctCommandSpecific, 0x80))));
}

}  // namespace
}  // namespace blk::server::nvme
