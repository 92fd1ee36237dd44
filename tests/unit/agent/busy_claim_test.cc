#include "agent/volumes/busy_claim.h"

#include <optional>

#include "gtest/gtest.h"

namespace blk::agent {
namespace {

TEST(BusyClaimTest, TheEntryIsBusyWhileTheClaimLivesAndFreeAfter) {
  absl::Mutex mutex;
  VolumeEntries entries;
  entries["a"];
  entries["b"];
  {
    std::optional<BusyClaim> claim;
    {
      absl::MutexLock lock(&mutex);
      claim.emplace(mutex, entries, "a");
      EXPECT_TRUE(entries.at("a").busy);
      EXPECT_FALSE(entries.at("b").busy);
    }
  }
  absl::MutexLock lock(&mutex);
  EXPECT_FALSE(entries.at("a").busy);
}

TEST(BusyClaimTest, AnEarlyReturnReleasesTheClaim) {
  absl::Mutex mutex;
  VolumeEntries entries;
  entries["a"];
  auto fail_midway = [&]() -> absl::Status {
    std::optional<BusyClaim> claim;
    {
      absl::MutexLock lock(&mutex);
      claim.emplace(mutex, entries, "a");
    }
    return absl::InternalError("the device refused");
  };
  EXPECT_FALSE(fail_midway().ok());
  absl::MutexLock lock(&mutex);
  EXPECT_FALSE(entries.at("a").busy);
}

TEST(BusyClaimTest, ReleasedUnderTheLockTheEntryMayBeErasedBeforeTheClaimEnds) {
  absl::Mutex mutex;
  VolumeEntries entries;
  entries["a"];
  std::optional<BusyClaim> claim;
  {
    absl::MutexLock lock(&mutex);
    claim.emplace(mutex, entries, "a");
  }
  {
    absl::MutexLock lock(&mutex);
    claim->ReleaseLocked(mutex);
    EXPECT_FALSE(entries.at("a").busy);
    entries.erase("a");
    entries["a"].busy = true;  // made again under the same id, and claimed by another operation
  }
  claim.reset();
  absl::MutexLock lock(&mutex);
  EXPECT_TRUE(entries.at("a").busy);
}

TEST(BusyClaimTest, AClaimWhoseEntryWasErasedEndsQuietly) {
  absl::Mutex mutex;
  VolumeEntries entries;
  entries["a"];
  std::optional<BusyClaim> claim;
  {
    absl::MutexLock lock(&mutex);
    claim.emplace(mutex, entries, "a");
    entries.erase("a");
  }
  claim.reset();
  absl::MutexLock lock(&mutex);
  EXPECT_TRUE(entries.empty());
}

}  // namespace
}  // namespace blk::agent
