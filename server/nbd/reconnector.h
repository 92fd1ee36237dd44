// Re-establishes an NBD connection off the queue thread: a helper thread, alive only while a
// reconnect is under way, dials with exponential backoff until it succeeds (or is stopped) and
// then signals an eventfd that the queue's ring polls. The queue thread takes the negotiated
// connection from there; it never makes a blocking socket call itself.
#pragma once

#include <chrono>
#include <optional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/unique_fd.h"
#include "server/nbd/handshake.h"
#include "server/nbd/uri.h"

namespace blk::server::nbd {

class Reconnector {
 public:
  // Each dial (connect and handshake) gives up after `dial_timeout` (blkagent
  // --nbd-connect-timeout) and is tried again.
  static absl::StatusOr<std::unique_ptr<Reconnector>> Create(
      Address address, std::chrono::milliseconds dial_timeout);
  ~Reconnector();
  Reconnector(const Reconnector&) = delete;
  Reconnector& operator=(const Reconnector&) = delete;

  // Becomes readable when a connection is ready.
  int event_fd() const { return event_fd_.get(); }
  // Starts dialing (no-op while a reconnect is already running).
  void Start();
  // The connection once event_fd() fired (clears the event), nullopt if none is ready yet.
  std::optional<Connection> Take();
  // Stops the helper thread (its current dial ends at the socket timeout).
  void Stop();

 private:
  Reconnector(Address address, std::chrono::milliseconds dial_timeout)
      : address_(std::move(address)), dial_timeout_(dial_timeout) {}
  void Run();

  const Address address_;
  const std::chrono::milliseconds dial_timeout_;
  UniqueFd event_fd_;
  std::thread thread_;  // used by the queue thread only
  absl::Mutex mutex_;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::optional<Connection> ready_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace blk::server::nbd
