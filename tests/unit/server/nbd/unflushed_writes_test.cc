#include "server/nbd/unflushed_writes.h"

#include <sys/uio.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "server/nbd/protocol.h"

namespace blk::server::nbd {
namespace {

constexpr size_t kPool = 64 * 1024;

// A replayed request as it goes on the wire.
struct Sent {
  uint16_t command = 0;
  uint64_t cookie = 0;
  uint64_t offset = 0;
  uint32_t length = 0;
  std::vector<uint8_t> payload;
};

const std::vector<uint8_t> kZeroes(kPool, 0);

std::vector<Sent> Gather(UnflushedWrites& pool) {
  iovec iov[64];
  const size_t n = pool.GatherReplay(iov, 64, kZeroes);
  std::vector<Sent> sent;
  for (size_t i = 0; i < n; ++i) {
    const auto* header = static_cast<const uint8_t*>(iov[i].iov_base);
    Sent request{.command = GetU16(header + 6),
                 .cookie = GetU64(header + 8),
                 .offset = GetU64(header + 16),
                 .length = GetU32(header + 24),
                 .payload = {}};
    if (request.command == kCmdWrite) {
      ++i;
      const auto* data = static_cast<const uint8_t*>(iov[i].iov_base);
      request.payload.assign(data, data + iov[i].iov_len);
    }
    sent.push_back(request);
  }
  return sent;
}

void Answer(UnflushedWrites& pool, const Sent& request, uint32_t nbd_error = 0) {
  ReplyTarget* target = pool.FindReplay(request.cookie);
  ASSERT_NE(target, nullptr);
  target->nbd_error = nbd_error;
  pool.ReplayAnswered(request.cookie);
}

std::vector<uint8_t> Bytes(uint32_t length, uint8_t seed) {
  std::vector<uint8_t> bytes(length);
  for (uint32_t i = 0; i < length; ++i) bytes[i] = static_cast<uint8_t>(seed + i * 7);
  return bytes;
}

TEST(UnflushedWritesTest, AFlushFreesWhatWasAcknowledgedBeforeItWasSent) {
  UnflushedWrites pool(kPool);
  const std::vector<uint8_t> data = Bytes(4096, 1);
  EXPECT_TRUE(pool.Record(kCmdWrite, 0, 4096, data.data()));
  EXPECT_TRUE(pool.Record(kCmdTrim, 8192, 4096, nullptr));
  const uint64_t mark = pool.Mark();
  EXPECT_TRUE(pool.Record(kCmdWrite, 16384, 4096, data.data()));
  EXPECT_EQ(pool.count(), 3u);
  pool.Flushed(mark);
  EXPECT_EQ(pool.count(), 1u);
  EXPECT_EQ(pool.used_bytes(), 4096u);
  pool.Flushed(pool.Mark());
  EXPECT_EQ(pool.count(), 0u);
  EXPECT_EQ(pool.used_bytes(), 0u);
}

TEST(UnflushedWritesTest, AReconnectReplaysEveryKeptRequestWithItsPayload) {
  UnflushedWrites pool(kPool);
  const std::vector<uint8_t> data = Bytes(4096, 3);
  ASSERT_TRUE(pool.Record(kCmdWrite, 0, 4096, data.data()));
  ASSERT_TRUE(pool.Record(kCmdWrite, 8192, 1024, nullptr));  // a write of zeroes
  ASSERT_TRUE(pool.Record(kCmdWriteZeroes, 16384, 512 * 1024, nullptr));
  ASSERT_TRUE(pool.Record(kCmdTrim, 1 << 20, 1 << 20, nullptr));
  EXPECT_FALSE(pool.replaying());
  pool.Reconnected();
  EXPECT_TRUE(pool.replaying());
  std::vector<Sent> sent = Gather(pool);
  ASSERT_EQ(sent.size(), 4u);
  EXPECT_EQ(sent[0].command, kCmdWrite);
  EXPECT_EQ(sent[0].payload, data);
  EXPECT_EQ(sent[1].command, kCmdWrite);
  EXPECT_EQ(sent[1].offset, 8192u);
  EXPECT_EQ(sent[1].payload, std::vector<uint8_t>(1024, 0));
  EXPECT_EQ(sent[2].command, kCmdWriteZeroes);
  EXPECT_EQ(sent[2].length, 512u * 1024);
  EXPECT_EQ(sent[3].command, kCmdTrim);
  EXPECT_EQ(sent[3].offset, 1u << 20);
  EXPECT_FALSE(pool.has_replay_to_send());
  for (const Sent& request : sent) {
    EXPECT_TRUE(pool.replaying());
    Answer(pool, request);
  }
  EXPECT_FALSE(pool.replaying());
  EXPECT_FALSE(pool.TakeLoss());
  // Acknowledged again on the new connection: kept until a FLUSH there.
  EXPECT_EQ(pool.count(), 4u);
}

TEST(UnflushedWritesTest, OverlappingRequestsAreReplayedInOrderOneBatchAfterTheOther) {
  UnflushedWrites pool(kPool);
  const std::vector<uint8_t> older = Bytes(4096, 5);
  const std::vector<uint8_t> newer = Bytes(4096, 9);
  ASSERT_TRUE(pool.Record(kCmdWrite, 0, 4096, older.data()));
  ASSERT_TRUE(pool.Record(kCmdWrite, 8192, 4096, older.data()));
  ASSERT_TRUE(pool.Record(kCmdWrite, 2048, 4096, newer.data()));
  pool.Reconnected();
  std::vector<Sent> first = Gather(pool);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].offset, 0u);
  EXPECT_EQ(first[1].offset, 8192u);
  EXPECT_FALSE(pool.has_replay_to_send());
  Answer(pool, first[1]);
  EXPECT_TRUE(Gather(pool).empty());  // the older write at 0 is not answered yet
  Answer(pool, first[0]);
  EXPECT_TRUE(pool.has_replay_to_send());
  std::vector<Sent> second = Gather(pool);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].offset, 2048u);
  EXPECT_EQ(second[0].payload, newer);
  Answer(pool, second[0]);
  EXPECT_FALSE(pool.replaying());
}

