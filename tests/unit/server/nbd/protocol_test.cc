#include "server/nbd/protocol.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace blk::server::nbd {
namespace {

// Requests awaiting replies, by cookie, as the backend keeps them.
class FakeTargets : public ReplyTargets {
 public:
  ReplyTarget& Add(uint64_t cookie, uint16_t command, uint64_t offset, uint32_t length) {
    buffers_[cookie].assign(length, 0xEE);
    ReplyTarget& t = targets_[cookie];
    t = ReplyTarget{};
    t.command = command;
    t.offset = offset;
    t.length = length;
    t.buffer = buffers_[cookie].data();
    return t;
  }
  ReplyTarget* Find(uint64_t cookie) override {
    auto it = targets_.find(cookie);
    return it == targets_.end() ? nullptr : &it->second;
  }
  void Complete(uint64_t cookie) override {
    completed.push_back(cookie);
    errors.push_back(targets_[cookie].nbd_error);
    targets_.erase(cookie);
  }
  std::vector<uint8_t>& buffer(uint64_t cookie) { return buffers_[cookie]; }

  std::vector<uint64_t> completed;
  std::vector<uint32_t> errors;

 private:
  std::map<uint64_t, ReplyTarget> targets_;
  std::map<uint64_t, std::vector<uint8_t>> buffers_;
};

std::vector<uint8_t> SimpleReply(uint64_t cookie, uint32_t error) {
  std::vector<uint8_t> out(16);
  PutU32(out.data(), kSimpleReplyMagic);
  PutU32(out.data() + 4, error);
  PutU64(out.data() + 8, cookie);
  return out;
}

std::vector<uint8_t> Chunk(uint64_t cookie, uint16_t type, uint16_t flags,
                           const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> out(20);
  PutU32(out.data(), kStructuredReplyMagic);
  PutU16(out.data() + 4, flags);
  PutU16(out.data() + 6, type);
  PutU64(out.data() + 8, cookie);
  PutU32(out.data() + 16, static_cast<uint32_t>(payload.size()));
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

std::vector<uint8_t> DataPayload(uint64_t offset, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out(8);
  PutU64(out.data(), offset);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::vector<uint8_t> HolePayload(uint64_t offset, uint32_t length) {
  std::vector<uint8_t> out(12);
  PutU64(out.data(), offset);
  PutU32(out.data() + 8, length);
  return out;
}

std::vector<uint8_t> ErrorPayload(uint32_t error, const std::string& message) {
  std::vector<uint8_t> out(6);
  PutU32(out.data(), error);
  PutU16(out.data() + 4, static_cast<uint16_t>(message.size()));
  out.insert(out.end(), message.begin(), message.end());
  return out;
}

std::vector<uint8_t> Concat(std::initializer_list<std::vector<uint8_t>> parts) {
  std::vector<uint8_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// Feeds the bytes one at a time: the parser must not care how the socket splits them.
absl::Status FeedBytewise(ReplyParser& parser, const std::vector<uint8_t>& bytes,
                          ReplyTargets& targets) {
  for (uint8_t b : bytes) {
    absl::Status s = parser.Feed(&b, 1, targets);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

TEST(NbdProtocolTest, RequestHeaderIsBigEndianWithMagic) {
  uint8_t out[kRequestHeaderBytes];
  EncodeRequest(out, kCmdFlagFua, kCmdWrite, 0x0102030405060708, 0x1000, 512);
  EXPECT_EQ(GetU32(out), 0x25609513u);
  EXPECT_EQ(GetU16(out + 4), 1);
  EXPECT_EQ(GetU16(out + 6), 1);
  EXPECT_EQ(out[8], 0x01);
  EXPECT_EQ(out[15], 0x08);
  EXPECT_EQ(GetU64(out + 16), 0x1000u);
  EXPECT_EQ(GetU32(out + 24), 512u);
}

TEST(NbdProtocolTest, GoOptionAsksForTheBlockSize) {
  std::string data = GoOptionData("disk");
  ASSERT_EQ(data.size(), 4u + 4 + 4);
  const auto* p = reinterpret_cast<const uint8_t*>(data.data());
  EXPECT_EQ(GetU32(p), 4u);
  EXPECT_EQ(data.substr(4, 4), "disk");
  EXPECT_EQ(GetU16(p + 8), 1);
  EXPECT_EQ(GetU16(p + 10), kInfoBlockSize);
  std::vector<uint8_t> option = EncodeOption(kOptGo, data);
  EXPECT_EQ(GetU64(option.data()), kOptMagic);
  EXPECT_EQ(GetU32(option.data() + 8), kOptGo);
  EXPECT_EQ(GetU32(option.data() + 12), data.size());
}

TEST(NbdProtocolTest, InfoRepliesFillTheExportInfo) {
  ExportInfo info;
  uint8_t exp[12];
  PutU16(exp, kInfoExport);
  PutU64(exp + 2, 1 << 20);
  PutU16(exp + 10, kFlagHasFlags | kFlagReadOnly | kFlagCanMultiConn);
  ASSERT_TRUE(ApplyInfoReply(exp, sizeof(exp), &info).ok());
  uint8_t bs[14];
  PutU16(bs, kInfoBlockSize);
  PutU32(bs + 2, 512);
  PutU32(bs + 6, 4096);
  PutU32(bs + 10, 65536);
  ASSERT_TRUE(ApplyInfoReply(bs, sizeof(bs), &info).ok());
  EXPECT_EQ(info.size, 1u << 20);
  EXPECT_TRUE(info.read_only());
  EXPECT_TRUE(info.can_multi_conn());
  EXPECT_FALSE(info.can_trim());
  EXPECT_EQ(info.min_block, 512u);
  EXPECT_EQ(info.max_payload, 65536u);
  EXPECT_TRUE(ValidateBlockSizes(info).ok());
  EXPECT_FALSE(ApplyInfoReply(exp, 11, &info).ok());
  info.min_block = 3;
  EXPECT_FALSE(ValidateBlockSizes(info).ok());
}

TEST(NbdProtocolTest, OptionReplyWithWrongMagicIsRefused) {
  uint8_t raw[kOptionReplyHeaderBytes] = {};
  EXPECT_FALSE(ParseOptionReplyHeader(raw).ok());
  PutU64(raw, kOptReplyMagic);
  PutU32(raw + 8, kOptGo);
  PutU32(raw + 12, kRepAck);
  absl::StatusOr<OptionReplyHeader> h = ParseOptionReplyHeader(raw);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->option, kOptGo);
  EXPECT_EQ(h->type, kRepAck);
}

TEST(NbdProtocolTest, NbdErrorsMapToErrno) {
  EXPECT_EQ(ErrnoOfNbdError(1), EPERM);
  EXPECT_EQ(ErrnoOfNbdError(5), EIO);
  EXPECT_EQ(ErrnoOfNbdError(28), ENOSPC);
  EXPECT_EQ(ErrnoOfNbdError(95), EOPNOTSUPP);
  EXPECT_EQ(ErrnoOfNbdError(12345), EIO);
}

TEST(NbdReplyParserTest, SimpleReadReplyDeliversDataInAnyPieces) {
  FakeTargets targets;
  targets.Add(7, kCmdRead, 4096, 8);
  ReplyParser parser(false);
  std::vector<uint8_t> bytes = Concat({SimpleReply(7, 0), {1, 2, 3, 4, 5, 6, 7, 8}});
  ASSERT_TRUE(FeedBytewise(parser, bytes, targets).ok());
  ASSERT_THAT(targets.completed, testing::ElementsAre(7u));
  EXPECT_THAT(targets.errors, testing::ElementsAre(0u));
}

TEST(NbdReplyParserTest, SimpleReplyCarriesTheServerError) {
  FakeTargets targets;
  targets.Add(1, kCmdWrite, 0, 512);
  targets.Add(2, kCmdRead, 0, 512);
  ReplyParser parser(false);
  std::vector<uint8_t> bytes = Concat({SimpleReply(1, 28), SimpleReply(2, 5)});
  ASSERT_TRUE(parser.Feed(bytes.data(), bytes.size(), targets).ok());
  EXPECT_THAT(targets.completed, testing::ElementsAre(1u, 2u));
  EXPECT_THAT(targets.errors, testing::ElementsAre(28u, 5u));
}

TEST(NbdReplyParserTest, StructuredReadAssemblesDataAndHolesOutOfOrder) {
  FakeTargets targets;
  targets.Add(3, kCmdRead, 1000, 12);
  ReplyParser parser(true);
  std::vector<uint8_t> bytes =
      Concat({Chunk(3, kChunkOffsetData, 0, DataPayload(1008, {9, 9, 9, 9})),
              Chunk(3, kChunkOffsetHole, 0, HolePayload(1004, 4)),
              Chunk(3, kChunkOffsetData, kReplyFlagDone, DataPayload(1000, {1, 2, 3, 4}))});
  ASSERT_TRUE(FeedBytewise(parser, bytes, targets).ok());
  ASSERT_THAT(targets.completed, testing::ElementsAre(3u));
  EXPECT_THAT(targets.buffer(3), testing::ElementsAre(1, 2, 3, 4, 0, 0, 0, 0, 9, 9, 9, 9));
}

TEST(NbdReplyParserTest, StructuredErrorChunksEndTheRequestWithTheirError) {
  FakeTargets targets;
  targets.Add(4, kCmdRead, 0, 8);
  targets.Add(5, kCmdWrite, 0, 8);
  ReplyParser parser(true);
  std::vector<uint8_t> offset(8);
  PutU64(offset.data(), 4);
  std::vector<uint8_t> error_offset = ErrorPayload(5, "bad sector");
  error_offset.insert(error_offset.end(), offset.begin(), offset.end());
  std::vector<uint8_t> bytes = Concat(
      {Chunk(4, kChunkErrorOffset, 0, error_offset), Chunk(4, kChunkNone, kReplyFlagDone, {}),
       Chunk(5, kChunkError, kReplyFlagDone, ErrorPayload(28, "full"))});
  ASSERT_TRUE(parser.Feed(bytes.data(), bytes.size(), targets).ok());
  EXPECT_THAT(targets.completed, testing::ElementsAre(4u, 5u));
  EXPECT_THAT(targets.errors, testing::ElementsAre(5u, 28u));
}

TEST(NbdReplyParserTest, StructuredModeStillAcceptsSimpleRepliesWithoutData) {
  FakeTargets targets;
  targets.Add(6, kCmdFlush, 0, 0);
  ReplyParser parser(true);
  std::vector<uint8_t> bytes = SimpleReply(6, 0);
  ASSERT_TRUE(parser.Feed(bytes.data(), bytes.size(), targets).ok());
  EXPECT_THAT(targets.completed, testing::ElementsAre(6u));
}

TEST(NbdReplyParserTest, StructuredReadAcceptsChunksInReverseAndScatteredOrder) {
  FakeTargets targets;
  targets.Add(3, kCmdRead, 1000, 8);
  targets.Add(4, kCmdRead, 2000, 6);
  ReplyParser parser(true);
  // Chunks of two replies interleave; each reply's chunks come middle, end, start.
  std::vector<uint8_t> bytes =
      Concat({Chunk(3, kChunkOffsetData, 0, DataPayload(1004, {5, 6})),
              Chunk(4, kChunkOffsetHole, 0, HolePayload(2002, 2)),
              Chunk(3, kChunkOffsetHole, 0, HolePayload(1006, 2)),
              Chunk(4, kChunkOffsetData, 0, DataPayload(2004, {7, 8})),
              Chunk(3, kChunkOffsetData, kReplyFlagDone, DataPayload(1000, {1, 2, 3, 4})),
              Chunk(4, kChunkOffsetData, kReplyFlagDone, DataPayload(2000, {1, 2}))});
  ASSERT_TRUE(FeedBytewise(parser, bytes, targets).ok());
  ASSERT_THAT(targets.completed, testing::ElementsAre(3u, 4u));
  EXPECT_THAT(targets.buffer(3), testing::ElementsAre(1, 2, 3, 4, 5, 6, 0, 0));
  EXPECT_THAT(targets.buffer(4), testing::ElementsAre(1, 2, 0, 0, 7, 8));
}

TEST(NbdReplyParserTest, StructuredReadAcceptsAsManySeparatePiecesAsTheBoundAllows) {
  // Every other byte first (kMaxRanges pieces with gaps between), then the gaps.
  const uint32_t length = 2 * ReadCoverage::kMaxRanges;
  FakeTargets targets;
  targets.Add(5, kCmdRead, 0, length);
  ReplyParser parser(true);
  std::vector<uint8_t> bytes;
  for (uint32_t i = 0; i < length; i += 2) {
    bytes = Concat({bytes, Chunk(5, kChunkOffsetData, 0, DataPayload(i, {uint8_t(i)}))});
  }
  for (uint32_t i = 1; i < length; i += 2) {
    const uint16_t flags = i + 1 == length ? kReplyFlagDone : 0;
    bytes = Concat({bytes, Chunk(5, kChunkOffsetData, flags, DataPayload(i, {uint8_t(i)}))});
  }
  ASSERT_TRUE(parser.Feed(bytes.data(), bytes.size(), targets).ok());
  ASSERT_THAT(targets.completed, testing::ElementsAre(5u));
  for (uint32_t i = 0; i < length; ++i) EXPECT_EQ(targets.buffer(5)[i], i);
}

struct BadReply {
  const char* name;
  std::vector<uint8_t> bytes;
  bool structured;
};

class NbdReplyParserRefusesTest : public testing::TestWithParam<int> {};

std::vector<BadReply> BadReplies() {
  std::vector<uint8_t> garbage = {0xde, 0xad, 0xbe, 0xef};
  return {
      {"garbage magic", garbage, true},
      {"unknown cookie", SimpleReply(99, 0), false},
      {"structured magic without negotiation", Chunk(1, kChunkNone, kReplyFlagDone, {}), false},
      {"data chunk past the request",
       Chunk(1, kChunkOffsetData, kReplyFlagDone, DataPayload(4, {1, 2, 3, 4, 5, 6, 7, 8})), true},
      {"data chunk before the request",
       Chunk(1, kChunkOffsetData, kReplyFlagDone, DataPayload(0, {1})), true},
      {"hole past the request", Chunk(1, kChunkOffsetHole, kReplyFlagDone, HolePayload(100, 9)),
       true},
      {"read done without all data",
       Chunk(1, kChunkOffsetData, kReplyFlagDone, DataPayload(100, {1, 2})), true},
      {"overlapping chunks",
       Concat({Chunk(1, kChunkOffsetHole, 0, HolePayload(100, 8)),
               Chunk(1, kChunkOffsetHole, 0, HolePayload(100, 8))}),
       true},
      // The lengths add up to the request's, but one half is sent twice and the other never.
      {"two data chunks over the same half",
       Concat({Chunk(1, kChunkOffsetData, 0, DataPayload(100, {1, 2, 3, 4})),
               Chunk(1, kChunkOffsetData, kReplyFlagDone, DataPayload(100, {1, 2, 3, 4}))}),
       true},
      {"data and hole overlapping",
       Concat({Chunk(1, kChunkOffsetData, 0, DataPayload(100, {1, 2, 3, 4, 5, 6})),
               Chunk(1, kChunkOffsetHole, kReplyFlagDone, HolePayload(104, 2))}),
       true},
      {"hole inside earlier data",
       Concat({Chunk(1, kChunkOffsetData, 0, DataPayload(102, {1, 2, 3, 4, 5, 6})),
               Chunk(1, kChunkOffsetHole, kReplyFlagDone, HolePayload(103, 2))}),
       true},
      {"data chunk spanning two earlier ones",
       Concat({Chunk(1, kChunkOffsetHole, 0, HolePayload(100, 2)),
               Chunk(1, kChunkOffsetHole, 0, HolePayload(106, 2)),
               Chunk(1, kChunkOffsetData, kReplyFlagDone, DataPayload(101, {1, 2, 3, 4, 5, 6}))}),
       true},
      {"read done with a gap in the middle",
       Concat({Chunk(1, kChunkOffsetData, 0, DataPayload(100, {1, 2, 3})),
               Chunk(1, kChunkOffsetHole, kReplyFlagDone, HolePayload(105, 3))}),
       true},
      {"unknown non-error chunk", Chunk(1, 77, kReplyFlagDone, {}), true},
      {"error chunk with error 0", Chunk(1, kChunkError, kReplyFlagDone, ErrorPayload(0, "")),
       true},
      {"error chunk message longer than chunk",
       [] {
         std::vector<uint8_t> p = ErrorPayload(5, "abc");
         PutU16(p.data() + 4, 50);
         return Chunk(1, kChunkError, kReplyFlagDone, p);
       }(),
       true},
      {"too-long error chunk",
       Chunk(1, kChunkError, kReplyFlagDone, ErrorPayload(5, std::string(5000, 'x'))), true},
      {"none chunk with payload", Chunk(1, kChunkNone, kReplyFlagDone, {1}), true},
      {"simple reply with data to a read under structured replies", SimpleReply(1, 0), true},
  };
}

TEST_P(NbdReplyParserRefusesTest, MalformedReply) {
  BadReply bad = BadReplies()[GetParam()];
  FakeTargets targets;
  targets.Add(1, kCmdRead, 100, 8);
  ReplyParser parser(bad.structured);
  absl::Status status = parser.Feed(bad.bytes.data(), bad.bytes.size(), targets);
  EXPECT_FALSE(status.ok()) << bad.name;
  EXPECT_TRUE(targets.completed.empty()) << bad.name;
}

INSTANTIATE_TEST_SUITE_P(All, NbdReplyParserRefusesTest,
                         testing::Range(0, static_cast<int>(BadReplies().size())));

TEST(NbdReplyParserTest, MoreSeparatePiecesThanTrackedIsRefused) {
  // One byte at every other offset: the pieces cannot merge, and one more than the bound is
  // refused before its bytes are written.
  const uint32_t length = 2 * ReadCoverage::kMaxRanges + 2;
  FakeTargets targets;
  targets.Add(1, kCmdRead, 0, length);
  ReplyParser parser(true);
  std::vector<uint8_t> bytes;
  for (uint32_t i = 0; i < ReadCoverage::kMaxRanges; ++i) {
    bytes = Concat({bytes, Chunk(1, kChunkOffsetHole, 0, HolePayload(2 * i, 1))});
  }
  ASSERT_TRUE(parser.Feed(bytes.data(), bytes.size(), targets).ok());
  bytes = Chunk(1, kChunkOffsetData, 0, DataPayload(2 * ReadCoverage::kMaxRanges, {7}));
  absl::Status status = parser.Feed(bytes.data(), bytes.size(), targets);
  EXPECT_THAT(status.message(), testing::HasSubstr("separate pieces"));
  EXPECT_EQ(targets.buffer(1)[2 * ReadCoverage::kMaxRanges], 0xEE);
  EXPECT_TRUE(targets.completed.empty());
}

// Bytes whose value tells their place: a payload landing at the wrong offset reads back wrong.
std::vector<uint8_t> Pattern(uint32_t length, uint32_t seed) {
  std::vector<uint8_t> out(length);
  for (uint32_t i = 0; i < length; ++i) out[i] = static_cast<uint8_t>((i * 7 + i / 251 + seed));
  return out;
}

// Receives `wire` as the backend does, in pieces of the sizes in `pieces` (cycled): inside a read
// payload of at least `direct_min` bytes straight to PendingPayload().dst (what a RECV into the
// tag's buffer does), every other byte through Feed. Returns how many pieces went in place.
absl::StatusOr<int> ReceiveLikeTheBackend(ReplyParser& parser, const std::vector<uint8_t>& wire,
                                          const std::vector<size_t>& pieces, uint32_t direct_min,
                                          ReplyTargets& targets) {
  size_t at = 0;
  int direct = 0;
  for (size_t i = 0; at < wire.size(); ++i) {
    size_t n = std::min(pieces[i % pieces.size()], wire.size() - at);
    const ReplyParser::Payload payload = parser.PendingPayload();
    absl::Status status;
    if (payload.length >= direct_min && payload.length > 0) {
      n = std::min<size_t>(n, payload.length);
      std::memcpy(payload.dst, wire.data() + at, n);
      status = parser.PayloadArrived(n, targets);
      ++direct;
    } else {
      status = parser.Feed(wire.data() + at, n, targets);
    }
    if (!status.ok()) return status;
    at += n;
  }
  return direct;
}

TEST(NbdReplyParserTest, PendingPayloadIsEmptyOutsideReadData) {
  FakeTargets targets;
  targets.Add(1, kCmdRead, 0, 4096);
  targets.Add(2, kCmdRead, 0, 4096);
  ReplyParser parser(true);
  EXPECT_EQ(parser.PendingPayload().length, 0u);
  // Half a header, a hole chunk's payload, the 8-byte offset of a data chunk: no read data yet.
  std::vector<uint8_t> hole = Chunk(1, kChunkOffsetHole, kReplyFlagDone, HolePayload(0, 4096));
  ASSERT_TRUE(parser.Feed(hole.data(), 10, targets).ok());
  EXPECT_EQ(parser.PendingPayload().length, 0u);
  ASSERT_TRUE(parser.Feed(hole.data() + 10, hole.size() - 11, targets).ok());
  EXPECT_EQ(parser.PendingPayload().length, 0u);
  ASSERT_TRUE(parser.Feed(hole.data() + hole.size() - 1, 1, targets).ok());
  EXPECT_THAT(targets.completed, testing::ElementsAre(1u));
  std::vector<uint8_t> data =
      Chunk(2, kChunkOffsetData, kReplyFlagDone, DataPayload(0, Pattern(4096, 1)));
  const size_t before_data = kStructuredReplyHeaderBytes + 8;
  ASSERT_TRUE(parser.Feed(data.data(), before_data - 1, targets).ok());
  EXPECT_EQ(parser.PendingPayload().length, 0u);
  EXPECT_FALSE(parser.PayloadArrived(1, targets).ok());
  ASSERT_TRUE(parser.Feed(data.data() + before_data - 1, 1, targets).ok());
  EXPECT_EQ(parser.PendingPayload().length, 4096u);
  EXPECT_EQ(parser.PendingPayload().dst, targets.buffer(2).data());
}

TEST(NbdReplyParserTest, SimpleReadPayloadArrivesInPlaceOverManyReceives) {
  const uint32_t length = 128 * 1024;
  FakeTargets targets;
  targets.Add(7, kCmdRead, 1 << 20, length);
  targets.Add(8, kCmdWrite, 0, 512);
  ReplyParser parser(false);
  const std::vector<uint8_t> data = Pattern(length, 3);
  // The header and the payload's first 100 bytes come in one receive, through Feed.
  std::vector<uint8_t> first = Concat({SimpleReply(7, 0), data});
  first.resize(kSimpleReplyHeaderBytes + 100);
  ASSERT_TRUE(parser.Feed(first.data(), first.size(), targets).ok());
  size_t at = 100;
  const size_t pieces[] = {1, 4095, 333, 16384, 7, 65536};
  for (size_t i = 0; at < length; ++i) {
    const ReplyParser::Payload payload = parser.PendingPayload();
    ASSERT_EQ(payload.cookie, 7u);
    ASSERT_EQ(payload.dst, targets.buffer(7).data() + at);
    ASSERT_EQ(payload.length, length - at);
    EXPECT_TRUE(targets.completed.empty());
    const size_t n = std::min<size_t>(pieces[i % 6], payload.length);
    std::memcpy(payload.dst, data.data() + at, n);
    ASSERT_TRUE(parser.PayloadArrived(n, targets).ok());
    at += n;
  }
  ASSERT_THAT(targets.completed, testing::ElementsAre(7u));
  EXPECT_EQ(parser.PendingPayload().length, 0u);
  EXPECT_EQ(targets.buffer(7), data);
  // Back at a reply header: the next reply parses from Feed as usual.
  std::vector<uint8_t> next = SimpleReply(8, 0);
  ASSERT_TRUE(parser.Feed(next.data(), next.size(), targets).ok());
  EXPECT_THAT(targets.completed, testing::ElementsAre(7u, 8u));
}

TEST(NbdReplyParserTest, StructuredReadInSeveralDataChunksArrivesInPlace) {
  // A 96 KiB read at 1 MiB answered with its last third, a hole, then its first third, and two
  // other replies after it, received in odd pieces; large payloads go in place.
  const uint32_t third = 32 * 1024;
  const std::vector<uint8_t> tail = Pattern(third, 11);
  const std::vector<uint8_t> head = Pattern(third, 29);
  const std::vector<uint8_t> small = Pattern(4096, 5);
  const std::vector<uint8_t> wire =
      Concat({Chunk(3, kChunkOffsetData, 0, DataPayload((1 << 20) + 2 * third, tail)),
              Chunk(3, kChunkOffsetHole, 0, HolePayload((1 << 20) + third, third)),
              Chunk(3, kChunkOffsetData, kReplyFlagDone, DataPayload(1 << 20, head)),
              Chunk(4, kChunkOffsetData, kReplyFlagDone, DataPayload(0, small)),
              Chunk(5, kChunkNone, kReplyFlagDone, {})});
  for (const std::vector<size_t>& pieces :
       std::vector<std::vector<size_t>>{{1}, {3, 5000, 17}, {20000}, {wire.size()}}) {
    FakeTargets targets;
    targets.Add(3, kCmdRead, 1 << 20, 3 * third);
    targets.Add(4, kCmdRead, 0, 4096);
    targets.Add(5, kCmdFlush, 0, 0);
    ReplyParser parser(true);
    absl::StatusOr<int> direct = ReceiveLikeTheBackend(parser, wire, pieces, 1024, targets);
    ASSERT_TRUE(direct.ok()) << direct.status();
    // All of it in one receive goes through Feed, as it should: no payload is pending then.
    if (pieces[0] < wire.size()) {
      EXPECT_GT(*direct, 0) << "pieces of " << pieces[0];
    }
    ASSERT_THAT(targets.completed, testing::ElementsAre(3u, 4u, 5u));
    EXPECT_THAT(targets.errors, testing::ElementsAre(0u, 0u, 0u));
    const std::vector<uint8_t>& got = targets.buffer(3);
    EXPECT_TRUE(std::equal(head.begin(), head.end(), got.begin())) << "first third";
    EXPECT_TRUE(std::all_of(got.begin() + third, got.begin() + 2 * third, [](uint8_t b) {
      return b == 0;
    })) << "the hole";
    EXPECT_TRUE(std::equal(tail.begin(), tail.end(), got.begin() + 2 * third)) << "last third";
    EXPECT_EQ(targets.buffer(4), small);
  }
}

TEST(NbdReplyParserTest, PayloadArrivedBeyondThePendingBytesIsRefused) {
  FakeTargets targets;
  targets.Add(1, kCmdRead, 0, 64);
  targets.Add(2, kCmdRead, 64, 64);
  ReplyParser parser(false);
  std::vector<uint8_t> header = SimpleReply(1, 0);
  ASSERT_TRUE(parser.Feed(header.data(), header.size(), targets).ok());
  ASSERT_EQ(parser.PendingPayload().length, 64u);
  absl::Status status = parser.PayloadArrived(65, targets);
  EXPECT_THAT(status.message(), testing::HasSubstr("65 bytes of read payload arrived where 64"));
  EXPECT_FALSE(parser.PayloadArrived(0, targets).ok());
  // Nothing moved: the 64 bytes are still what is pending.
  ASSERT_EQ(parser.PendingPayload().length, 64u);
  ASSERT_TRUE(parser.PayloadArrived(64, targets).ok());
  EXPECT_THAT(targets.completed, testing::ElementsAre(1u));
  // A reset parser (a new connection) has no payload pending.
  header = SimpleReply(2, 0);
  ASSERT_TRUE(parser.Feed(header.data(), header.size(), targets).ok());
  ASSERT_EQ(parser.PendingPayload().length, 64u);
  parser.Reset(false);
  EXPECT_EQ(parser.PendingPayload().length, 0u);
  EXPECT_FALSE(parser.PayloadArrived(1, targets).ok());
}

}  // namespace
}  // namespace blk::server::nbd
