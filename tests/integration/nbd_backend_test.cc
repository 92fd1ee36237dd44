// The NBD backend against real nbdkit processes (and a lying fake server), driven directly
// through its ring: no ublk device needed.
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <random>
#include <thread>

#include "common/unique_fd.h"
#include "gtest/gtest.h"
#include "server/nbd/storage.h"
#include "server/ublk/abi.h"
#include "tests/integration/nbd_fake_server.h"
#include "tests/integration/nbd_test_support.h"

namespace blk::server {
namespace {

using testing_nbd::Driver;
using testing_nbd::FakeNbdServer;
using testing_nbd::Lie;
using testing_nbd::NbdKit;

constexpr uint64_t kExportBytes = 64ull << 20;
constexpr uint16_t kDepth = 32;

class NbdBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir_template[] = "/tmp/nbd-test.XXXXXX";
    ASSERT_NE(::mkdtemp(dir_template), nullptr);
    dir_ = dir_template;
  }
  void TearDown() override {
    if (driver_) {
      EXPECT_EQ(driver_->unexpected_completions, 0);
    }
    driver_.reset();
    storage_.reset();
    kit_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::string Socket() const { return dir_ + "/nbd.sock"; }

  void StartKit(std::vector<std::string> args, bool tcp = false) {
    kit_ = std::make_unique<NbdKit>(tcp ? "" : Socket(), tcp ? testing_nbd::FreeTcpPort() : 0,
                                    std::move(args));
    ASSERT_TRUE(kit_->Start()) << "nbdkit did not start";
  }

  // Opens the storage and one queue's backend on `uri`.
  absl::Status Open(const std::string& uri, uint32_t io_timeout_ms = 30000,
                    uint64_t size = kExportBytes, bool read_only = false, uint16_t queues = 1,
                    OpenPurpose purpose = OpenPurpose::kCreate) {
    DeviceConfig config;
    config.size_bytes = size;
    config.read_only = read_only;
    config.queue_depth = kDepth;
    config.queues = queues;
    NbdBackendConfig backend;
    backend.uri = uri;
    backend.io_timeout_ms = io_timeout_ms;
    backend.connect_timeout_ms = connect_timeout_ms_;
    backend.stats = stats_;
    absl::StatusOr<std::unique_ptr<nbd::Storage>> storage =
        nbd::Storage::Open(backend, config, purpose);
    if (!storage.ok()) return storage.status();
    storage_ = std::move(*storage);
    absl::StatusOr<std::unique_ptr<Backend>> queue_backend = storage_->NewQueueBackend(kDepth);
    if (!queue_backend.ok()) return queue_backend.status();
    driver_ = std::make_unique<Driver>(std::move(*queue_backend), kDepth);
    return driver_->attach_status();
  }

  // An nbd-server configuration serving a 16 MiB image as export "disk" on Socket(), with
  // `export_options` (lines) added to the export; returns its path.
  std::string NbdServerConfig(const std::string& export_options) {
    const std::string image = dir_ + "/nbd-server.img";
    { std::ofstream create(image); }
    std::filesystem::resize_file(image, 16 << 20);
    std::string config = dir_ + "/nbd-server.conf";
    std::ofstream(config) << "[generic]\n  user = root\n  group = root\n  unixsock = " << Socket()
                          << "\n[disk]\n  exportname = " << image << "\n"
                          << export_options;
    return config;
  }

  static BlockIo Io(uint8_t op, uint64_t offset, uint32_t length, uint32_t flags = 0) {
    BlockIo io;
    io.op = op;
    io.offset = offset;
    io.length = length;
    io.flags = flags;
    return io;
  }

  // Writes random data at random sector-aligned places, kDepth at a time (the per-batch ranges do
  // not overlap), mirroring it in model_; then reads random ranges back and compares.
  void RandomWriteReadBack(uint64_t span, int rounds, uint32_t max_io = 256 * 1024,
                           uint32_t extra_flags = 0) {
    if (model_.size() < span) model_.resize(span, 0);
    for (int round = 0; round < rounds; ++round) {
      std::vector<BlockIo> ios;
      const uint64_t slot = span / kDepth;
      for (uint16_t tag = 0; tag < kDepth; ++tag) {
        const uint32_t length =
            512 * static_cast<uint32_t>(1 + rng_() % std::min<uint64_t>(max_io, slot) / 512);
        const uint64_t room = (slot - length) / 512;
        const uint64_t offset = tag * slot + 512 * (room ? rng_() % room : 0);
        ios.push_back(Io(abi::kIoOpWrite, offset, length, extra_flags));
        uint8_t* buffer = driver_->Buffer(tag);
        for (uint32_t i = 0; i < length; ++i) buffer[i] = static_cast<uint8_t>(rng_());
        std::memcpy(model_.data() + offset, buffer, length);
      }
      std::vector<int32_t> results = driver_->Run(ios);
      for (uint16_t tag = 0; tag < kDepth; ++tag) {
        ASSERT_EQ(results[tag], static_cast<int32_t>(ios[tag].length)) << "write tag " << tag;
      }
    }
    ExpectReadsMatchModel(span, 4);
  }

  // Writes FakeNbdServer::PatternByte data over the first `span` bytes, 1 MiB at a time.
  void WritePattern(uint64_t span) {
    for (uint64_t at = 0; at < span; at += Driver::kMaxIoBytes) {
      uint8_t* b = driver_->Buffer(0);
      for (uint32_t i = 0; i < Driver::kMaxIoBytes; ++i) b[i] = FakeNbdServer::PatternByte(at + i);
      ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpWrite, at, Driver::kMaxIoBytes)),
                static_cast<int32_t>(Driver::kMaxIoBytes));
    }
  }

  // The first offset in tag's buffer where the read of [offset, offset + length) of PatternByte
  // data is wrong, or -1.
  int64_t FirstWrongByte(uint16_t tag, uint64_t offset, uint32_t length) {
    const uint8_t* b = driver_->Buffer(tag);
    for (uint32_t i = 0; i < length; ++i) {
      if (b[i] != FakeNbdServer::PatternByte(offset + i)) return i;
    }
    return -1;
  }

  void ExpectReadsMatchModel(uint64_t span, int rounds) {
    for (int round = 0; round < rounds; ++round) {
      std::vector<BlockIo> ios;
      for (uint16_t tag = 0; tag < kDepth; ++tag) {
        const uint32_t length = 512 * static_cast<uint32_t>(1 + rng_() % 512);
        const uint64_t offset = 512 * (rng_() % ((span - length) / 512));
        ios.push_back(Io(abi::kIoOpRead, offset, length));
      }
      std::vector<int32_t> results = driver_->Run(ios);
      for (uint16_t tag = 0; tag < kDepth; ++tag) {
        ASSERT_EQ(results[tag], static_cast<int32_t>(ios[tag].length)) << "read tag " << tag;
        ASSERT_EQ(
            std::memcmp(driver_->Buffer(tag), model_.data() + ios[tag].offset, ios[tag].length), 0)
            << "data differs at " << ios[tag].offset << "+" << ios[tag].length;
      }
    }
  }

  // Writes and reads back under load while `restart` (true when it worked) stops the server and
  // brings it back, from another thread as an admin would, once half the first batch completed: a
  // graceful stop only ends once the client let go, so the I/O must go on meanwhile. Nothing may
  // fail, and every byte must read back.
  void RestartUnderLoad(const std::function<bool()>& restart, uint64_t span = 16 << 20) {
    std::promise<void> half_done;
    std::future<void> half = half_done.get_future();
    int completions = 0;
    driver_->on_result = [&](uint16_t, int32_t) {
      if (++completions == kDepth / 2) half_done.set_value();
    };
    std::atomic<bool> restarted{false};
    std::atomic<bool> admin_done{false};
    // The admin thread lives until the end: nbdkit --exit-with-parent ends with the thread that
    // started it.
    std::promise<void> finished;
    std::thread admin([&, until = finished.get_future()] {
      half.wait();
      restarted = restart();
      admin_done = true;
      until.wait();
    });
    RandomWriteReadBack(span, 3);
    driver_->on_result = nullptr;
    if (completions < kDepth / 2) half_done.set_value();  // failed early: let the admin go
    // The restart may end after the last batch: the connection is served until it did.
    while (!admin_done) driver_->Pump(std::chrono::milliseconds(50));
    if (restarted) ExpectReadsMatchModel(span, 2);
    finished.set_value();
    admin.join();
    ASSERT_TRUE(restarted) << "the server was not restarted";
    EXPECT_GE(storage_->stats()->reconnects.load(), 1u);
    EXPECT_EQ(storage_->stats()->timeouts.load(), 0u);
    EXPECT_EQ(storage_->stats()->server_errors.load(), 0u);
  }

  // A 16 MiB image file in the test directory (data that outlives a server restart).
  std::string MakeImage(const std::string& name) {
    std::string image = dir_ + "/" + name;
    { std::ofstream create(image); }
    std::filesystem::resize_file(image, 16 << 20);
    return image;
  }

  bool RangeIsZero(uint16_t tag, uint32_t length) {
    const uint8_t* b = driver_->Buffer(tag);
    for (uint32_t i = 0; i < length; ++i) {
      if (b[i] != 0) return false;
    }
    return true;
  }

  std::string dir_;
  std::unique_ptr<NbdKit> kit_;
  std::unique_ptr<nbd::Storage> storage_;
  std::unique_ptr<Driver> driver_;
  std::shared_ptr<nbd::Stats> stats_ = std::make_shared<nbd::Stats>();
  uint32_t connect_timeout_ms_ = kDefaultNbdConnectTimeoutMs;
  std::vector<uint8_t> model_;
  std::mt19937_64 rng_{12345};
};

