#pragma once

#include <atomic>
#include <cstdint>

namespace blk::server {

// Per-volume record of a file backing that ended before the volume (a truncated image), shared by
// the queues and written only when that happens, never per I/O. Whoever configures the volume
// may hand one in (FileBackendConfig::stats) to read it while the volume runs.
struct FileStats {
  // Reads that found the end of the file inside the volume, failed with EIO.
  std::atomic<uint64_t> reads_past_end{0};
};

}  // namespace blk::server
