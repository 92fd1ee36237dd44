// Several queues of one NBD volume on a real nbdkit that does not advertise multi-conn: they share
// queue 0's connection, each queue on its own thread and ring as in the device.
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <future>
#include <random>
#include <sstream>
#include <thread>

#include "gtest/gtest.h"
#include "server/nbd/storage.h"
#include "server/ublk/abi.h"
#include "tests/integration/nbd_test_support.h"

namespace blk::server {
namespace {

using testing_nbd::Driver;
using testing_nbd::NbdKit;
using testing_nbd::QueueThread;

constexpr uint16_t kQueueDepth = 32;

BlockIo Io(uint8_t op, uint64_t offset, uint32_t length, uint32_t flags = 0) {
  BlockIo io;
  io.op = op;
  io.offset = offset;
  io.length = length;
  io.flags = flags;
  return io;
}

// Each queue owns one region of the export and mirrors what it wrote there.
struct Region {
  uint64_t base = 0;
  uint64_t span = 0;
  std::vector<uint8_t> model;
};

// kQueueDepth writes at once of random data, sizes and places (one slice of the region per tag),
// then kQueueDepth reads of random ranges compared with the model. "" when all went right.
std::string WriteAndReadBack(Driver& driver, Region& region, std::mt19937_64& rng, int rounds,
                             uint32_t max_io, uint32_t flags = 0) {
  const uint64_t slice = region.span / kQueueDepth;
  for (int round = 0; round < rounds; ++round) {
    std::vector<BlockIo> ios;
    for (uint16_t tag = 0; tag < kQueueDepth; ++tag) {
      const uint32_t length =
          512 * static_cast<uint32_t>(1 + rng() % (std::min<uint64_t>(max_io, slice) / 512));
      const uint64_t room = (slice - length) / 512;
      const uint64_t offset = tag * slice + 512 * (room ? rng() % room : 0);
      ios.push_back(Io(abi::kIoOpWrite, region.base + offset, length, flags));
      uint8_t* buffer = driver.Buffer(tag);
      for (uint32_t i = 0; i < length; ++i) buffer[i] = static_cast<uint8_t>(rng());
      std::memcpy(region.model.data() + offset, buffer, length);
    }
    std::vector<int32_t> results = driver.Run(ios);
    for (uint16_t tag = 0; tag < kQueueDepth; ++tag) {
      if (results[tag] != static_cast<int32_t>(ios[tag].length)) {
        return "write of tag " + std::to_string(tag) + " returned " + std::to_string(results[tag]);
      }
    }
  }
  return "";
}

std::string ReadsMatch(Driver& driver, const Region& region, std::mt19937_64& rng, int rounds) {
  for (int round = 0; round < rounds; ++round) {
    std::vector<BlockIo> ios;
    for (uint16_t tag = 0; tag < kQueueDepth; ++tag) {
      const uint32_t length = 512 * static_cast<uint32_t>(1 + rng() % 1024);
      const uint64_t offset = 512 * (rng() % ((region.span - length) / 512));
      ios.push_back(Io(abi::kIoOpRead, region.base + offset, length));
    }
    std::vector<int32_t> results = driver.Run(ios);
    for (uint16_t tag = 0; tag < kQueueDepth; ++tag) {
      if (results[tag] != static_cast<int32_t>(ios[tag].length)) {
        return "read of tag " + std::to_string(tag) + " returned " + std::to_string(results[tag]);
      }
      const uint64_t at = ios[tag].offset - region.base;
      if (std::memcmp(driver.Buffer(tag), region.model.data() + at, ios[tag].length) != 0) {
        return "data differs at " + std::to_string(ios[tag].offset) + "+" +
               std::to_string(ios[tag].length);
      }
    }
  }
  return "";
}

class NbdSharedConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir_template[] = "/tmp/nbd-shared.XXXXXX";
    ASSERT_NE(::mkdtemp(dir_template), nullptr);
    dir_ = dir_template;
  }
  void TearDown() override {
    // Queue 0 serves the others: it ends last, as in the device.
    while (!queues_.empty()) queues_.pop_back();
    storage_.reset();
    kit_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::string Log() const { return dir_ + "/nbdkit.log"; }

  // nbdkit without multi-conn, logging every connection and request to Log().
  void StartKit(std::vector<std::string> plugin_args,
                const std::vector<std::string>& filters = {}) {
    std::vector<std::string> args = {"--filter=log", "--filter=multi-conn"};
    for (const std::string& filter : filters) args.push_back("--filter=" + filter);
    args.insert(args.end(), plugin_args.begin(), plugin_args.end());
    args.insert(args.end(), {"multi-conn-mode=disable", "logfile=" + Log(), "logappend=true"});
    kit_ = std::make_unique<NbdKit>(dir_ + "/nbd.sock", 0, std::move(args));
    ASSERT_TRUE(kit_->Start()) << "nbdkit did not start";
  }

  // Opens a volume of `queues` queues and starts them in queue order, as the device does.
  absl::Status Open(uint16_t queues, uint64_t size, uint32_t io_timeout_ms = 30000) {
    DeviceConfig config;
    config.size_bytes = size;
    config.queue_depth = kQueueDepth;
    config.queues = queues;
    NbdBackendConfig backend;
    backend.uri = kit_->uri();
    backend.io_timeout_ms = io_timeout_ms;
    backend.stats = stats_;
    absl::StatusOr<std::unique_ptr<nbd::Storage>> storage = nbd::Storage::Open(backend, config);
    if (!storage.ok()) return storage.status();
    storage_ = std::move(*storage);
    if (storage_->export_info()->can_multi_conn()) return absl::InternalError("multi-conn offered");
    for (uint16_t q = 0; q < queues; ++q) {
      absl::StatusOr<std::unique_ptr<Backend>> backend_of_queue =
          storage_->NewQueueBackend(kQueueDepth);
      if (!backend_of_queue.ok()) return backend_of_queue.status();
      queues_.push_back(std::make_unique<QueueThread>(std::move(*backend_of_queue), kQueueDepth));
      if (!queues_.back()->attach_status().ok()) return queues_.back()->attach_status();
    }
    regions_.assign(queues, Region{});
    for (uint16_t q = 0; q < queues; ++q) {
      regions_[q].span = size / queues / 65536 * 65536;
      regions_[q].base = q * regions_[q].span;
      regions_[q].model.assign(regions_[q].span, 0);
    }
    return absl::OkStatus();
  }

  // Runs work(queue, driver) on every queue at once; what went wrong, per queue.
  void OnEveryQueue(const std::function<std::string(uint16_t, Driver&)>& work) {
    std::vector<std::future<std::string>> done;
    for (size_t q = 0; q < queues_.size(); ++q) {
      done.push_back(queues_[q]->Post([&work, q](Driver& driver) { return work(q, driver); }));
    }
    for (size_t q = 0; q < done.size(); ++q) EXPECT_EQ(done[q].get(), "") << "queue " << q;
  }

  // Runs one I/O on `queue`'s thread; its result.
  int32_t RunOn(uint16_t queue, const BlockIo& io) {
    int32_t result = testing_nbd::kNotCompleted;
    queues_[queue]
        ->Post([&](Driver& driver) {
          result = driver.RunOne(io);
          return std::string();
        })
        .get();
    return result;
  }

  // Lines of the nbdkit log that contain `what`, and those of them not on connection `id`.
  std::pair<int, int> LogLines(const std::string& what, int id = 0) const {
    std::ifstream in(Log());
    std::string line;
    int all = 0;
    int elsewhere = 0;
    const std::string on = "connection=" + std::to_string(id) + " ";
    while (std::getline(in, line)) {
      if (line.find(what) == std::string::npos) continue;
      ++all;
      if (line.find(on) == std::string::npos) ++elsewhere;
    }
    return {all, elsewhere};
  }

  // Three queues write and read back while the server is stopped with `signal` and restarted.
  void RestartUnderLoadOnEveryQueue(int signal) {
    // The file plugin keeps the data across restarts; the delay keeps requests in flight.
    const std::string image = dir_ + "/disk.img";
    { std::ofstream create(image); }
    std::filesystem::resize_file(image, 16 << 20);
    StartKit({"file", image, "wdelay=20ms"}, {"delay"});
    ASSERT_TRUE(Open(3, 16 << 20).ok());
    std::atomic<int> completions{0};
    std::promise<void> started;
    std::future<void> under_load = started.get_future();
    std::atomic<bool> restarted{false};
    // Once 48 requests completed, the server is stopped and restarted from another thread (a
    // graceful stop only ends once the client let go: the queues must go on meanwhile).
    // It lives until the end: nbdkit --exit-with-parent ends with the thread that started it.
    std::promise<void> finished;
    std::promise<void> restart_done_promise;
    std::future<void> restart_done = restart_done_promise.get_future();
    std::thread admin([&, until = finished.get_future()] {
      under_load.wait();
      kit_->Stop(signal);
      restarted = kit_->Start();
      restart_done_promise.set_value();
      until.wait();
    });
    OnEveryQueue([&](uint16_t q, Driver& driver) {
      driver.on_result = [&](uint16_t, int32_t) {
        if (++completions == 48) started.set_value();
      };
      std::mt19937_64 rng(3000 + q);
      std::string problem = WriteAndReadBack(driver, regions_[q], rng, 3, 128 * 1024);
      driver.on_result = nullptr;
      if (problem.empty()) problem = ReadsMatch(driver, regions_[q], rng, 2);
      return problem;
    });
    if (completions < 48) started.set_value();  // failed early: let the admin go
    restart_done.wait();
    // Read again after the restart, whenever it ended.
    OnEveryQueue([&](uint16_t q, Driver& driver) {
      std::mt19937_64 rng(4000 + q);
      return ReadsMatch(driver, regions_[q], rng, 1);
    });
    finished.set_value();
    admin.join();
    EXPECT_TRUE(restarted);
    EXPECT_GE(stats_->reconnects.load(), 1u);
    EXPECT_EQ(stats_->timeouts.load(), 0u);
    EXPECT_EQ(stats_->server_errors.load(), 0u);
    // One connection at a time: the first, and one per reconnect.
    EXPECT_EQ(LogLines(" Connect ").first, 1 + static_cast<int>(stats_->reconnects.load()));
  }

  std::string dir_;
  std::unique_ptr<NbdKit> kit_;
  std::unique_ptr<nbd::Storage> storage_;
  std::vector<std::unique_ptr<QueueThread>> queues_;
  std::vector<Region> regions_;
  std::shared_ptr<nbd::Stats> stats_ = std::make_shared<nbd::Stats>();
};

TEST_F(NbdSharedConnectionTest, FourQueuesShareOneConnectionAndReadBackWhatEachWrote) {
  // The policy filter also makes 1 MiB requests split into 64 KiB ones, forwarded ones included.
  StartKit({"memory", "64M", "blocksize-maximum=65536", "blocksize-error-policy=error"},
           {"blocksize-policy"});
  ASSERT_TRUE(Open(4, 64 << 20).ok());
  EXPECT_FALSE(storage_->NewQueueBackend(kQueueDepth).ok()) << "a fifth queue on a 4-queue volume";

  OnEveryQueue([this](uint16_t q, Driver& driver) {
    std::mt19937_64 rng(1000 + q);
    std::string problem = WriteAndReadBack(driver, regions_[q], rng, 3, Driver::kMaxIoBytes,
                                           q == 2 ? abi::kIoFFua : 0);
    if (problem.empty()) problem = ReadsMatch(driver, regions_[q], rng, 3);
    return problem;
  });
  // A FLUSH from one queue, then each queue reads what the next one wrote.
  EXPECT_EQ(RunOn(3, Io(abi::kIoOpFlush, 0, 0)), 0);
  OnEveryQueue([this](uint16_t q, Driver& driver) {
    std::mt19937_64 rng(2000 + q);
    return ReadsMatch(driver, regions_[(q + 1) % regions_.size()], rng, 2);
  });

  const auto [connects, other_connects] = LogLines(" Connect ");
  EXPECT_EQ(connects, 1) << "connections the server saw";
  const auto [writes, writes_elsewhere] = LogLines(" Write ", 1);
  EXPECT_GE(writes, 4 * 3 * kQueueDepth);
  EXPECT_EQ(writes_elsewhere, 0) << "writes on another connection than the first";
  EXPECT_EQ(stats_->server_errors.load(), 0u);
}

TEST_F(NbdSharedConnectionTest, ServerKilledAndRestartedMidStreamLosesNothingOnAnyQueue) {
  RestartUnderLoadOnEveryQueue(SIGKILL);
}

TEST_F(NbdSharedConnectionTest, ServerStoppedGracefullyAndRestartedLosesNothingOnAnyQueue) {
  // nbdkit answers the requests it has, forwarded ones included, with NBD_ESHUTDOWN.
  RestartUnderLoadOnEveryQueue(SIGTERM);
}

TEST_F(NbdSharedConnectionTest, ServerErrorsReachTheForwardingQueueAndAreCounted) {
  StartKit({"memory", "64M", "error-pwrite=ENOSPC", "error-pwrite-rate=100%"}, {"error"});
  ASSERT_TRUE(Open(2, 64 << 20).ok());
  EXPECT_EQ(RunOn(1, Io(abi::kIoOpWrite, 0, 4096)), -ENOSPC);
  EXPECT_EQ(RunOn(1, Io(abi::kIoOpWrite, 1 << 20, 4096)), -ENOSPC);
  EXPECT_EQ(RunOn(0, Io(abi::kIoOpWrite, 2 << 20, 4096)), -ENOSPC);
  EXPECT_EQ(RunOn(1, Io(abi::kIoOpRead, 0, 4096)), 4096);
  EXPECT_EQ(stats_->server_errors.load(), 3u);
}

TEST_F(NbdSharedConnectionTest, ServerDownPastIoTimeoutFailsForwardedRequestsThenRecovers) {
  StartKit({"memory", "64M"});
  ASSERT_TRUE(Open(2, 64 << 20, /*io_timeout_ms=*/800).ok());
  ASSERT_EQ(RunOn(1, Io(abi::kIoOpRead, 0, 4096)), 4096);
  kit_->Kill();
  EXPECT_EQ(RunOn(1, Io(abi::kIoOpRead, 0, 4096)), -EIO);
  EXPECT_GE(stats_->timeouts.load(), 1u);
  // While the server stays away, new requests fail at once, forwarded or not.
  EXPECT_EQ(RunOn(1, Io(abi::kIoOpRead, 0, 4096)), -EIO);
  EXPECT_EQ(RunOn(0, Io(abi::kIoOpRead, 0, 4096)), -EIO);

  ASSERT_TRUE(kit_->Start());
  const auto deadline = testing_nbd::Clock::now() + std::chrono::seconds(15);
  int32_t result = -EIO;
  while (result != 4096 && testing_nbd::Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // polling interval
    result = RunOn(1, Io(abi::kIoOpRead, 0, 4096));
  }
  EXPECT_EQ(result, 4096);
  EXPECT_EQ(stats_->reconnects.load(), 1u);
}

TEST_F(NbdSharedConnectionTest, AForwardingQueueWithoutQueueZeroRunningIsRefused) {
  StartKit({"memory", "64M"});
  DeviceConfig config;
  config.size_bytes = 64 << 20;
  config.queue_depth = kQueueDepth;
  config.queues = 2;
  NbdBackendConfig backend;
  backend.uri = kit_->uri();
  absl::StatusOr<std::unique_ptr<nbd::Storage>> storage = nbd::Storage::Open(backend, config);
  ASSERT_TRUE(storage.ok()) << storage.status();
  absl::StatusOr<std::unique_ptr<Backend>> first = (*storage)->NewQueueBackend(kQueueDepth);
  ASSERT_TRUE(first.ok());
  absl::StatusOr<std::unique_ptr<Backend>> second = (*storage)->NewQueueBackend(kQueueDepth);
  ASSERT_TRUE(second.ok());
  QueueThread orphan(std::move(*second), kQueueDepth);
  EXPECT_EQ(orphan.attach_status().code(), absl::StatusCode::kFailedPrecondition)
      << orphan.attach_status();
}

}  // namespace
}  // namespace blk::server
