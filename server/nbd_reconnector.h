// Re-establishes an NBD connection off the queue thread: a helper thread, alive only while a
// reconnect is under way, dials with exponential backoff until it succeeds (or is stopped) and
// then signals an eventfd that the queue's ring polls. The queue thread takes the negotiated
// connection from there; it never makes a blocking socket call itself.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "server/nbd_handshake.h"
#include "server/nbd_uri.h"
#include "server/unique_fd.h"

namespace blk::server {

class NbdReconnector {
 public:
  static absl::StatusOr<std::unique_ptr<NbdReconnector>> Create(NbdAddress address);
  ~NbdReconnector();
  NbdReconnector(const NbdReconnector&) = delete;
  NbdReconnector& operator=(const NbdReconnector&) = delete;

  // Becomes readable when a connection is ready.
  int event_fd() const { return event_fd_.get(); }
  // Starts dialing (no-op while a reconnect is already running).
  void Start();
  // The connection once event_fd() fired (clears the event), nullopt if none is ready yet.
  std::optional<NbdConnection> Take();
  // Stops the helper thread (its current dial ends at the socket timeout).
  void Stop();

 private:
  explicit NbdReconnector(NbdAddress address) : address_(std::move(address)) {}
  void Run();

  const NbdAddress address_;
  UniqueFd event_fd_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::optional<NbdConnection> ready_;
};

}  // namespace blk::server
