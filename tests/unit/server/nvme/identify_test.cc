#include "server/nvme/identify.h"

#include <array>
#include <cstdint>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/nvme/abi.h"

namespace blk::server::nvme {
namespace {

using Page = std::array<uint8_t, kIdentifyBytes>;
using ::testing::HasSubstr;

void StoreLe(Page& page, size_t offset, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) page[offset + i] = static_cast<uint8_t>(value >> (8 * i));
}

uint32_t Lbaf(uint32_t metadata_bytes, uint32_t lbads) { return metadata_bytes | (lbads << 16); }

// An Identify Namespace page like QEMU's emulated namespace: formats 512, 512+8, 512+16, 512+64,
// 4096, 4096+8, 4096+16, 4096+64, the current one chosen by FLBAS.
Page NamespacePage(uint64_t nsze, uint8_t flbas) {
  Page page{};
  StoreLe(page, kNsNsze, nsze, 8);
  StoreLe(page, kNsNcap, nsze, 8);
  StoreLe(page, kNsNuse, nsze, 8);
  page[kNsNlbaf] = 7;
  page[kNsFlbas] = flbas;
  page[kNsDlfeat] = 0x09;  // reads zeroes, Write Zeroes may deallocate
  const uint32_t formats[] = {Lbaf(0, 9),  Lbaf(8, 9),  Lbaf(16, 9),  Lbaf(64, 9),
                              Lbaf(0, 12), Lbaf(8, 12), Lbaf(16, 12), Lbaf(64, 12)};
  for (size_t i = 0; i < 8; ++i) StoreLe(page, kNsLbaf0 + 4 * i, formats[i], 4);
  return page;
}

Page ControllerPage(uint8_t mdts, uint16_t oncs, uint8_t vwc) {
  Page page{};
  StoreLe(page, kCtrlVid, 0x1b36, 2);
  page[kCtrlMdts] = mdts;
  page[kCtrlSqes] = 0x66;  // required and maximum 64 bytes
  page[kCtrlCqes] = 0x44;  // required and maximum 16 bytes
  StoreLe(page, kCtrlNn, 256, 4);
  StoreLe(page, kCtrlOncs, oncs, 2);
  page[kCtrlVwc] = vwc;
  return page;
}

TEST(NvmeIdentifyNamespace, ReadsSizeAnd512ByteFormat) {
  auto format = ParseIdentifyNamespace(NamespacePage(2097152, 0));
  ASSERT_TRUE(format.ok()) << format.status();
  EXPECT_EQ(format->size_blocks, 2097152u);
  EXPECT_EQ(format->capacity_blocks, 2097152u);
  EXPECT_EQ(format->lba_shift, 9u);
  EXPECT_EQ(format->lba_bytes, 512u);
  EXPECT_EQ(format->size_bytes(), 1ull << 30);
  EXPECT_TRUE(format->deallocated_reads_zeroes);
}

TEST(NvmeIdentifyNamespace, CurrentFormatIndexSelectsTheLbaSize) {
  auto format = ParseIdentifyNamespace(NamespacePage(262144, 4));
  ASSERT_TRUE(format.ok()) << format.status();
  EXPECT_EQ(format->lba_bytes, 4096u);
  EXPECT_EQ(format->size_bytes(), 1ull << 30);
}

TEST(NvmeIdentifyNamespace, DeallocatedReadBehaviourOtherThanZeroesIsReported) {
  Page page = NamespacePage(1024, 0);
  page[kNsDlfeat] = 0x02;  // reads all ones
  auto format = ParseIdentifyNamespace(page);
  ASSERT_TRUE(format.ok()) << format.status();
  EXPECT_FALSE(format->deallocated_reads_zeroes);
}

TEST(NvmeIdentifyNamespace, HighFormatIndexBitsCountOnlyBeyondSixteenFormats) {
  Page page = NamespacePage(1024, 0x20 | 4);  // high bits set, but NLBAF says 8 formats
  auto format = ParseIdentifyNamespace(page);
  ASSERT_TRUE(format.ok()) << format.status();
  EXPECT_EQ(format->lba_bytes, 4096u);

  page[kNsNlbaf] = 63;
  StoreLe(page, kNsLbaf0 + 4 * 20, Lbaf(0, 12), 4);  // index (1 << 4) | 4 = 20
  page[kNsFlbas] = 0x20 | 4;
  format = ParseIdentifyNamespace(page);
  ASSERT_TRUE(format.ok()) << format.status();
  EXPECT_EQ(format->lba_bytes, 4096u);
}

TEST(NvmeIdentifyNamespace, MetadataFormatsAreRefusedWithAClearError) {
  auto format = ParseIdentifyNamespace(NamespacePage(1024, 1));
  ASSERT_FALSE(format.ok());
  EXPECT_EQ(format.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(format.status().message(), HasSubstr("8 metadata bytes per block"));
  EXPECT_THAT(format.status().message(), HasSubstr("metadata formats are not supported"));

  format = ParseIdentifyNamespace(NamespacePage(1024, 0x10 | 5));
  ASSERT_FALSE(format.ok());
  EXPECT_THAT(format.status().message(), HasSubstr("(extended LBA)"));
}

TEST(NvmeIdentifyNamespace, InactiveNamespaceIsRefused) {
  auto format = ParseIdentifyNamespace(Page{});
  ASSERT_FALSE(format.ok());
  EXPECT_THAT(format.status().message(), HasSubstr("not active"));
}

TEST(NvmeIdentifyNamespace, FormatIndexBeyondTheListIsMalformed) {
  auto format = ParseIdentifyNamespace(NamespacePage(1024, 9));
  ASSERT_FALSE(format.ok());
  EXPECT_EQ(format.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(format.status().message(), HasSubstr("LBA format 9 is not among the 8"));
}

TEST(NvmeIdentifyNamespace, LbaSizesOutside512To4096AreRefused) {
  Page page = NamespacePage(1024, 0);
  StoreLe(page, kNsLbaf0, Lbaf(0, 13), 4);
  auto format = ParseIdentifyNamespace(page);
  ASSERT_FALSE(format.ok());
  EXPECT_THAT(format.status().message(), HasSubstr("2^13"));
  StoreLe(page, kNsLbaf0, Lbaf(0, 0), 4);  // an unset descriptor
  EXPECT_FALSE(ParseIdentifyNamespace(page).ok());
}

TEST(NvmeIdentifyNamespace, CapacityLargerThanSizeIsMalformed) {
  Page page = NamespacePage(1024, 0);
  StoreLe(page, kNsNcap, 2048, 8);
  EXPECT_FALSE(ParseIdentifyNamespace(page).ok());
}

TEST(NvmeIdentifyNamespace, SizeOverflowingBytesIsMalformed) {
  Page page = NamespacePage(uint64_t{1} << 60, 4);
  auto format = ParseIdentifyNamespace(page);
  ASSERT_FALSE(format.ok());
  EXPECT_THAT(format.status().message(), HasSubstr("overflows"));
}

TEST(NvmeIdentifyNamespace, PagesOfTheWrongSizeAreRefused) {
  Page page = NamespacePage(1024, 0);
  auto format = ParseIdentifyNamespace(std::span<const uint8_t>(page).first(512));
  ASSERT_FALSE(format.ok());
  EXPECT_THAT(format.status().message(), HasSubstr("512 bytes, expected 4096"));
}

TEST(NvmeIdentifyController, MdtsIsAPowerOfTwoOf4KiBPages) {
  auto limits = ParseIdentifyController(ControllerPage(7, 0, 0));
  ASSERT_TRUE(limits.ok()) << limits.status();
  EXPECT_EQ(limits->max_transfer_bytes, 512u * 1024);
  limits = ParseIdentifyController(ControllerPage(1, 0, 0));
  ASSERT_TRUE(limits.ok());
  EXPECT_EQ(limits->max_transfer_bytes, 8192u);
}

TEST(NvmeIdentifyController, MdtsZeroMeansNoLimit) {
  auto limits = ParseIdentifyController(ControllerPage(0, 0, 0));
  ASSERT_TRUE(limits.ok());
  EXPECT_EQ(limits->max_transfer_bytes, 0u);
}

TEST(NvmeIdentifyController, OptionalCommandsAndWriteCacheComeFromOncsAndVwc) {
  auto limits = ParseIdentifyController(
      ControllerPage(5, kOncsWriteZeroes | kOncsDatasetManagement | kOncsCompare, 0x07));
  ASSERT_TRUE(limits.ok());
  EXPECT_TRUE(limits->write_zeroes);
  EXPECT_TRUE(limits->dataset_management);
  EXPECT_TRUE(limits->volatile_write_cache);

  limits = ParseIdentifyController(ControllerPage(5, kOncsCompare | kOncsWriteUncorrectable, 0x06));
  ASSERT_TRUE(limits.ok());
  EXPECT_FALSE(limits->write_zeroes);
  EXPECT_FALSE(limits->dataset_management);
  EXPECT_FALSE(limits->volatile_write_cache);
}

TEST(NvmeIdentifyController, PageWithoutTheRequiredQueueEntrySizesIsMalformed) {
  auto limits = ParseIdentifyController(Page{});
  ASSERT_FALSE(limits.ok());
  EXPECT_THAT(limits.status().message(), HasSubstr("not an Identify Controller"));

  Page page = ControllerPage(5, 0, 0);
  EXPECT_FALSE(ParseIdentifyController(std::span<const uint8_t>(page).first(4000)).ok());
}

}  // namespace
}  // namespace blk::server::nvme