TEST_F(NbdBackendTest, RandomWritesReadBackOverUnixSocket) {
  StartKit({"memory", "64M"});
  ASSERT_TRUE(Open(kit_->uri()).ok());
  EXPECT_TRUE(storage_->export_info()->structured_replies);
  RandomWriteReadBack(kExportBytes, 4);
}

TEST_F(NbdBackendTest, RandomWritesReadBackOverLoopbackTcp) {
  StartKit({"memory", "64M"}, /*tcp=*/true);
  ASSERT_TRUE(Open(kit_->uri()).ok());
  RandomWriteReadBack(kExportBytes, 4);
}

TEST_F(NbdBackendTest, SimpleRepliesOnlyWithNoSr) {
  StartKit({"--no-sr", "memory", "64M"});
  ASSERT_TRUE(Open(kit_->uri()).ok());
  EXPECT_FALSE(storage_->export_info()->structured_replies);
  RandomWriteReadBack(kExportBytes, 3);
}

TEST_F(NbdBackendTest, FuaFlushTrimAndWriteZeroes) {
  StartKit({"memory", "64M"});
  ASSERT_TRUE(Open(kit_->uri()).ok());
  const nbd::ExportInfo& info = *storage_->export_info();
  EXPECT_TRUE(info.can_fua() && info.can_flush() && info.can_trim() && info.can_write_zeroes());
  RandomWriteReadBack(1 << 20, 1, 64 * 1024, abi::kIoFFua);
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpFlush, 0, 0)), 0);

  std::memset(driver_->Buffer(0), 0x5c, 65536);
  ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpWrite, 0, 65536)), 65536);
  ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpWriteZeroes, 4096, 8192)), 8192);
  ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpDiscard, 32768, 32768)), 32768);
  ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpRead, 0, 65536)), 65536);
  const uint8_t* b = driver_->Buffer(0);
  EXPECT_EQ(b[4095], 0x5c);
  EXPECT_EQ(b[4096], 0);
  EXPECT_EQ(b[4096 + 8191], 0);
  EXPECT_EQ(b[4096 + 8192], 0x5c);
  EXPECT_EQ(b[32767], 0x5c);
  EXPECT_EQ(b[32768], 0);  // the memory plugin reads trimmed ranges as zeroes
}

TEST_F(NbdBackendTest, WriteZeroesAndFuaAreEmulatedWhenTheServerLacksThem) {
  // nozero hides WRITE_ZEROES, the fua filter (mode none) hides FUA: zeroes go out as WRITEs (split
  // at the maximum payload the policy filter sets), FUA as a FLUSH after the write.
  StartKit({"--filter=nozero", "--filter=fua", "--filter=blocksize-policy", "memory", "64M",
            "blocksize-maximum=65536", "blocksize-error-policy=error"});
  ASSERT_TRUE(Open(kit_->uri()).ok());
  const nbd::ExportInfo& info = *storage_->export_info();
  ASSERT_FALSE(info.can_write_zeroes());
  ASSERT_FALSE(info.can_fua());
  ASSERT_TRUE(info.can_flush());
  std::memset(driver_->Buffer(0), 0x6b, Driver::kMaxIoBytes);
  ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpWrite, 0, Driver::kMaxIoBytes, abi::kIoFFua)),
            static_cast<int32_t>(Driver::kMaxIoBytes));
  ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpWriteZeroes, 4096, 512 * 1024)), 512 * 1024);
  ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpRead, 0, Driver::kMaxIoBytes)),
            static_cast<int32_t>(Driver::kMaxIoBytes));
  const uint8_t* b = driver_->Buffer(0);
  EXPECT_EQ(b[4095], 0x6b);
  EXPECT_TRUE(std::all_of(b + 4096, b + 4096 + 512 * 1024, [](uint8_t v) { return v == 0; }));
  EXPECT_EQ(b[4096 + 512 * 1024], 0x6b);
  EXPECT_EQ(stats_->server_errors.load(), 0u);
}

TEST_F(NbdBackendTest, RequestsAboveTheServerMaximumAreSplit) {
  // The policy filter advertises a 64 KiB maximum and refuses anything larger: a 1 MiB I/O only
  // works when split.
  StartKit({"--filter=blocksize-policy", "memory", "64M", "blocksize-maximum=65536",
            "blocksize-error-policy=error"});
  ASSERT_TRUE(Open(kit_->uri()).ok());
  EXPECT_EQ(storage_->export_info()->max_payload, 65536u);
  RandomWriteReadBack(kExportBytes, 2, Driver::kMaxIoBytes);
  ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpRead, 0, Driver::kMaxIoBytes)), 1 << 20);
}

TEST_F(NbdBackendTest, BlocksizeFilterSplittingOnTheServerKeepsData) {
  StartKit({"--filter=blocksize", "memory", "64M", "maxdata=4096", "minblock=512"});
  ASSERT_TRUE(Open(kit_->uri()).ok());
  RandomWriteReadBack(kExportBytes, 2);
}

TEST_F(NbdBackendTest, ServerErrorsMapToErrno) {
  StartKit({"--filter=error", "memory", "64M", "error-pwrite=ENOSPC", "error-pwrite-rate=100%"});
  ASSERT_TRUE(Open(kit_->uri()).ok());
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpWrite, 0, 4096)), -ENOSPC);
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpRead, 0, 4096)), 4096);
  // Counted in the stats the caller handed in, where the agent reads them.
  EXPECT_EQ(storage_->stats(), stats_);
  EXPECT_EQ(stats_->server_errors.load(), 1u);
  EXPECT_EQ(stats_->reconnects.load(), 0u);
}

TEST_F(NbdBackendTest, ErrorFileInjectsEioWhileItExists) {
  const std::string trigger = dir_ + "/inject";
  StartKit(
      {"--filter=error", "memory", "64M", "error=EIO", "error-rate=100%", "error-file=" + trigger});
  ASSERT_TRUE(Open(kit_->uri()).ok());
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpRead, 0, 4096)), 4096);
  std::ofstream(trigger).put('x');
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpRead, 0, 4096)), -EIO);
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpWrite, 0, 4096)), -EIO);
  std::filesystem::remove(trigger);
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpRead, 0, 4096)), 4096);
  EXPECT_EQ(storage_->stats()->server_errors.load(), 2u);
}

