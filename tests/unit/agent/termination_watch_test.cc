#include "agent/termination_watch.h"

#include <signal.h>
#include <unistd.h>

#include "common/termination_signals.h"
#include "gtest/gtest.h"

namespace blk::agent {
namespace {

// Each test runs in a process of its own (gtest_discover_tests): blocking SIGTERM here, before the
// watch starts its thread, blocks it in every thread of the process, as the agent's main does.
TEST(TerminationWatch, ASignalDuringTheRestoreEndsTheWaitForIt) {
  const sigset_t signals = BlockTerminationSignals();
  TerminationWatch watch(signals);
  ASSERT_EQ(::kill(::getpid(), SIGTERM), 0);
  EXPECT_FALSE(watch.WaitRestoredOrSignal());
  EXPECT_EQ(watch.WaitSignal(), SIGTERM);
}

TEST(TerminationWatch, TheRestoreEndingFirstLeavesTheSignalToWaitFor) {
  const sigset_t signals = BlockTerminationSignals();
  TerminationWatch watch(signals);
  watch.MarkRestored();
  EXPECT_TRUE(watch.WaitRestoredOrSignal());
  ASSERT_EQ(::kill(::getpid(), SIGINT), 0);
  EXPECT_EQ(watch.WaitSignal(), SIGINT);
}

TEST(TerminationWatch, WithoutASignalItsThreadEndsWithIt) {
  const sigset_t signals = BlockTerminationSignals();
  { TerminationWatch watch(signals); }
  // Nothing was sent to end it: no signal is pending for the process.
  sigset_t pending;
  ASSERT_EQ(::sigpending(&pending), 0);
  EXPECT_EQ(::sigismember(&pending, SIGTERM), 0);
}

}  // namespace
}  // namespace blk::agent
