#include "server/ublk/io_admission.h"

#include <cerrno>

#include "gtest/gtest.h"
#include "server/ublk/abi.h"

namespace blk::server {
namespace {

TEST(AdmitIo, TheFiveServedOpsReachTheBackend) {
  const StorageTraits traits;
  for (uint8_t op : {abi::kIoOpRead, abi::kIoOpWrite, abi::kIoOpFlush, abi::kIoOpDiscard,
                     abi::kIoOpWriteZeroes}) {
    EXPECT_EQ(AdmitIo(op, /*read_only=*/false, traits), 0) << int{op};
  }
}

TEST(AdmitIo, ZoneWriteSameAndUnknownOpsAreNotSupported) {
  const StorageTraits traits;
  for (uint8_t op : {abi::kIoOpZoneOpen, abi::kIoOpZoneReset, abi::kIoOpZoneAppend,
                     abi::kIoOpReportZones, abi::kIoOpWriteSame, uint8_t{200}}) {
    EXPECT_EQ(AdmitIo(op, /*read_only=*/false, traits), -EOPNOTSUPP) << int{op};
    EXPECT_EQ(AdmitIo(op, /*read_only=*/true, traits), -EOPNOTSUPP) << int{op};
  }
}

TEST(AdmitIo, AReadOnlyDeviceRefusesWhatChangesDataAndServesReadsAndFlushes) {
  StorageTraits traits;
  for (uint8_t op : {abi::kIoOpWrite, abi::kIoOpDiscard, abi::kIoOpWriteZeroes}) {
    EXPECT_EQ(AdmitIo(op, /*read_only=*/true, traits), -EROFS) << int{op};
  }
  EXPECT_EQ(AdmitIo(abi::kIoOpRead, /*read_only=*/true, traits), 0);
  EXPECT_EQ(AdmitIo(abi::kIoOpFlush, /*read_only=*/true, traits), 0);
  // Read-only wins over "not supported", as the backends answered before the queue did.
  traits.discard = false;
  traits.write_zeroes = false;
  EXPECT_EQ(AdmitIo(abi::kIoOpDiscard, /*read_only=*/true, traits), -EROFS);
  EXPECT_EQ(AdmitIo(abi::kIoOpWriteZeroes, /*read_only=*/true, traits), -EROFS);
}

TEST(AdmitIo, DiscardAndWriteZeroesFollowTheStorageTraits) {
  StorageTraits traits;
  traits.discard = false;
  EXPECT_EQ(AdmitIo(abi::kIoOpDiscard, false, traits), -EOPNOTSUPP);
  EXPECT_EQ(AdmitIo(abi::kIoOpWriteZeroes, false, traits), 0);
  traits.discard = true;
  traits.write_zeroes = false;
  EXPECT_EQ(AdmitIo(abi::kIoOpDiscard, false, traits), 0);
  EXPECT_EQ(AdmitIo(abi::kIoOpWriteZeroes, false, traits), -EOPNOTSUPP);
}

}  // namespace
}  // namespace blk::server