TEST_F(NbdBackendTest, DelayedRepliesArePipelined) {
  StartKit({"--filter=delay", "memory", "64M", "rdelay=300ms"});
  ASSERT_TRUE(Open(kit_->uri()).ok());
  std::vector<BlockIo> reads;
  for (uint16_t tag = 0; tag < 16; ++tag) reads.push_back(Io(abi::kIoOpRead, tag * 4096, 4096));
  const auto start = testing_nbd::Clock::now();
  std::vector<int32_t> results = driver_->Run(reads);
  const auto elapsed = testing_nbd::Clock::now() - start;
  for (int32_t r : results) EXPECT_EQ(r, 4096);
  // One after the other would take 16 x 300 ms; in flight together it is a few delays at most.
  EXPECT_LT(elapsed, std::chrono::milliseconds(16 * 300 / 2));
}

TEST_F(NbdBackendTest, LargerVolumeThanExportIsRefused) {
  StartKit({"memory", "64M"});
  absl::Status status = Open(kit_->uri(), 30000, kExportBytes * 2);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("larger than the NBD export"), absl::string_view::npos) << status;
}

TEST_F(NbdBackendTest, ReadOnlyExportNeedsAReadOnlyVolume) {
  StartKit({"-r", "memory", "64M"});
  absl::Status status = Open(kit_->uri());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("read-only"), absl::string_view::npos) << status;
  ASSERT_TRUE(Open(kit_->uri(), 30000, kExportBytes, /*read_only=*/true).ok());
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpRead, 0, 4096)), 4096);
  // Writes never reach the backend of a read-only device: the queue answers EROFS (AdmitIo).
}

TEST_F(NbdBackendTest, UnknownExportIsRefusedWithTheServerMessage) {
  StartKit({"--filter=exportname", "memory", "64M", "exportname=good", "exportname-strict=true"});
  absl::Status status = Open(kit_->uri("bad"));
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("bad"), absl::string_view::npos) << status;
  EXPECT_NE(status.message().find("NBD_REP_ERR_UNKNOWN: no such export"), absl::string_view::npos)
      << status;
  EXPECT_TRUE(Open(kit_->uri("good")).ok());
}

// How many lines of `log` hold `text`.
int LinesWith(const std::string& log, const std::string& text) {
  std::ifstream in(log);
  int count = 0;
  for (std::string line; std::getline(in, line);) count += line.find(text) != std::string::npos;
  return count;
}

// Waits (up to 10 s) until `log` has at least `count` lines holding `text`.
bool AwaitLines(const std::string& log, const std::string& text, int count) {
  const auto deadline = testing_nbd::Clock::now() + std::chrono::seconds(10);
  while (LinesWith(log, text) < count && testing_nbd::Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling interval
  }
  return LinesWith(log, text) >= count;
}

// Every way the agent lets go of a connection tells the server, as the protocol asks: a size
// probe and a volume's queue with NBD_CMD_DISC, a refused negotiation with NBD_OPT_ABORT.
TEST_F(NbdBackendTest, ConnectionsEndWithDisconnectOrAbortNotAReset) {
  const std::string log = dir_ + "/nbdkit.log";
  kit_ = std::make_unique<NbdKit>(
      Socket(), 0,
      std::vector<std::string>{"-v", "--filter=exportname", "memory", "64M", "exportname=good",
                               "exportname-strict=true"});
  kit_->stderr_path = log;
  ASSERT_TRUE(kit_->Start());

  ASSERT_TRUE(nbd::ProbeExport(kit_->uri("good"), std::chrono::seconds(5)).ok());
  nbd::EndProbe(kit_->uri("good"));  // no volume took the probe's connection
  EXPECT_TRUE(AwaitLines(log, "client sent NBD_CMD_DISC", 1));

  EXPECT_EQ(nbd::ProbeExport(kit_->uri("bad"), std::chrono::seconds(5)).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(AwaitLines(log, "NBD_OPT_ABORT", 1));

  ASSERT_TRUE(Open(kit_->uri("good")).ok());
  ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpRead, 0, 4096)), 4096);
  driver_.reset();
  storage_.reset();
  EXPECT_TRUE(AwaitLines(log, "client sent NBD_CMD_DISC", 2));
}

// The first reply's completion finds the ring's submission queue full and the kernel taking none
// (as while its CQ overflows): the receive waits for a later turn instead of being lost.
TEST_F(NbdBackendTest, AReceiveThatFindsNoFreeSqeIsArmedOnALaterTurn) {
  StartKit({"memory", "64M"});
  ASSERT_TRUE(Open(kit_->uri()).ok());
  Ring& ring = driver_->ring();
  bool filled = false;
  driver_->on_result = [&](uint16_t, int32_t) {
    if (filled) return;
    filled = true;
    while (io_uring_sqe* nop = io_uring_get_sqe(ring.get())) io_uring_prep_nop(nop);
    ring.HoldSubmissionsForTest(true);
  };
  driver_->on_pumped = [&] {
    if (filled) ring.HoldSubmissionsForTest(false);
  };
  std::memset(driver_->Buffer(0), 0xA5, 4096);
  ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpWrite, 8192, 4096)), 4096);
  EXPECT_TRUE(filled);
  EXPECT_TRUE(ring.TakeSqeShortage());
  // Only a receive armed again can bring this reply.
  std::memset(driver_->Buffer(0), 0, 4096);
  ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpRead, 8192, 4096)), 4096);
  EXPECT_EQ(std::vector<uint8_t>(driver_->Buffer(0), driver_->Buffer(0) + 4096),
            std::vector<uint8_t>(4096, 0xA5));
}

// A server that accepts and never speaks holds each reconnect dial only for the volume's connect
// timeout (blkagent --nbd-connect-timeout), then the dial is tried again.
TEST_F(NbdBackendTest, AReconnectDialGivesUpAtTheConnectTimeoutAndTriesAgain) {
  StartKit({"memory", "64M"});
  connect_timeout_ms_ = 200;
  ASSERT_TRUE(Open(kit_->uri()).ok());
  ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpRead, 0, 4096)), 4096);
  kit_->Kill();
  // Where the server was, a socket that takes connections and says nothing.
  ::unlink(Socket().c_str());
  UniqueFd silent(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  sockaddr_un sun{};
  sun.sun_family = AF_UNIX;
  std::strncpy(sun.sun_path, Socket().c_str(), sizeof(sun.sun_path) - 1);
  ASSERT_EQ(::bind(silent.get(), reinterpret_cast<sockaddr*>(&sun), sizeof(sun)), 0);
  ASSERT_EQ(::listen(silent.get(), 16), 0);
  std::vector<UniqueFd> dials;
  // A dial waiting the default 10 s would let only one through before this deadline.
  const auto deadline = testing_nbd::Clock::now() + std::chrono::seconds(4);
  while (dials.size() < 3 && testing_nbd::Clock::now() < deadline) {
    driver_->Pump(std::chrono::milliseconds(20));  // the broken connection's receive comes back
    while (true) {
      UniqueFd dial(::accept4(silent.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!dial.valid()) break;
      dials.push_back(std::move(dial));
    }
  }
  EXPECT_GE(dials.size(), 3u);
  silent.Reset();
  ASSERT_TRUE(kit_->Start());
  // Waits for the reconnect (well within the 30 s io_timeout) and is served.
  EXPECT_EQ(driver_->Run({Io(abi::kIoOpRead, 0, 4096)}, std::chrono::seconds(15))[0], 4096);
  EXPECT_EQ(storage_->stats()->reconnects.load(), 1u);
}

TEST_F(NbdBackendTest, ServerKilledAndRestartedMidStreamLosesNothing) {
  // The file plugin keeps the data across restarts; the delay keeps requests in flight.
  const std::string image = dir_ + "/disk.img";
  { std::ofstream create(image); }
  std::filesystem::resize_file(image, 16 << 20);
  std::vector<std::string> args = {"--filter=delay", "file", image, "wdelay=20ms"};
  StartKit(args);
  ASSERT_TRUE(Open(kit_->uri(), 30000, 16 << 20).ok());
  int completions = 0;
  bool restarted = false;
  driver_->on_result = [&](uint16_t, int32_t) {
    if (++completions == kDepth / 2 && !restarted) {
      restarted = true;
      kit_->Kill();
      ASSERT_TRUE(kit_->Start());
    }
  };
  RandomWriteReadBack(16 << 20, 3);
  EXPECT_TRUE(restarted);
  EXPECT_GE(storage_->stats()->reconnects.load(), 1u);
  EXPECT_EQ(storage_->stats()->timeouts.load(), 0u);
}

TEST_F(NbdBackendTest, ServerDownPastIoTimeoutFailsWithEioThenRecovers) {
  StartKit({"memory", "64M"});
  ASSERT_TRUE(Open(kit_->uri(), /*io_timeout_ms=*/800).ok());
  ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpRead, 0, 4096)), 4096);
  kit_->Kill();
  const auto start = testing_nbd::Clock::now();
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpRead, 0, 4096)), -EIO);
  EXPECT_LT(testing_nbd::Clock::now() - start, std::chrono::seconds(10));
  const uint64_t timed_out = storage_->stats()->timeouts.load();
  EXPECT_GE(timed_out, 1u);
  // While the server stays away, new requests fail at once, and count as timed out too.
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpRead, 0, 4096)), -EIO);
  EXPECT_EQ(storage_->stats()->timeouts.load(), timed_out + 1);

  ASSERT_TRUE(kit_->Start());
  const auto deadline = testing_nbd::Clock::now() + std::chrono::seconds(15);
  int32_t result = -EIO;
  while (result != 4096 && testing_nbd::Clock::now() < deadline) {
    driver_->Pump(std::chrono::milliseconds(100));
    result = driver_->RunOne(Io(abi::kIoOpRead, 0, 4096));
  }
  EXPECT_EQ(result, 4096);
  EXPECT_EQ(storage_->stats()->reconnects.load(), 1u);
}

