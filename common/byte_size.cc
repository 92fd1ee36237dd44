#include "common/byte_size.h"

#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include <cerrno>

namespace blk {

absl::StatusOr<uint64_t> ByteSize(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return absl::ErrnoToStatus(errno, "fstat");
  if (!S_ISBLK(st.st_mode)) return static_cast<uint64_t>(st.st_size);
  uint64_t bytes = 0;
  if (::ioctl(fd, BLKGETSIZE64, &bytes) != 0) return absl::ErrnoToStatus(errno, "BLKGETSIZE64");
  return bytes;
}

}  // namespace blk
