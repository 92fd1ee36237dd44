#include "server/local/file_backend.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "server/local/null_backend.h"
#include "server/ublk/abi.h"
#include "tests/unit/server/recording_completer.h"

namespace blk::server {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kFileSize = 4 << 20;
constexpr uint32_t kBufferBytes = 256 * 1024;
constexpr uint16_t kDepth = 16;

// Page-aligned per-tag buffers, as a queue has them.
class Buffers {
 public:
  Buffers() {
    EXPECT_EQ(posix_memalign(&memory_, 4096, size_t{kDepth} * kBufferBytes), 0);
    std::memset(memory_, 0, size_t{kDepth} * kBufferBytes);
  }
  ~Buffers() { free(memory_); }
  char* tag(uint16_t t) { return static_cast<char*>(memory_) + size_t{t} * kBufferBytes; }

 private:
  void* memory_ = nullptr;
};

// Drives a backend the way a queue does, without ublk: one ring, its CQEs fed back.
class Harness {
 public:
  explicit Harness(Backend& backend) : backend_(backend) {
    absl::StatusOr<std::unique_ptr<Ring>> ring = Ring::Create(64);
    EXPECT_TRUE(ring.ok()) << ring.status();
    ring_ = std::move(*ring);
    std::vector<int> files = backend.Files();
    if (!files.empty()) {
      EXPECT_EQ(io_uring_register_files(ring_->get(), files.data(), files.size()), 0);
    }
    EXPECT_TRUE(backend.Attach(*ring_, 0, done_.completer()).ok());
  }

  // Submits all I/Os at once (as concurrent tags) and returns each tag's result.
  std::map<uint16_t, int32_t> RunAll(const std::map<uint16_t, BlockIo>& ios) {
    for (const auto& [tag, io] : ios) backend_.Submit(tag, io);
    std::set<uint16_t> tags;
    for (const auto& [tag, io] : ios) tags.insert(tag);
    return Collect(tags);
  }

  // Turns of the loop until each of `tags` completed; their results.
  std::map<uint16_t, int32_t> Collect(const std::set<uint16_t>& tags) {
    std::map<uint16_t, int32_t> results;
    while (true) {
      while (std::optional<std::pair<uint16_t, int32_t>> done = done_.Next()) {
        EXPECT_TRUE(tags.contains(done->first)) << "completed tag " << done->first;
        EXPECT_TRUE(results.emplace(done->first, done->second).second)
            << "tag " << done->first << " completed twice";
      }
      if (results.size() >= tags.size()) break;
      io_uring_cqe* cqe = nullptr;
      int rc = io_uring_submit_and_wait(ring_->get(), 1);
      EXPECT_GE(rc, 0);
      while (io_uring_peek_cqe(ring_->get(), &cqe) == 0 && cqe != nullptr) {
        EXPECT_EQ(KindOf(cqe->user_data), CqeKind::kBackend);
        backend_.OnCompletion(TagOf(cqe->user_data), *cqe);
        io_uring_cqe_seen(ring_->get(), cqe);
      }
      backend_.EndOfTurn();
    }
    return results;
  }

  Ring& ring() { return *ring_; }
  RecordingCompleter& done() { return done_; }

  int32_t Run(uint16_t tag, const BlockIo& io) { return RunAll({{tag, io}})[tag]; }

 private:
  Backend& backend_;
  std::unique_ptr<Ring> ring_;
  RecordingCompleter done_;
};

BlockIo Io(uint8_t op, uint64_t offset, uint32_t length, void* buffer, uint32_t flags = 0) {
  BlockIo io;
  io.op = op;
  io.offset = offset;
  io.length = length;
  io.buffer = buffer;
  io.flags = flags;
  return io;
}

class FileBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("file_backend_test." + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "volume.img").string();
    config_.size_bytes = kFileSize;
    config_.logical_block_size = 512;
    config_.max_io_bytes = kBufferBytes;
    config_.backend = FileBackendConfig{path_};
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<FileStorage> OpenStorageOrDie() {
    absl::StatusOr<std::unique_ptr<FileStorage>> storage =
        FileStorage::Open(path_, config_, OpenPurpose::kCreate);
    EXPECT_TRUE(storage.ok()) << storage.status();
    return storage.ok() ? std::move(*storage) : nullptr;
  }