// Lines of nbdkit's log filter for connections that negotiated an export of `size` bytes.
int ConnectsWithSize(const std::string& log, uint64_t size) {
  std::ifstream in(log);
  char hex[32];
  std::snprintf(hex, sizeof(hex), "size=0x%llx", static_cast<unsigned long long>(size));
  int count = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find("Connect") != std::string::npos && line.find(hex) != std::string::npos) ++count;
  }
  return count;
}

TEST_F(NbdBackendTest, AReconnectAfterAGrowNeedsTheGrownSize) {
  const std::string image = MakeImage("grown.img");  // 16 MiB
  const std::string log = dir_ + "/nbdkit.log";
  StartKit({"--filter=log", "file", image, "logfile=" + log});
  ASSERT_TRUE(Open(kit_->uri(), /*io_timeout_ms=*/800, 16 << 20).ok());
  std::filesystem::resize_file(image, 32 << 20);
  ASSERT_TRUE(storage_->Grow(32 << 20).ok());
  ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpRead, 0, 4096)), 4096);

  // The export shrinks back below the grown size, yet above the size at open, and the server
  // restarts: every reconnect must be refused.
  kit_->Kill();
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpRead, 0, 4096)), -EIO);
  std::filesystem::resize_file(image, 24 << 20);
  ASSERT_TRUE(kit_->Start());
  const auto deadline = testing_nbd::Clock::now() + std::chrono::seconds(20);
  while (ConnectsWithSize(log, 24 << 20) < 2 && storage_->stats()->reconnects.load() == 0 &&
         testing_nbd::Clock::now() < deadline) {
    driver_->Pump(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(storage_->stats()->reconnects.load(), 0u)
      << "reconnected to an export of 24 MiB under a volume grown to 32 MiB";
  ASSERT_GE(ConnectsWithSize(log, 24 << 20), 2) << "the backend did not try to reconnect";
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpRead, 0, 4096)), -EIO);

  // Grown back to the volume's size: the next attempt is taken.
  std::filesystem::resize_file(image, 32 << 20);
  int32_t result = -EIO;
  while (result != 4096 && testing_nbd::Clock::now() < deadline) {
    driver_->Pump(std::chrono::milliseconds(100));
    result = driver_->RunOne(Io(abi::kIoOpRead, (32 << 20) - 4096, 4096));
  }
  EXPECT_EQ(result, 4096);
  EXPECT_EQ(storage_->stats()->reconnects.load(), 1u);
}

TEST_F(NbdBackendTest, EachQueueGetsItsOwnConnectionWithMultiConn) {
  StartKit({"memory", "64M"});
  ASSERT_TRUE(Open(kit_->uri(), 30000, kExportBytes, false, /*queues=*/2).ok());
  ASSERT_TRUE(storage_->export_info()->can_multi_conn());
  absl::StatusOr<std::unique_ptr<Backend>> second = storage_->NewQueueBackend(kDepth);
  ASSERT_TRUE(second.ok()) << second.status();
  Driver other(std::move(*second), kDepth);
  ASSERT_TRUE(other.attach_status().ok());
  // Written and flushed through one queue, read through the other.
  std::memset(driver_->Buffer(0), 0x3c, 8192);
  ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpWrite, 1 << 20, 8192)), 8192);
  ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpFlush, 0, 0)), 0);
  ASSERT_EQ(other.RunOne(Io(abi::kIoOpRead, 1 << 20, 8192)), 8192);
  EXPECT_EQ(other.Buffer(0)[0], 0x3c);
  EXPECT_EQ(other.Buffer(0)[8191], 0x3c);
}

// A Unix socket bound at `path` that never listens: connecting to it is refused (ECONNREFUSED),
// as while a server restarts.
class RefusingSocket {
 public:
  explicit RefusingSocket(const std::string& path) : path_(path) {
    ::unlink(path_.c_str());
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un sun{};
    sun.sun_family = AF_UNIX;
    std::strncpy(sun.sun_path, path_.c_str(), sizeof(sun.sun_path) - 1);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&sun), sizeof(sun)) != 0) {
      ADD_FAILURE() << "cannot bind " << path_ << ": " << std::strerror(errno);
    }
  }
  ~RefusingSocket() {
    ::close(fd_);
    ::unlink(path_.c_str());
  }

 private:
  std::string path_;
  int fd_ = -1;
};

// nbdkit stopped gracefully answers the requests it has with NBD_ESHUTDOWN, then closes: they are
// resent to the restarted server, as after a crash.
class NbdKitGracefulStopTest : public NbdBackendTest, public ::testing::WithParamInterface<int> {};

TEST_P(NbdKitGracefulStopTest, StoppedAndRestartedUnderLoadLosesNothing) {
  const std::string image = MakeImage("disk.img");
  // The delay keeps writes in flight when the signal comes (nbdkit cuts it short).
  StartKit({"--filter=delay", "file", image, "wdelay=20ms"});
  ASSERT_TRUE(Open(kit_->uri(), 30000, 16 << 20).ok());
  RestartUnderLoad([&] {
    kit_->Stop(GetParam());
    return kit_->Start();
  });
}

INSTANTIATE_TEST_SUITE_P(Signals, NbdKitGracefulStopTest, ::testing::Values(SIGTERM, SIGINT),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(info.param == SIGTERM ? "SIGTERM" : "SIGINT");
                         });

TEST_F(NbdBackendTest, ServerAwayAndRefusingConnectionsForAWhileLosesNothing) {
  const std::string image = MakeImage("disk.img");
  StartKit({"--filter=delay", "file", image, "wdelay=20ms"});
  ASSERT_TRUE(Open(kit_->uri(), 30000, 16 << 20).ok());
  RestartUnderLoad([&] {
    kit_->Stop(SIGTERM);
    {
      // Away for 600 ms (the length of the outage, not a wait for anything): the reconnect dials
      // meanwhile are refused.
      RefusingSocket refusing(Socket());
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
    }
    return kit_->Start();
  });
}

