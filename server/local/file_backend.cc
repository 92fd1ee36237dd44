#include "server/local/file_backend.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/byte_size.h"
#include "server/ublk/abi.h"

namespace blk::server {
namespace {

// ResultOf's "not done yet": no result is this negative.
constexpr int32_t kMore = std::numeric_limits<int32_t>::min();

// Whatever errno says, a backend file that cannot be used is a problem of the volume's spec.
absl::Status PathError(const std::string& path, absl::string_view what, int err) {
  return absl::InvalidArgumentError(
      absl::ErrnoToStatus(err, absl::StrCat("backend file ", path, ": ", what)).message());
}

// Reads one logical block at offset 0: O_DIRECT opens succeed on file systems whose alignment
// needs differ from ours, and only an actual I/O tells.
bool DirectReadWorks(int fd, uint32_t block_size) {
  void* buffer = nullptr;
  if (posix_memalign(&buffer, 4096, block_size) != 0) return false;
  ssize_t n = ::pread(fd, buffer, block_size, 0);
  free(buffer);
  return n >= 0;
}

}  // namespace

absl::StatusOr<std::optional<uint64_t>> ExistingBackingSize(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::nullopt;
    return PathError(path, "stat", errno);
  }
  if (S_ISREG(st.st_mode)) return static_cast<uint64_t>(st.st_size);
  if (!S_ISBLK(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("backend file ", path, " is neither a regular file nor a block device"));
  }
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return PathError(path, "open", errno);
  uint64_t size = 0;
  if (::ioctl(fd.get(), BLKGETSIZE64, &size) != 0) return PathError(path, "BLKGETSIZE64", errno);
  return size;
}

absl::StatusOr<std::unique_ptr<FileStorage>> FileStorage::Open(const std::string& path,
                                                               const DeviceConfig& config,
                                                               OpenPurpose purpose) {
  if (path.empty()) return absl::InvalidArgumentError("backend file path is empty");
  const int access = config.read_only ? O_RDONLY : O_RDWR;

  struct stat st {};
  bool created = false;
  if (::stat(path.c_str(), &st) != 0) {
    if (purpose != OpenPurpose::kCreate) {
      if (errno != ENOENT) return absl::ErrnoToStatus(errno, absl::StrCat("backing file ", path));
      return absl::NotFoundError(
          absl::StrCat("backing file ", path,
                       " is missing: the volume's data was there (is its file system "
                       "mounted?); it is not re-created empty"));
    }
    if (errno != ENOENT) return PathError(path, "stat", errno);
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (parent.empty()) parent = ".";
    std::error_code ec;
    if (!std::filesystem::is_directory(parent, ec)) {
      return absl::InvalidArgumentError(absl::StrCat("backend file ", path, ": parent directory ",
                                                     parent.string(), " does not exist"));
    }
    UniqueFd new_file(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!new_file.valid()) return PathError(path, "create", errno);
    if (::ftruncate(new_file.get(), static_cast<off_t>(config.size_bytes)) != 0) {
      int err = errno;
      ::unlink(path.c_str());
      return PathError(path, absl::StrCat("extend to ", config.size_bytes, " bytes"), err);
    }
    if (::fstat(new_file.get(), &st) != 0) return PathError(path, "stat", errno);
    created = true;
  }

  const bool is_block_device = S_ISBLK(st.st_mode);
  if (!is_block_device && !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("backend file ", path, " is neither a regular file nor a block device"));
  }

  // A block device is claimed exclusively: the kernel then refuses it while it is mounted, in a
  // device-mapper or MD set, or claimed by another program (another volume), and refuses them
  // while the volume holds it.
  const int exclusive = is_block_device ? O_EXCL : 0;
  UniqueFd fd(::open(path.c_str(), access | exclusive | O_CLOEXEC | O_DIRECT));
  if (!fd.valid() && errno == EBUSY) {
    return absl::FailedPreconditionError(
        absl::StrCat("backend block device ", path,
                     " is in use (mounted, swap, part of a device-mapper or MD set, or held by "
                     "another program)"));
  }
  bool direct = fd.valid() && DirectReadWorks(fd.get(), config.logical_block_size);
  if (!direct) {
    fd.Reset();  // its exclusive claim first
    fd = UniqueFd(::open(path.c_str(), access | exclusive | O_CLOEXEC));
    if (!fd.valid()) return PathError(path, "open", errno);
  }

  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (is_block_device) {
    if (::ioctl(fd.get(), BLKGETSIZE64, &size) != 0) {
      return PathError(path, "BLKGETSIZE64", errno);
    }
  }
  if (size < config.size_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "backend ", is_block_device ? "block device " : "file ", path, " has ", size,
        " bytes, smaller than the requested device size of ", config.size_bytes, " bytes"));
  }
  std::unique_ptr<FileStorage> storage(new FileStorage(std::move(fd), direct, is_block_device));
  if (created) storage->created_path_ = path;
  if (const auto* file = std::get_if<FileBackendConfig>(&config.backend)) {
    storage->stats_ = file->stats;
  }
  return storage;
}