  std::vector<char> FileBytes(uint64_t offset, size_t length) {
    std::vector<char> bytes(length);
    int fd = ::open(path_.c_str(), O_RDONLY);
    EXPECT_EQ(::pread(fd, bytes.data(), length, offset), static_cast<ssize_t>(length));
    ::close(fd);
    return bytes;
  }

  void FillFile(char value) {
    std::vector<char> bytes(kFileSize, value);
    int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT, 0600);
    ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
    ::close(fd);
  }

  fs::path dir_;
  std::string path_;
  DeviceConfig config_;
  Buffers buffers_;
};

TEST_F(FileBackendTest, CreatesAMissingFileSparseAtTheDeviceSize) {
  auto storage = OpenStorageOrDie();
  ASSERT_NE(storage, nullptr);
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), kFileSize);
  EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, kFileSize);
}

TEST_F(FileBackendTest, GrowExtendsTheFileSparseKeepingItsDataAndNeverShortensIt) {
  FillFile('d');
  auto storage = OpenStorageOrDie();
  ASSERT_NE(storage, nullptr);
  ASSERT_TRUE(storage->Grow(4 * kFileSize).ok());
  EXPECT_EQ(fs::file_size(path_), 4 * kFileSize);
  EXPECT_EQ(FileBytes(kFileSize - 1, 1)[0], 'd');
  EXPECT_EQ(FileBytes(kFileSize, 1)[0], 0);
  // A size the file already has changes nothing.
  ASSERT_TRUE(storage->Grow(2 * kFileSize).ok());
  EXPECT_EQ(fs::file_size(path_), 4 * kFileSize);
}