TEST_F(NbdBackendTest, ShutdownRepliesAndRefusedConnectionsAreRiddenOut) {
  FakeNbdServer server(Socket(), Lie::kShutdownThenRefuse);
  ASSERT_TRUE(Open(server.uri(), 30000, FakeNbdServer::kExportBytes).ok());
  std::vector<BlockIo> ios;
  for (uint16_t tag = 0; tag < 8; ++tag) {
    ios.push_back(tag % 2 ? Io(abi::kIoOpWrite, tag * 8192, 8192)
                          : Io(abi::kIoOpRead, tag * 8192, 8192));
    std::memset(driver_->Buffer(tag), 0x77, 8192);
  }
  std::vector<int32_t> results = driver_->Run(ios);
  for (uint16_t tag = 0; tag < 8; ++tag) EXPECT_EQ(results[tag], 8192) << "tag " << tag;
  EXPECT_TRUE(RangeIsZero(0, 8192));
  // Connection 1 went down, 2 and 3 were refused, 4 served.
  EXPECT_EQ(server.connections(), 4);
  EXPECT_EQ(storage_->stats()->reconnects.load(), 1u);
  EXPECT_EQ(storage_->stats()->server_errors.load(), 0u);
  EXPECT_EQ(storage_->stats()->protocol_errors.load(), 0u);
  EXPECT_EQ(storage_->stats()->timeouts.load(), 0u);
}

TEST_F(NbdBackendTest, AServerForeverShuttingDownFailsRequestsAtIoTimeout) {
  // Each connection succeeds and then answers NBD_ESHUTDOWN: reconnecting is no progress, so
  // io_timeout still ends the wait.
  FakeNbdServer server(Socket(), Lie::kAlwaysShuttingDown);
  ASSERT_TRUE(Open(server.uri(), /*io_timeout_ms=*/800, FakeNbdServer::kExportBytes).ok());
  const auto start = testing_nbd::Clock::now();
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpRead, 0, 4096)), -EIO);
  EXPECT_LT(testing_nbd::Clock::now() - start, std::chrono::seconds(10));
  EXPECT_GE(storage_->stats()->timeouts.load(), 1u);
  EXPECT_GE(server.connections(), 2);
  EXPECT_EQ(storage_->stats()->server_errors.load(), 0u);
}

bool HaveProgram(const char* name) {
  const std::string command = std::string("command -v ") + name + " >/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

TEST_F(NbdBackendTest, QemuNbdServesTheVolume) {
  if (!HaveProgram("qemu-nbd")) GTEST_SKIP() << "qemu-nbd is not installed (qemu-utils)";
  const std::string image = dir_ + "/qemu.img";
  { std::ofstream create(image); }
  std::filesystem::resize_file(image, 16 << 20);
  testing_nbd::ServerProcess server(
      {"qemu-nbd", "-t", "-k", Socket(), "-f", "raw", "-x", "disk", "--shared=4", image}, Socket());
  ASSERT_TRUE(server.Start()) << "qemu-nbd did not start";
  absl::Status status = Open("nbd+unix:///disk?socket=" + Socket(), 30000, 16 << 20);
  ASSERT_TRUE(status.ok()) << status;
  RandomWriteReadBack(16 << 20, 2);
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpFlush, 0, 0)), 0);
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpWriteZeroes, 0, 65536)), 65536);
  ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpRead, 0, 65536)), 65536);
  EXPECT_TRUE(RangeIsZero(0, 65536));
}

TEST_F(NbdBackendTest, NbdServerServesTheVolume) {
  if (!HaveProgram("nbd-server")) GTEST_SKIP() << "nbd-server is not installed";
  const std::string config = NbdServerConfig("  flush = true\n  fua = true\n  trim = true\n");
  const std::string pid_file = dir_ + "/nbd-server.pid";
  testing_nbd::ServerProcess server({"nbd-server", "-C", config, "-p", pid_file}, Socket(),
                                    pid_file);
  ASSERT_TRUE(server.Start()) << "nbd-server did not start";
  absl::Status status = Open("nbd+unix:///disk?socket=" + Socket(), 30000, 16 << 20);
  ASSERT_TRUE(status.ok()) << status;
  RandomWriteReadBack(16 << 20, 2);
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpFlush, 0, 0)), 0);
}

// A volume made on an export's size costs one connection: the probe's is the volume's. A server
// that serves a single client (nbd-server -d) has no other.
TEST_F(NbdBackendTest, ASingleClientServerServesAVolumeCreatedOnItsSize) {
  if (!HaveProgram("nbd-server")) GTEST_SKIP() << "nbd-server is not installed";
  const std::string config = NbdServerConfig("");
  testing_nbd::ServerProcess server({"nbd-server", "-d", "-C", config}, Socket());
  ASSERT_TRUE(server.Start(/*await_ready=*/false));
  const std::string uri = "nbd+unix:///disk?socket=" + Socket();
  absl::StatusOr<nbd::ExportInfo> probed = absl::UnavailableError("not asked yet");
  const auto deadline = testing_nbd::Clock::now() + std::chrono::seconds(10);
  while (absl::IsUnavailable(probed.status()) && testing_nbd::Clock::now() < deadline) {
    probed = nbd::ProbeExport(uri, std::chrono::seconds(5));
    if (!probed.ok())
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // until it listens
  }
  ASSERT_TRUE(probed.ok()) << probed.status();
  ASSERT_TRUE(Open(uri, 30000, probed->size).ok());
  RandomWriteReadBack(16 << 20, 1);
  EXPECT_EQ(storage_->stats()->reconnects.load(), 0u);
}

TEST_F(NbdBackendTest, AVolumeOpenedAfterAProbeOfItsExportUsesTheProbesConnection) {
  FakeNbdServer server(Socket(), Lie::kCache);
  ASSERT_TRUE(nbd::ProbeExport(server.uri(), std::chrono::seconds(5)).ok());
  ASSERT_TRUE(Open(server.uri(), 30000, FakeNbdServer::kExportBytes).ok());
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpRead, 0, 4096)), 4096);
  EXPECT_EQ(server.connections(), 1);
}

TEST_F(NbdBackendTest, QemuNbdStoppedAndRestartedUnderLoadLosesNothing) {
  if (!HaveProgram("qemu-nbd")) GTEST_SKIP() << "qemu-nbd is not installed (qemu-utils)";
  const std::string image = MakeImage("qemu.img");
  testing_nbd::ServerProcess server(
      {"qemu-nbd", "-t", "-k", Socket(), "-f", "raw", "-x", "disk", "--shared=4", image}, Socket());
  ASSERT_TRUE(server.Start()) << "qemu-nbd did not start";
  absl::Status status = Open("nbd+unix:///disk?socket=" + Socket(), 30000, 16 << 20);
  ASSERT_TRUE(status.ok()) << status;
  RestartUnderLoad([&] { return server.Stop(SIGTERM) && server.Start(); });
}

TEST_F(NbdBackendTest, NbdServerStoppedAndRestartedUnderLoadLosesNothing) {
  if (!HaveProgram("nbd-server")) GTEST_SKIP() << "nbd-server is not installed";
  const std::string image = MakeImage("nbd-server.img");
  const std::string config = dir_ + "/nbd-server.conf";
  std::ofstream(config) << "[generic]\n  user = root\n  group = root\n  unixsock = " << Socket()
                        << "\n[disk]\n  exportname = " << image << "\n  flush = true\n";
  const std::string pid_file = dir_ + "/nbd-server.pid";
  testing_nbd::ServerProcess server({"nbd-server", "-C", config, "-p", pid_file}, Socket(),
                                    pid_file);
  ASSERT_TRUE(server.Start()) << "nbd-server did not start";
  absl::Status status = Open("nbd+unix:///disk?socket=" + Socket(), 30000, 16 << 20);
  ASSERT_TRUE(status.ok()) << status;
  // Its users stop it with SIGTERM to the pid in its pid file.
  RestartUnderLoad([&] { return server.Stop(SIGTERM) && server.Start(); });
}

// Large reads (received straight into the tag's buffer) under simple and structured replies, also
// split at a small server maximum payload: every byte where it belongs.
struct LargeReadServer {
  const char* name;
  std::vector<std::string> args;
};

void PrintTo(const LargeReadServer& server, std::ostream* os) { *os << server.name; }