absl::Status FileStorage::Grow(uint64_t size_bytes) {
  absl::StatusOr<uint64_t> size = ByteSize(fd_.get());
  if (!size.ok()) {
    return absl::Status(size.status().code(),
                        absl::StrCat("backend ", is_block_device_ ? "block device" : "file", ": ",
                                     size.status().message()));
  }
  if (*size >= size_bytes) return absl::OkStatus();
  if (is_block_device_) {
    return absl::FailedPreconditionError(
        absl::StrCat("the backend block device has ", *size, " bytes, fewer than ", size_bytes));
  }
  // The device is the file's only user (one volume per backing file), so its length is the
  // volume's to set.
  if (::ftruncate(fd_.get(), static_cast<off_t>(size_bytes)) != 0) {
    const int err = errno;
    return absl::FailedPreconditionError(
        absl::ErrnoToStatus(err, absl::StrCat("backend file: extend to ", size_bytes, " bytes"))
            .message());
  }
  return absl::OkStatus();
}

void FileStorage::AbandonCreated() {
  if (created_path_.empty()) return;
  fd_.Reset();
  ::unlink(created_path_.c_str());
  created_path_.clear();
}

absl::StatusOr<std::unique_ptr<Backend>> FileStorage::NewQueueBackend(uint16_t queue_depth) {
  return std::make_unique<FileBackend>(fd_.get(), queue_depth, stats_);
}

absl::Status FileBackend::Attach(Ring& ring, int first_file, Completer completer) {
  ring_ = &ring;
  file_index_ = first_file;
  completer_ = completer;
  return absl::OkStatus();
}

void FileBackend::Submit(uint16_t tag, const BlockIo& io) {
  if (tag >= tags_.size()) return completer_.Complete(tag, -EINVAL);
  TagState& state = tags_[tag];
  state.io = io;
  state.done = 0;
  state.punch_fallback = false;
  if (!Issue(tag)) unissued_.Add(tag);
}

void FileBackend::EndOfTurn() {
  unissued_.RetryEach([this](uint32_t tag) { return Issue(static_cast<uint16_t>(tag)); });
}

bool FileBackend::Issue(uint16_t tag) {
  TagState& state = tags_[tag];
  const BlockIo& io = state.io;
  io_uring_sqe* sqe = ring_->GetSqe();
  if (sqe == nullptr) return false;
  char* buffer = static_cast<char*>(io.buffer) + state.done;
  const uint32_t remaining = io.length - state.done;
  const uint64_t offset = io.offset + state.done;
  switch (io.op) {
    case abi::kIoOpRead:
      io_uring_prep_read(sqe, file_index_, buffer, remaining, offset);
      break;
    case abi::kIoOpWrite:
      io_uring_prep_write(sqe, file_index_, buffer, remaining, offset);
      if (io.flags & abi::kIoFFua) sqe->rw_flags = RWF_DSYNC;
      break;
    case abi::kIoOpFlush:
      io_uring_prep_fsync(sqe, file_index_, IORING_FSYNC_DATASYNC);
      break;
    case abi::kIoOpDiscard:
      io_uring_prep_fallocate(sqe, file_index_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                              static_cast<off_t>(offset), static_cast<off_t>(remaining));
      break;
    case abi::kIoOpWriteZeroes:
      io_uring_prep_fallocate(sqe, file_index_,
                              (state.punch_fallback ? FALLOC_FL_PUNCH_HOLE : FALLOC_FL_ZERO_RANGE) |
                                  FALLOC_FL_KEEP_SIZE,
                              static_cast<off_t>(offset), static_cast<off_t>(remaining));
      break;
  }
  sqe->flags |= IOSQE_FIXED_FILE;
  sqe->user_data = EncodeUserData(CqeKind::kBackend, tag);
  return true;
}

void FileBackend::OnCompletion(uint16_t tag, const io_uring_cqe& cqe) {
  if (tag >= tags_.size()) return;
  const int32_t result = ResultOf(tags_[tag], cqe.res);
  if (result == kMore) {
    if (!Issue(tag)) unissued_.Add(tag);
    return;
  }
  completer_.Complete(tag, result);
}

int32_t FileBackend::ResultOf(TagState& state, int32_t res) {
  const BlockIo& io = state.io;
  switch (io.op) {
    case abi::kIoOpRead:
      if (res < 0) return res;
      if (res == 0) {
        // The file ends inside the volume (truncated under it): zeroes would pass for data.
        if (stats_) stats_->reads_past_end.fetch_add(1, std::memory_order_relaxed);
        return -EIO;
      }
      state.done += static_cast<uint32_t>(res);
      return state.done < io.length ? kMore : static_cast<int32_t>(io.length);
    case abi::kIoOpWrite:
      if (res < 0) return res;
      if (res == 0) return -EIO;
      state.done += static_cast<uint32_t>(res);
      return state.done < io.length ? kMore : static_cast<int32_t>(io.length);
    case abi::kIoOpWriteZeroes:
      if ((res == -EOPNOTSUPP || res == -EINVAL) && !state.punch_fallback) {
        state.punch_fallback = true;
        return kMore;
      }
      return res < 0 ? res : static_cast<int32_t>(io.length);
    case abi::kIoOpDiscard:
      return res < 0 ? res : static_cast<int32_t>(io.length);
    case abi::kIoOpFlush:
      return res < 0 ? res : 0;
    default:
      return -EOPNOTSUPP;
  }
}

}  // namespace blk::server
