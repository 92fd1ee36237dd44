// Connections that ProbeExport made, kept a short while for the volume created next on the same
// export (Storage::Open takes it), so that creating a volume of an export's size costs one
// connection, not two: a server that serves a single client (nbd-server -d) has none left for a
// second, and every server sees one session per volume. Control path only (a mutex).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/nbd/handshake.h"

namespace blk::server::nbd {

class ConnectionStash {
 public:
  using Clock = std::chrono::steady_clock;
  // How long a probe's connection waits for its volume; one not taken by then is closed, at the
  // next Put or Take.
  static constexpr std::chrono::seconds kKeepFor{10};

  static ConnectionStash& Global();

  // Keeps `connection` to `export_address` (Address::ToString), replacing one kept before.
  void Put(const std::string& export_address, Connection connection) ABSL_LOCKS_EXCLUDED(mutex_);
  // The connection kept for `export_address`, if any (and not older than kKeepFor).
  std::optional<Connection> Take(const std::string& export_address) ABSL_LOCKS_EXCLUDED(mutex_);

 private:
  struct Kept {
    std::string export_address;
    Connection connection;
    Clock::time_point until;
  };
  void DropExpiredLocked(Clock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  absl::Mutex mutex_;
  std::vector<Kept> kept_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace blk::server::nbd