TEST(UnflushedWritesTest, AStaleReplayCookieFindsNothing) {
  UnflushedWrites pool(kPool);
  ASSERT_TRUE(pool.Record(kCmdTrim, 0, 4096, nullptr));
  pool.Reconnected();
  std::vector<Sent> first = Gather(pool);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_NE(first[0].cookie & UnflushedWrites::kReplayCookieBit, 0u);
  pool.Reconnected();  // the connection broke during the replay: it starts over
  EXPECT_EQ(pool.FindReplay(first[0].cookie), nullptr);
  std::vector<Sent> again = Gather(pool);
  ASSERT_EQ(again.size(), 1u);
  Answer(pool, again[0]);
  EXPECT_FALSE(pool.replaying());
}

TEST(UnflushedWritesTest, AWriteLargerThanThePoolIsLostWhenAReconnectComesBeforeAFlush) {
  UnflushedWrites pool(kPool);
  const std::vector<uint8_t> large = Bytes(2 * kPool, 1);
  EXPECT_FALSE(pool.WantsFlush());
  EXPECT_FALSE(pool.Record(kCmdWrite, 0, 2 * kPool, large.data()));
  EXPECT_TRUE(pool.WantsFlush());
  pool.Reconnected();
  EXPECT_TRUE(pool.TakeLoss());
  EXPECT_FALSE(pool.TakeLoss());  // one FLUSH fails, not every later one
  EXPECT_FALSE(pool.WantsFlush());
}

TEST(UnflushedWritesTest, AFlushSentAfterADroppedWriteCoversIt) {
  UnflushedWrites pool(kPool);
  const std::vector<uint8_t> large = Bytes(2 * kPool, 1);
  const uint64_t before = pool.Mark();
  EXPECT_FALSE(pool.Record(kCmdWrite, 0, 2 * kPool, large.data()));
  pool.Flushed(before);  // sent before the write was acknowledged: does not cover it
  EXPECT_TRUE(pool.WantsFlush());
  pool.Flushed(pool.Mark());
  EXPECT_FALSE(pool.WantsFlush());
  pool.Reconnected();
  EXPECT_FALSE(pool.TakeLoss());
}

TEST(UnflushedWritesTest, AFailedReplayIsALoss) {
  UnflushedWrites pool(kPool);
  ASSERT_TRUE(pool.Record(kCmdWriteZeroes, 0, 4096, nullptr));
  pool.Reconnected();
  std::vector<Sent> sent = Gather(pool);
  ASSERT_EQ(sent.size(), 1u);
  Answer(pool, sent[0], /*EIO*/ 5);
  EXPECT_FALSE(pool.replaying());
  EXPECT_TRUE(pool.TakeLoss());
}

TEST(UnflushedWritesTest, PayloadsWrapAroundThePoolAndReplayIntact) {
  UnflushedWrites pool(kPool);
  const std::vector<uint8_t> a = Bytes(24 * 1024, 1);
  const std::vector<uint8_t> b = Bytes(24 * 1024, 2);
  const std::vector<uint8_t> c = Bytes(24 * 1024, 3);
  ASSERT_TRUE(pool.Record(kCmdWrite, 0, 24 * 1024, a.data()));
  const uint64_t after_a = pool.Mark();
  ASSERT_TRUE(pool.Record(kCmdWrite, 1 << 20, 24 * 1024, b.data()));
  // 16 KiB left at the end, 0 at the start: full for 24 KiB.
  EXPECT_FALSE(pool.Record(kCmdWrite, 2 << 20, 24 * 1024, c.data()));
  pool.Flushed(after_a);
  ASSERT_TRUE(pool.Record(kCmdWrite, 2 << 20, 24 * 1024, c.data()));  // at the start again
  EXPECT_EQ(pool.used_bytes(), 24u * 1024 + 16 * 1024 + 24 * 1024);
  pool.Reconnected();
  EXPECT_TRUE(pool.TakeLoss());  // the dropped one
  std::vector<Sent> sent = Gather(pool);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].payload, b);
  EXPECT_EQ(sent[1].payload, c);
  for (const Sent& request : sent) Answer(pool, request);
  pool.Flushed(pool.Mark());
  EXPECT_EQ(pool.count(), 0u);
  EXPECT_EQ(pool.used_bytes(), 0u);
}

TEST(UnflushedWritesTest, RequestsWithoutPayloadAreBoundedByTheEntryTable) {
  UnflushedWrites pool(kPool);  // 64 entries
  for (int i = 0; i < 64; ++i) ASSERT_TRUE(pool.Record(kCmdTrim, i * 4096ull, 4096, nullptr));
  EXPECT_TRUE(pool.WantsFlush());
  EXPECT_FALSE(pool.Record(kCmdTrim, 1 << 20, 4096, nullptr));
  EXPECT_EQ(pool.used_bytes(), 0u);
}

}  // namespace
}  // namespace blk::server::nbd
