#include "agent/devices/reconcile.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace blk::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(DecideRestore, AQuiescedDeviceIsRecovered) {
  EXPECT_EQ(DecideRestore(2, KernelDeviceState::kQuiesced), RestoreAction::kRecover);
  EXPECT_EQ(DecideRestore(2, KernelDeviceState::kFailIo), RestoreAction::kRecover);
}

TEST(DecideRestore, ALiveDeviceIsRecoveredNotDeletedItsOldServerMayStillBeExiting) {
  EXPECT_EQ(DecideRestore(2, KernelDeviceState::kLive), RestoreAction::kRecover);
}

TEST(DecideRestore, AnUnknownStateNeverLeadsToDeletion) {
  EXPECT_EQ(DecideRestore(2, KernelDeviceState::kUnknown), RestoreAction::kRecover);
}

TEST(DecideRestore, AGoneDeviceIsCreatedAgainUnderItsNumber) {
  EXPECT_EQ(DecideRestore(2, KernelDeviceState::kAbsent), RestoreAction::kCreateWithSameId);
}

TEST(DecideRestore, ADeviceThatNeverStartedIsDeletedAndCreatedAgain) {
  EXPECT_EQ(DecideRestore(2, KernelDeviceState::kDead), RestoreAction::kDeleteThenCreate);
}

TEST(DecideRestore, ARecordWithoutANumberGetsANewDevice) {
  EXPECT_EQ(DecideRestore(-1, KernelDeviceState::kAbsent), RestoreAction::kCreateWithAnyId);
}

TEST(UnknownDevices, AreTheKernelIdsNoRecordClaims) {
  EXPECT_THAT(UnknownDevices({4, 0, 1, 3}, {1, 3}), ElementsAre(0, 4));
  EXPECT_THAT(UnknownDevices({1}, {1, 2}), IsEmpty());
}

TEST(FirstFreeDeviceId, SkipsKernelAndClaimedIds) {
  EXPECT_EQ(FirstFreeDeviceId({}, {}), 0);
  EXPECT_EQ(FirstFreeDeviceId({0, 2}, {1}), 3);
  EXPECT_EQ(FirstFreeDeviceId({1}, {}), 0);
}

}  // namespace
}  // namespace blk::agent