class NbdLargeReadTest : public NbdBackendTest,
                         public ::testing::WithParamInterface<LargeReadServer> {
 protected:
  // Runs `ios` (reads) at once on tags 0.. after poisoning their buffers, and checks every byte.
  void ExpectReadsOfPattern(const std::vector<BlockIo>& ios) {
    const uint16_t count = static_cast<uint16_t>(ios.size());
    for (uint16_t tag = 0; tag < count; ++tag) {
      std::memset(driver_->Buffer(tag), 0xA5, ios[tag].length);
    }
    std::vector<int32_t> results = driver_->Run(ios);
    for (uint16_t tag = 0; tag < count; ++tag) {
      ASSERT_EQ(results[tag], static_cast<int32_t>(ios[tag].length)) << "read tag " << tag;
      EXPECT_EQ(FirstWrongByte(tag, ios[tag].offset, ios[tag].length), -1)
          << "read of " << ios[tag].offset << "+" << ios[tag].length;
    }
  }
};

TEST_P(NbdLargeReadTest, LargeReadsReadBackIntact) {
  StartKit(GetParam().args);
  ASSERT_TRUE(Open(kit_->uri(), 30000, 16 << 20).ok());
  WritePattern(16 << 20);
  // A queue's worth of 128 KiB reads at once (their replies follow each other on the socket), at
  // offsets that are not multiples of 128 KiB.
  std::vector<BlockIo> ios;
  for (uint16_t tag = 0; tag < kDepth; ++tag) {
    ios.push_back(Io(abi::kIoOpRead, tag * (384 * 1024) + 512 * (tag % 7), 128 * 1024));
  }
  ExpectReadsOfPattern(ios);
  // 1 MiB reads, 200 KiB (split at a 64 KiB maximum: 3 x 64 KiB and 8 KiB), and small reads
  // between them, which go through the shared buffer.
  ios.clear();
  for (uint16_t tag = 0; tag < 8; ++tag) {
    const uint64_t offset = tag * (2 << 20) + 4096 * tag;
    ios.push_back(Io(abi::kIoOpRead, offset, tag % 2 ? Driver::kMaxIoBytes : 200 * 1024));
    ios.push_back(Io(abi::kIoOpRead, offset + (1 << 20) + 512, 4096));
  }
  ExpectReadsOfPattern(ios);
  // Large reads with writes between them (of the bytes already there): the writes' replies (no
  // payload) come between the reads' replies.
  ios.clear();
  for (uint16_t tag = 0; tag < kDepth; ++tag) {
    const uint64_t offset = tag * (384 * 1024) + 4096;
    if (tag % 3 == 1) {
      ios.push_back(Io(abi::kIoOpWrite, offset, 4096));
      for (uint32_t i = 0; i < 4096; ++i) {
        driver_->Buffer(tag)[i] = FakeNbdServer::PatternByte(offset + i);
      }
    } else {
      ios.push_back(Io(abi::kIoOpRead, offset, 256 * 1024));
      std::memset(driver_->Buffer(tag), 0xA5, 256 * 1024);
    }
  }
  std::vector<int32_t> results = driver_->Run(ios);
  for (uint16_t tag = 0; tag < kDepth; ++tag) {
    ASSERT_EQ(results[tag], static_cast<int32_t>(ios[tag].length)) << "tag " << tag;
    if (ios[tag].op == abi::kIoOpRead) {
      EXPECT_EQ(FirstWrongByte(tag, ios[tag].offset, ios[tag].length), -1)
          << "read of " << ios[tag].offset << "+" << ios[tag].length;
    }
  }
  EXPECT_EQ(stats_->protocol_errors.load(), 0u);
  EXPECT_EQ(stats_->reconnects.load(), 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Servers, NbdLargeReadTest,
    ::testing::Values(LargeReadServer{"Structured", {"memory", "64M"}},
                      LargeReadServer{"Simple", {"--no-sr", "memory", "64M"}},
                      LargeReadServer{"StructuredSplitAt64K",
                                      {"--filter=blocksize-policy", "memory", "64M",
                                       "blocksize-maximum=65536", "blocksize-error-policy=error"}},
                      LargeReadServer{"SimpleSplitAt64K",
                                      {"--no-sr", "--filter=blocksize-policy", "memory", "64M",
                                       "blocksize-maximum=65536", "blocksize-error-policy=error"}}),
    [](const ::testing::TestParamInfo<LargeReadServer>& info) { return info.param.name; });

TEST_F(NbdBackendTest, ServerKilledAndRestartedDuringLargeReadsLosesNothing) {
  // The file plugin keeps the data across restarts; the delay keeps reads in flight, and the
  // replies of the ones answered just before the kill may be cut anywhere.
  const std::string image = MakeImage("disk.img");
  StartKit({"--filter=delay", "file", image, "rdelay=20ms"});
  ASSERT_TRUE(Open(kit_->uri(), 30000, 16 << 20).ok());
  WritePattern(16 << 20);
  int completions = 0;
  bool restarted = false;
  driver_->on_result = [&](uint16_t, int32_t) {
    if (++completions == kDepth / 2 && !restarted) {
      restarted = true;
      kit_->Kill();
      ASSERT_TRUE(kit_->Start());
    }
  };
  std::vector<BlockIo> ios;
  for (uint16_t tag = 0; tag < kDepth; ++tag) {
    const uint32_t length = (tag % 4 + 1) * 128 * 1024;
    ios.push_back(Io(abi::kIoOpRead, tag * (480 * 1024) + 512 * tag, length));
    std::memset(driver_->Buffer(tag), 0xA5, length);
  }
  std::vector<int32_t> results = driver_->Run(ios);
  driver_->on_result = nullptr;
  EXPECT_TRUE(restarted);
  for (uint16_t tag = 0; tag < kDepth; ++tag) {
    ASSERT_EQ(results[tag], static_cast<int32_t>(ios[tag].length)) << "read tag " << tag;
    EXPECT_EQ(FirstWrongByte(tag, ios[tag].offset, ios[tag].length), -1)
        << "read of " << ios[tag].offset << "+" << ios[tag].length;
  }
  EXPECT_GE(storage_->stats()->reconnects.load(), 1u);
  EXPECT_EQ(storage_->stats()->timeouts.load(), 0u);
}

TEST_F(NbdBackendTest, ServerDyingMidPayloadOfALargeReadLosesNothing) {
  FakeNbdServer server(Socket(), Lie::kDiesMidPayload);
  ASSERT_TRUE(Open(server.uri(), 30000, FakeNbdServer::kExportBytes).ok());
  // Half of 768 KiB arrives, then the connection ends; the read is resent and answered in two
  // data chunks, the second half first. Each is larger than the backend's 256 KiB receive buffer,
  // so most of it is received straight into the read's buffer.
  const uint64_t offset = 128 * 1024 + 4096;
  const uint32_t length = 768 * 1024;
  std::memset(driver_->Buffer(0), 0xA5, length);
  ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpRead, offset, length)), static_cast<int32_t>(length));
  EXPECT_EQ(FirstWrongByte(0, offset, length), -1);
  EXPECT_EQ(server.connections(), 2);
  EXPECT_EQ(storage_->stats()->reconnects.load(), 1u);
  EXPECT_EQ(storage_->stats()->protocol_errors.load(), 0u);
  EXPECT_EQ(storage_->stats()->timeouts.load(), 0u);
}

