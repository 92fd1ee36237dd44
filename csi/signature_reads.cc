#include "csi/signature_reads.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/byte_size.h"
#include "common/unique_fd.h"

namespace blk::csi {
namespace {

// O_DIRECT wants offsets, lengths and the buffer aligned to the logical block size: 4 KiB covers
// every device blk-csi stages (its sizes are whole logical blocks).
constexpr uint64_t kAlignment = 4096;

absl::Status Unreadable(const std::string& device, const std::string& why) {
  return absl::UnavailableError(absl::StrCat(
      "cannot read ", device, " where file systems keep their signatures (", why,
      "): not probing or formatting a device that cannot be read; retry once it reads again"));
}

}  // namespace

absl::Status ReadWhereSignaturesLive(const std::string& device) {
  UniqueFd fd(::open(device.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC));
  if (!fd.valid()) return Unreadable(device, absl::StrCat("open: ", std::strerror(errno)));
  absl::StatusOr<uint64_t> size = ByteSize(fd.get());
  if (!size.ok()) return Unreadable(device, std::string(size.status().message()));
  if (*size == 0) return Unreadable(device, "it has a size of 0 bytes");
  struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<void, FreeDeleter> buffer(std::aligned_alloc(kAlignment, kSignatureReadBytes));
  if (buffer == nullptr) return absl::ResourceExhaustedError("no memory for the signature reads");

  const uint64_t head = std::min(*size, kSignatureReadBytes);
  const uint64_t tail_start =
      *size > kSignatureReadBytes ? (*size - kSignatureReadBytes) / kAlignment * kAlignment : 0;
  for (const auto& [start, end] : {std::pair{uint64_t{0}, head}, std::pair{tail_start, *size}}) {
    for (uint64_t at = start; at < end;) {
      // Whole aligned blocks (a read past the end comes back short, which ends the range).
      const uint64_t rest = (end - at + kAlignment - 1) / kAlignment * kAlignment;
      const size_t want = static_cast<size_t>(std::min(rest, kSignatureReadBytes));
      const ssize_t n = ::pread(fd.get(), buffer.get(), want, static_cast<off_t>(at));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        return Unreadable(device, absl::StrCat("reading ", want, " bytes at offset ", at, ": ",
                                               std::strerror(errno)));
      }
      if (n == 0) {
        return Unreadable(device, absl::StrCat("it ended at offset ", at, ", before its size of ",
                                               *size, " bytes"));
      }
      at += static_cast<uint64_t>(n);
    }
  }
  return absl::OkStatus();
}

}  // namespace blk::csi
