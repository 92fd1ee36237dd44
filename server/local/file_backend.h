#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "server/backend.h"
#include "server/local/file_stats.h"
#include "server/ublk/sqe_waitlist.h"

namespace blk::server {

// A regular file or a block device, opened once per device and shared by the queues' rings.
class FileStorage final : public Storage {
 public:
  // A missing regular file is created sparse at config.size_bytes (its directory must exist),
  // for kCreate only: a volume's data is never replaced by an empty file (NotFound). An
  // existing file or block device must be at least that large. O_DIRECT is used when a probe read
  // at the device's logical block size works, buffered I/O otherwise (tmpfs, 4k-only devices).
  static absl::StatusOr<std::unique_ptr<FileStorage>> Open(const std::string& path,
                                                           const DeviceConfig& config,
                                                           OpenPurpose purpose);
  absl::StatusOr<std::unique_ptr<Backend>> NewQueueBackend(uint16_t queue_depth) override;
  void AbandonCreated() override;
  // A regular file is extended (sparse; never shortened); a block device must already be that
  // large.
  absl::Status Grow(uint64_t size_bytes) override;

  int fd() const { return fd_.get(); }
  bool direct_io() const { return direct_io_; }
  bool is_block_device() const { return is_block_device_; }

 private:
  FileStorage(UniqueFd fd, bool direct_io, bool is_block_device)
      : fd_(std::move(fd)), direct_io_(direct_io), is_block_device_(is_block_device) {}

  std::string created_path_;  // set when Open created the file
  std::shared_ptr<FileStats> stats_;
  UniqueFd fd_;
  bool direct_io_;
  bool is_block_device_;
};

// The size of an existing backing file (st_size) or block device (BLKGETSIZE64); nullopt when
// nothing exists at `path` (Open would create the file). Anything else, or a path that cannot be
// read: InvalidArgument naming the path.
absl::StatusOr<std::optional<uint64_t>> ExistingBackingSize(const std::string& path);

// Per-queue I/O on a FileStorage's descriptor through the queue's ring (a registered file).
// Short reads and writes are resubmitted for the rest; a read that finds the end of the file (a
// backing truncated under the volume) fails with EIO and is counted in `stats`; FLUSH is fdatasync,
// DISCARD punches a hole, WRITE_ZEROES zeroes the range (punching a hole where the file system
// cannot zero a range).
class FileBackend final : public Backend {
 public:
  FileBackend(int fd, uint16_t queue_depth, std::shared_ptr<FileStats> stats = nullptr)
      : fd_(fd), tags_(queue_depth), unissued_(queue_depth), stats_(std::move(stats)) {}

  std::vector<int> Files() const override { return {fd_}; }
  absl::Status Attach(Ring& ring, int first_file, Completer completer) override;
  void Submit(uint16_t tag, const BlockIo& io) override;
  void OnCompletion(uint16_t tag, const io_uring_cqe& cqe) override;
  // Issues what waited for an SQE.
  void EndOfTurn() override;

 private:
  struct TagState {
    BlockIo io;
    uint32_t done = 0;  // bytes transferred so far
    bool punch_fallback = false;
  };

  // Queues the next SQE of the tag's I/O; false when no SQE was free.
  bool Issue(uint16_t tag);
  // What a CQE of the tag's I/O means: its result, or kMore when Issue should continue it.
  int32_t ResultOf(TagState& state, int32_t res);

  int fd_;
  Ring* ring_ = nullptr;
  Completer completer_;
  int file_index_ = -1;
  std::vector<TagState> tags_;
  SqeWaitlist unissued_;
  std::shared_ptr<FileStats> stats_;
};

}  // namespace blk::server