TEST_F(NbdBackendTest, IoTimeoutDuringALargeReadFailsItOnceAndRecovers) {
  // The read is resent after connection 1 died; connection 2 sends half its data and stalls, so
  // io_timeout ends it while the receive into its buffer is still pending: it fails once, after
  // that receive came back, and the next connection serves it again.
  FakeNbdServer server(Socket(), Lie::kStallsMidPayload);
  ASSERT_TRUE(Open(server.uri(), /*io_timeout_ms=*/800, FakeNbdServer::kExportBytes).ok());
  const uint64_t offset = 4096;
  const uint32_t length = 256 * 1024;
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpRead, offset, length)), -EIO);
  EXPECT_EQ(storage_->stats()->timeouts.load(), 1u);
  const auto deadline = testing_nbd::Clock::now() + std::chrono::seconds(15);
  int32_t result = -EIO;
  while (result == -EIO && testing_nbd::Clock::now() < deadline) {
    driver_->Pump(std::chrono::milliseconds(100));
    std::memset(driver_->Buffer(0), 0xA5, length);
    result = driver_->RunOne(Io(abi::kIoOpRead, offset, length));
  }
  ASSERT_EQ(result, static_cast<int32_t>(length));
  EXPECT_EQ(FirstWrongByte(0, offset, length), -1);
  EXPECT_EQ(server.connections(), 3);
  EXPECT_EQ(storage_->stats()->protocol_errors.load(), 0u);
}

TEST_F(NbdBackendTest, NbdkitsWritebackCacheKilledLosesAnAcknowledgedWriteAndTheFlushSaysSo) {
  const std::string image = Socket() + ".img";
  { std::ofstream(image).close(); }
  ASSERT_EQ(::truncate(image.c_str(), kExportBytes), 0);
  StartKit({"--filter=cache", "file", image, "cache=writeback"});
  ASSERT_TRUE(Open(kit_->uri()).ok());
  ASSERT_TRUE(storage_->export_info()->can_flush());
  std::memset(driver_->Buffer(0), 0xB2, 65536);
  ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpWrite, 0, 65536)), 65536);
  kit_->Kill();
  ASSERT_TRUE(kit_->Start());
  ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpRead, 0, 65536)), 65536);
  EXPECT_TRUE(RangeIsZero(0, 65536));  // the write is gone with nbdkit's cache
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpFlush, 0, 0)), -EIO);
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpFlush, 0, 0)), 0);
  ::unlink(image.c_str());
}

// A device the kernel held when the agent restarted, while its server was down: recovered without
// a connection, so the agent does not wait for the server; the I/O the kernel hands over waits for
// it, as in any outage.
TEST_F(NbdBackendTest, RecoveredWhileTheServerIsDownIoWaitsAndIsServedOnceItIsUp) {
  kit_ = std::make_unique<NbdKit>(Socket(), 0, std::vector<std::string>{"memory", "64M"});
  EXPECT_TRUE(absl::IsUnavailable(Open(kit_->uri())));  // a create needs the server
  ASSERT_TRUE(Open(kit_->uri(), 30000, kExportBytes, false, 2, OpenPurpose::kRecover).ok());
  EXPECT_FALSE(storage_->export_info().has_value());
  std::memset(driver_->Buffer(0), 0x5A, 8192);
  bool started = false;
  driver_->on_pumped = [&] {
    if (!started) started = kit_->Start();
  };
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpWrite, 4096, 8192)), 8192);
  driver_->on_pumped = nullptr;
  ASSERT_TRUE(started);
  std::memset(driver_->Buffer(0), 0, 8192);
  ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpRead, 4096, 8192)), 8192);
  EXPECT_EQ(std::vector<uint8_t>(driver_->Buffer(0), driver_->Buffer(0) + 8192),
            std::vector<uint8_t>(8192, 0x5A));
  EXPECT_EQ(storage_->stats()->reconnects.load(), 1u);
  EXPECT_EQ(storage_->stats()->timeouts.load(), 0u);
}

TEST_F(NbdBackendTest, RecoveredWhileTheServerIsDownIoFailsAtIoTimeoutThenServesWhenItIsUp) {
  kit_ = std::make_unique<NbdKit>(Socket(), 0, std::vector<std::string>{"memory", "64M"});
  ASSERT_TRUE(Open(kit_->uri(), 300, kExportBytes, false, 1, OpenPurpose::kRecover).ok());
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpRead, 0, 4096)), -EIO);
  EXPECT_GE(storage_->stats()->timeouts.load(), 1u);
  ASSERT_TRUE(kit_->Start());
  const auto deadline = testing_nbd::Clock::now() + std::chrono::seconds(30);
  while (storage_->stats()->reconnects.load() == 0 && testing_nbd::Clock::now() < deadline) {
    driver_->Pump(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpWrite, 0, 4096)), 4096);
}

// Fills tag 0's buffer with `length` bytes derived from `seed`; returns them.
std::vector<uint8_t> Fill(Driver& driver, uint32_t length, uint8_t seed) {
  std::vector<uint8_t> bytes(length);
  for (uint32_t i = 0; i < length; ++i) bytes[i] = static_cast<uint8_t>(seed + i * 13 + (i >> 9));
  std::memcpy(driver.Buffer(0), bytes.data(), length);
  return bytes;
}

TEST_F(NbdBackendTest, AFlushWaitingWhenTheServerLostAcknowledgedWritesFailsWithEio) {
  // The server acknowledges the write into its cache, then crashes at the FLUSH, losing it. The
  // FLUSH is sent again on the next connection, where it cannot make the write durable.
  FakeNbdServer server(Socket(), Lie::kCacheLostAtFirstFlush);
  ASSERT_TRUE(Open(server.uri(), 30000, FakeNbdServer::kExportBytes).ok());
  Fill(*driver_, 64 * 1024, 1);
  ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpWrite, 128 * 1024, 64 * 1024)), 64 * 1024);
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpFlush, 0, 0)), -EIO);
  EXPECT_EQ(server.Durable(128 * 1024, 64 * 1024), std::vector<uint8_t>(64 * 1024));
  EXPECT_EQ(server.connections(), 2);
  EXPECT_EQ(storage_->stats()->unflushed_losses.load(), 1u);
  // The application was told once; later FLUSHes are about later writes.
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpFlush, 0, 0)), 0);
  EXPECT_EQ(storage_->stats()->unflushed_losses.load(), 1u);
  EXPECT_EQ(storage_->stats()->timeouts.load(), 0u);
}

TEST_F(NbdBackendTest, ALossWithNoFlushWaitingFailsTheNextFlush) {
  FakeNbdServer server(Socket(), Lie::kCache);
  ASSERT_TRUE(Open(server.uri(), 30000, FakeNbdServer::kExportBytes).ok());
  Fill(*driver_, 64 * 1024, 2);
  ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpWrite, 0, 64 * 1024)), 64 * 1024);
  server.Crash();
  ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpRead, 0, 4096)), 4096);  // on the next connection
  EXPECT_GE(storage_->stats()->reconnects.load(), 1u);
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpFlush, 0, 0)), -EIO);
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpFlush, 0, 0)), 0);
  EXPECT_EQ(storage_->stats()->unflushed_losses.load(), 1u);
}

TEST_F(NbdBackendTest, WriteZeroesAndTrimAcknowledgedBeforeACrashAreLossesToo) {
  for (const uint8_t op : {abi::kIoOpWriteZeroes, abi::kIoOpDiscard}) {
    SCOPED_TRACE(op);
    FakeNbdServer server(Socket(), Lie::kCache);
    ASSERT_TRUE(Open(server.uri(), 30000, FakeNbdServer::kExportBytes).ok());
    ASSERT_EQ(driver_->RunOne(Io(op, 0, 16 * 1024)), 16 * 1024);
    server.Crash();
    EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpFlush, 0, 0)), -EIO);
    driver_.reset();
    storage_.reset();
  }
}

TEST_F(NbdBackendTest, AnEmulatedFuaWriteReportsAnEarlierLossAndIsDurableItself) {
  // The export has no FUA: a FUA write is the write and a FLUSH, which covers the lost one too.
  FakeNbdServer server(Socket(), Lie::kCache);
  ASSERT_TRUE(Open(server.uri(), 30000, FakeNbdServer::kExportBytes).ok());
  Fill(*driver_, 64 * 1024, 3);
  ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpWrite, 0, 64 * 1024)), 64 * 1024);
  server.Crash();
  const std::vector<uint8_t> b = Fill(*driver_, 64 * 1024, 4);
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpWrite, 256 * 1024, 64 * 1024, abi::kIoFFua)), -EIO);
  EXPECT_EQ(server.Durable(256 * 1024, 64 * 1024), b);
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpWrite, 512 * 1024, 64 * 1024, abi::kIoFFua)), 64 * 1024);
  EXPECT_EQ(storage_->stats()->unflushed_losses.load(), 1u);
}