TEST_F(FileBackendTest, RefusesAnExistingFileSmallerThanTheDeviceNamingBothSizes) {
  { std::ofstream(path_) << "tiny"; }
  absl::StatusOr<std::unique_ptr<FileStorage>> storage =
      FileStorage::Open(path_, config_, OpenPurpose::kCreate);
  ASSERT_EQ(storage.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(storage.status().message());
  EXPECT_NE(message.find(path_), std::string::npos) << message;
  EXPECT_NE(message.find(" 4 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find(std::to_string(kFileSize)), std::string::npos) << message;
  EXPECT_EQ(fs::file_size(path_), 4u);  // untouched
}

TEST_F(FileBackendTest, RefusesAPathWhoseDirectoryDoesNotExist) {
  const std::string path = (dir_ / "missing" / "volume.img").string();
  absl::StatusOr<std::unique_ptr<FileStorage>> storage =
      FileStorage::Open(path, config_, OpenPurpose::kCreate);
  ASSERT_EQ(storage.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(storage.status().message().find("does not exist"), absl::string_view::npos);
  EXPECT_FALSE(fs::exists(dir_ / "missing"));
}

TEST_F(FileBackendTest, RefusesADirectory) {
  absl::StatusOr<std::unique_ptr<FileStorage>> storage =
      FileStorage::Open(dir_.string(), config_, OpenPurpose::kCreate);
  EXPECT_EQ(storage.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(FileBackendTest, DataWrittenIsReadBack) {
  auto storage = OpenStorageOrDie();
  ASSERT_NE(storage, nullptr);
  FileBackend backend(storage->fd(), kDepth);
  Harness harness(backend);
  for (uint32_t i = 0; i < kBufferBytes; ++i) buffers_.tag(1)[i] = static_cast<char>(i * 7 + 3);
  EXPECT_EQ(harness.Run(1, Io(abi::kIoOpWrite, 1 << 20, kBufferBytes, buffers_.tag(1))),
            static_cast<int32_t>(kBufferBytes));
  EXPECT_EQ(harness.Run(2, Io(abi::kIoOpRead, 1 << 20, kBufferBytes, buffers_.tag(2))),
            static_cast<int32_t>(kBufferBytes));
  EXPECT_EQ(std::memcmp(buffers_.tag(1), buffers_.tag(2), kBufferBytes), 0);
  std::vector<char> on_disk = FileBytes(1 << 20, kBufferBytes);
  EXPECT_EQ(std::memcmp(on_disk.data(), buffers_.tag(1), kBufferBytes), 0);
}

TEST_F(FileBackendTest, ConcurrentTagsLandAtTheirOwnOffsets) {
  auto storage = OpenStorageOrDie();
  ASSERT_NE(storage, nullptr);
  FileBackend backend(storage->fd(), kDepth);
  Harness harness(backend);
  std::map<uint16_t, BlockIo> writes;
  for (uint16_t tag = 0; tag < kDepth; ++tag) {
    std::memset(buffers_.tag(tag), 'a' + tag, 4096);
    writes[tag] = Io(abi::kIoOpWrite, uint64_t{tag} * 8192, 4096, buffers_.tag(tag));
  }
  for (const auto& [tag, result] : harness.RunAll(writes)) EXPECT_EQ(result, 4096) << tag;
  for (uint16_t tag = 0; tag < kDepth; ++tag) {
    std::vector<char> on_disk = FileBytes(uint64_t{tag} * 8192, 4096);
    EXPECT_EQ(on_disk, std::vector<char>(4096, static_cast<char>('a' + tag))) << tag;
  }
}

TEST_F(FileBackendTest, FuaWriteAndFlushSucceed) {
  auto storage = OpenStorageOrDie();
  ASSERT_NE(storage, nullptr);
  FileBackend backend(storage->fd(), kDepth);
  Harness harness(backend);
  std::memset(buffers_.tag(0), 'F', 4096);
  EXPECT_EQ(harness.Run(0, Io(abi::kIoOpWrite, 0, 4096, buffers_.tag(0), abi::kIoFFua)), 4096);
  EXPECT_EQ(harness.Run(0, Io(abi::kIoOpFlush, 0, 0, buffers_.tag(0))), 0);
  EXPECT_EQ(FileBytes(0, 4096), std::vector<char>(4096, 'F'));
}

TEST_F(FileBackendTest, DiscardedRangeReadsAsZeroesAndTheFileKeepsItsSize) {
  auto storage = OpenStorageOrDie();
  ASSERT_NE(storage, nullptr);
  FillFile('x');
  FileBackend backend(storage->fd(), kDepth);
  Harness harness(backend);
  EXPECT_EQ(harness.Run(3, Io(abi::kIoOpDiscard, 65536, 65536, buffers_.tag(3))), 65536);
  EXPECT_EQ(FileBytes(65536, 65536), std::vector<char>(65536, 0));
  EXPECT_EQ(FileBytes(0, 65536), std::vector<char>(65536, 'x'));
  EXPECT_EQ(FileBytes(131072, 512), std::vector<char>(512, 'x'));
  EXPECT_EQ(fs::file_size(path_), kFileSize);
}

TEST_F(FileBackendTest, WriteZeroesZeroesExactlyTheRange) {
  auto storage = OpenStorageOrDie();
  ASSERT_NE(storage, nullptr);
  FillFile('y');
  FileBackend backend(storage->fd(), kDepth);
  Harness harness(backend);
  EXPECT_EQ(harness.Run(4, Io(abi::kIoOpWriteZeroes, 4096, 8192, buffers_.tag(4))), 8192);
  EXPECT_EQ(FileBytes(4096, 8192), std::vector<char>(8192, 0));
  EXPECT_EQ(FileBytes(0, 4096), std::vector<char>(4096, 'y'));
  EXPECT_EQ(FileBytes(12288, 4096), std::vector<char>(4096, 'y'));
  EXPECT_EQ(fs::file_size(path_), kFileSize);
}

TEST_F(FileBackendTest, AReadThatFindsTheEndOfAShrunkFileFailsWithEioAndIsCounted) {
  auto stats = std::make_shared<FileStats>();
  config_.backend = FileBackendConfig{path_, stats};
  auto storage = OpenStorageOrDie();
  ASSERT_NE(storage, nullptr);
  FillFile('z');
  ASSERT_EQ(::truncate(path_.c_str(), 4096), 0);
  std::unique_ptr<Backend> backend = *storage->NewQueueBackend(kDepth);
  Harness harness(*backend);
  // Zeroes would pass for the volume's data: the read fails instead.
  EXPECT_EQ(harness.Run(5, Io(abi::kIoOpRead, 0, 16384, buffers_.tag(5))), -EIO);
  EXPECT_EQ(stats->reads_past_end.load(), 1u);
  // What the file still holds reads as before.
  EXPECT_EQ(harness.Run(6, Io(abi::kIoOpRead, 0, 4096, buffers_.tag(6))), 4096);
  EXPECT_EQ(std::vector<char>(buffers_.tag(6), buffers_.tag(6) + 4096),
            std::vector<char>(4096, 'z'));
  EXPECT_EQ(stats->reads_past_end.load(), 1u);
}

TEST_F(FileBackendTest, AnIoThatFindsNoFreeSqeIsIssuedOnALaterTurnNotFailed) {
  auto storage = OpenStorageOrDie();
  ASSERT_NE(storage, nullptr);
  FillFile('q');
  FileBackend backend(storage->fd(), kDepth);
  Harness harness(backend);
  Ring& ring = harness.ring();
  // A full submission queue the kernel will not take (as while its CQ overflows).
  unsigned nops = 0;
  while (io_uring_sqe* nop = io_uring_get_sqe(ring.get())) {
    io_uring_prep_nop(nop);
    ++nops;
  }
  ring.HoldSubmissionsForTest(true);
  backend.Submit(3, Io(abi::kIoOpRead, 8192, 4096, buffers_.tag(3)));
  backend.EndOfTurn();
  EXPECT_TRUE(ring.TakeSqeShortage());
  EXPECT_EQ(harness.done().untaken(), 0u);  // neither failed nor dropped: waiting

  ring.HoldSubmissionsForTest(false);
  ASSERT_EQ(io_uring_submit_and_wait(ring.get(), nops), static_cast<int>(nops));
  io_uring_cq_advance(ring.get(), nops);
  backend.EndOfTurn();  // the loop's next turn
  EXPECT_EQ(harness.Collect({3})[3], 4096);
  EXPECT_EQ(std::vector<char>(buffers_.tag(3), buffers_.tag(3) + 4096),
            std::vector<char>(4096, 'q'));
}

// The queue refuses writes to a read-only device (io_admission_test.cc); the storage adds that
// the file is not even open for writing.
TEST_F(FileBackendTest, AReadOnlyDeviceOpensItsFileReadOnlyAndReads) {
  FillFile('r');
  config_.read_only = true;
  auto storage = OpenStorageOrDie();
  ASSERT_NE(storage, nullptr);
  EXPECT_EQ(::fcntl(storage->fd(), F_GETFL) & O_ACCMODE, O_RDONLY);
  absl::StatusOr<std::unique_ptr<Backend>> backend = storage->NewQueueBackend(kDepth);
  ASSERT_TRUE(backend.ok());
  Harness harness(**backend);
  EXPECT_EQ(harness.Run(0, Io(abi::kIoOpRead, 0, 4096, buffers_.tag(0))), 4096);
  EXPECT_EQ(std::vector<char>(buffers_.tag(0), buffers_.tag(0) + 4096),
            std::vector<char>(4096, 'r'));
}

// Recovering a live device, or re-creating one after a reboot (its file system not mounted
// yet, say): the data was there, so a missing file is an error, never a new empty one.
TEST_F(FileBackendTest, OpenedForRecoveryOrReopenAMissingFileIsNotFoundAndNotCreated) {
  for (OpenPurpose purpose : {OpenPurpose::kRecover, OpenPurpose::kReopen}) {
    absl::StatusOr<std::unique_ptr<FileStorage>> storage =
        FileStorage::Open(path_, config_, purpose);
    ASSERT_EQ(storage.status().code(), absl::StatusCode::kNotFound);
    EXPECT_NE(storage.status().message().find(path_), absl::string_view::npos);
    EXPECT_NE(storage.status().message().find("not re-created empty"), absl::string_view::npos);
    EXPECT_FALSE(fs::exists(path_));
  }
}

TEST_F(FileBackendTest, OpenedForRecoveryAnExistingFileServesItsData) {
  FillFile('k');
  absl::StatusOr<std::unique_ptr<FileStorage>> storage =
      FileStorage::Open(path_, config_, OpenPurpose::kRecover);
  ASSERT_TRUE(storage.ok()) << storage.status();
  FileBackend backend((*storage)->fd(), kDepth);
  Harness harness(backend);
  EXPECT_EQ(harness.Run(0, Io(abi::kIoOpRead, 0, 4096, buffers_.tag(0))), 4096);
  EXPECT_EQ(std::vector<char>(buffers_.tag(0), buffers_.tag(0) + 4096),
            std::vector<char>(4096, 'k'));
}

// A null backend attached to a ring, with a buffer per tag.
class NullBackendTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(backend.Attach(*ring, 0, done.completer()).ok()); }

  NullBackend backend{kDepth};
  RecordingCompleter done;
  std::unique_ptr<Ring> ring = std::move(*Ring::Create(8));
  Buffers buffers;
};

TEST_F(NullBackendTest, ReadsZeroesAndCompletesEverythingElseAtOnce) {
  // As the kernel does for a write: its data lands in the tag's buffer first.
  std::memset(buffers.tag(0), 0x77, 8192);
  backend.Submit(0, Io(abi::kIoOpWrite, 0, 8192, buffers.tag(0)));
  EXPECT_EQ(done.Take(0), 8192);
  // Reads on that tag return zeroes, a shorter one and then a longer one.
  backend.Submit(0, Io(abi::kIoOpRead, 0, 4096, buffers.tag(0)));
  EXPECT_EQ(done.Take(0), 4096);
  EXPECT_EQ(std::vector<char>(buffers.tag(0), buffers.tag(0) + 4096), std::vector<char>(4096, 0));
  backend.Submit(0, Io(abi::kIoOpRead, 0, 8192, buffers.tag(0)));
  EXPECT_EQ(done.Take(0), 8192);
  EXPECT_EQ(std::vector<char>(buffers.tag(0), buffers.tag(0) + 8192), std::vector<char>(8192, 0));
  std::memset(buffers.tag(1), 0x55, 8192);
  backend.Submit(1, Io(abi::kIoOpWrite, 0, 8192, buffers.tag(1)));
  EXPECT_EQ(done.Take(1), 8192);
  backend.Submit(2, Io(abi::kIoOpFlush, 0, 0, buffers.tag(2)));
  EXPECT_EQ(done.Take(2), 0);
  backend.Submit(3, Io(abi::kIoOpDiscard, 0, 4096, buffers.tag(3)));
  EXPECT_EQ(done.Take(3), 4096);
  backend.Submit(4, Io(abi::kIoOpWriteZeroes, 0, 4096, buffers.tag(4)));
  EXPECT_EQ(done.Take(4), 4096);
  EXPECT_EQ(done.untaken(), 0u);
}

// The queue maps tag buffers zeroed; reads on a tag no write dirtied leave its bytes alone.
TEST_F(NullBackendTest, PureReadsTouchNoData) {
  std::memset(buffers.tag(2), 0x5a, 4096);  // a marker only a memset would erase
  backend.Submit(1, Io(abi::kIoOpWrite, 0, 4096, buffers.tag(1)));
  EXPECT_EQ(done.Take(1), 4096);
  backend.Submit(2, Io(abi::kIoOpRead, 0, 4096, buffers.tag(2)));
  EXPECT_EQ(done.Take(2), 4096);
  EXPECT_EQ(std::vector<char>(buffers.tag(2), buffers.tag(2) + 4096),
            std::vector<char>(4096, 0x5a));
  // Once cleared, a tag's next read touches nothing either.
  backend.Submit(1, Io(abi::kIoOpRead, 0, 4096, buffers.tag(1)));
  EXPECT_EQ(done.Take(1), 4096);
  std::memset(buffers.tag(1), 0x5a, 4096);
  backend.Submit(1, Io(abi::kIoOpRead, 0, 4096, buffers.tag(1)));
  EXPECT_EQ(done.Take(1), 4096);
  EXPECT_EQ(std::vector<char>(buffers.tag(1), buffers.tag(1) + 4096),
            std::vector<char>(4096, 0x5a));
}

}  // namespace
}  // namespace blk::server