// A write a FLUSH covered (a server with a write cache), or that needed none (a server without),
// reads back from the next connection after a crash, and no FLUSH fails for it.
TEST_F(NbdBackendTest, DurableWritesOutliveACrashAndNoFlushFails) {
  for (const Lie kind : {Lie::kCache, Lie::kNoCache}) {
    SCOPED_TRACE(kind == Lie::kCache ? "write cache, flushed" : "no write cache");
    FakeNbdServer server(Socket(), kind);
    stats_ = std::make_shared<nbd::Stats>();
    ASSERT_TRUE(Open(server.uri(), 30000, FakeNbdServer::kExportBytes).ok());
    const std::vector<uint8_t> a = Fill(*driver_, 64 * 1024, 5);
    ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpWrite, 0, 64 * 1024)), 64 * 1024);
    if (kind == Lie::kCache) {
      ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpFlush, 0, 0)), 0);
    }
    server.Crash();
    ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpRead, 0, 64 * 1024)), 64 * 1024);
    EXPECT_EQ(std::vector<uint8_t>(driver_->Buffer(0), driver_->Buffer(0) + 64 * 1024), a);
    EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpFlush, 0, 0)), 0);
    EXPECT_GE(storage_->stats()->reconnects.load(), 1u);
    EXPECT_EQ(storage_->stats()->unflushed_losses.load(), 0u);
    driver_.reset();
    storage_.reset();
  }
}

// Multi-conn: nbdkit's write-back cache offers it, so a volume of two queues has a connection each,
// and the block layer sends a FLUSH down the queue of the CPU that asked for it.
class NbdMultiConnCacheTest : public NbdBackendTest {
 protected:
  void SetUp() override {
    NbdBackendTest::SetUp();
    image_ = MakeImage("cached.img");
    StartKit({"--filter=cache", "file", image_, "cache=writeback"});
    ASSERT_TRUE(Open(kit_->uri(), 30000, 16 << 20, false, /*queues=*/2).ok());
    ASSERT_TRUE(storage_->export_info()->can_multi_conn());
    ASSERT_TRUE(storage_->export_info()->can_flush());
    absl::StatusOr<std::unique_ptr<Backend>> second = storage_->NewQueueBackend(kDepth);
    ASSERT_TRUE(second.ok()) << second.status();
    other_ = std::make_unique<Driver>(std::move(*second), kDepth);
    ASSERT_TRUE(other_->attach_status().ok());
  }
  void TearDown() override {
    other_.reset();
    NbdBackendTest::TearDown();
  }
  void CrashAndRestartServer() {
    kit_->Kill();
    ASSERT_TRUE(kit_->Start());
  }

  std::string image_;
  std::unique_ptr<Driver> other_;  // queue 1; driver_ is queue 0
};

TEST_F(NbdMultiConnCacheTest, AWriteOneQueueLostFailsTheNextFlushOfAnotherQueue) {
  Fill(*other_, 64 * 1024, 6);
  ASSERT_EQ(other_->RunOne(Io(abi::kIoOpWrite, 0, 64 * 1024)), 64 * 1024);
  CrashAndRestartServer();
  // Queue 0 wrote nothing itself: its fsync is about queue 1's write, which died with the cache.
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpFlush, 0, 0)), -EIO);
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpFlush, 0, 0)), 0);
  // Queue 1 sees its own drop now: the same loss, already reported.
  ASSERT_EQ(other_->RunOne(Io(abi::kIoOpRead, 0, 64 * 1024)), 64 * 1024);
  EXPECT_EQ(std::vector<uint8_t>(other_->Buffer(0), other_->Buffer(0) + 64 * 1024),
            std::vector<uint8_t>(64 * 1024));
  EXPECT_EQ(other_->RunOne(Io(abi::kIoOpFlush, 0, 0)), 0);
  EXPECT_EQ(storage_->stats()->unflushed_losses.load(), 1u);
}

TEST_F(NbdMultiConnCacheTest, AFlushOnOneQueueCoversTheWritesOfAnotherAcrossACrash) {
  const std::vector<uint8_t> a = Fill(*other_, 64 * 1024, 7);
  ASSERT_EQ(other_->RunOne(Io(abi::kIoOpWrite, 0, 64 * 1024)), 64 * 1024);
  ASSERT_EQ(driver_->RunOne(Io(abi::kIoOpFlush, 0, 0)), 0);
  CrashAndRestartServer();
  ASSERT_EQ(other_->RunOne(Io(abi::kIoOpRead, 0, 64 * 1024)), 64 * 1024);
  EXPECT_EQ(std::vector<uint8_t>(other_->Buffer(0), other_->Buffer(0) + 64 * 1024), a);
  // Nothing was lost: no queue's FLUSH may say otherwise.
  EXPECT_EQ(other_->RunOne(Io(abi::kIoOpFlush, 0, 0)), 0);
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpFlush, 0, 0)), 0);
  EXPECT_EQ(storage_->stats()->unflushed_losses.load(), 0u);
}

TEST_F(NbdMultiConnCacheTest, AFlushWaitingOnOneQueueWhenAnotherQueuesWriteIsLostFailsWithEio) {
  Fill(*other_, 64 * 1024, 8);
  ASSERT_EQ(other_->RunOne(Io(abi::kIoOpWrite, 0, 64 * 1024)), 64 * 1024);
  // The crash comes while queue 0's FLUSH waits for the server to come back.
  kit_->Kill();
  bool restarted = false;
  driver_->on_pumped = [&] {
    if (!restarted) restarted = kit_->Start();
  };
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpFlush, 0, 0)), -EIO);
  driver_->on_pumped = nullptr;
  ASSERT_TRUE(restarted);
  EXPECT_EQ(other_->RunOne(Io(abi::kIoOpFlush, 0, 0)), 0);
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpFlush, 0, 0)), 0);
  EXPECT_EQ(storage_->stats()->unflushed_losses.load(), 1u);
}

class NbdLyingServerTest : public NbdBackendTest, public ::testing::WithParamInterface<Lie> {};

TEST_P(NbdLyingServerTest, ConnectionIsDroppedAndTheRequestRetried) {
  FakeNbdServer server(Socket(), GetParam());
  ASSERT_TRUE(Open(server.uri(), 30000, FakeNbdServer::kExportBytes).ok());
  std::memset(driver_->Buffer(0), 0x77, 8192);
  EXPECT_EQ(driver_->RunOne(Io(abi::kIoOpRead, 4096, 8192)), 8192);
  EXPECT_TRUE(RangeIsZero(0, 8192));
  EXPECT_EQ(storage_->stats()->protocol_errors.load(), 1u);
  EXPECT_EQ(storage_->stats()->reconnects.load(), 1u);
  EXPECT_EQ(server.connections(), 2);
}

INSTANTIATE_TEST_SUITE_P(Lies, NbdLyingServerTest,
                         ::testing::Values(Lie::kWrongCookie, Lie::kTooLongChunk,
                                           Lie::kGarbageMagic, Lie::kSameHalfTwice),
                         [](const ::testing::TestParamInfo<Lie>& info) {
                           switch (info.param) {
                             case Lie::kWrongCookie:
                               return "WrongCookie";
                             case Lie::kTooLongChunk:
                               return "TooLongChunk";
                             case Lie::kGarbageMagic:
                               return "GarbageMagic";
                             case Lie::kSameHalfTwice:
                               return "SameHalfTwice";
                             case Lie::kShutdownThenRefuse:
                             case Lie::kAlwaysShuttingDown:
                             case Lie::kDiesMidPayload:
                             case Lie::kStallsMidPayload:
                             case Lie::kCacheLostAtFirstFlush:
                             case Lie::kCache:
                             case Lie::kNoCache:
                               break;  // not lies: their own tests
                           }
                           return "Unknown";
                         });

}  // namespace
}  // namespace blk::server
