#include "server/nbd/connection_stash.h"

#include <algorithm>
#include <utility>

namespace blk::server::nbd {

ConnectionStash& ConnectionStash::Global() {
  static ConnectionStash* stash = new ConnectionStash();  // never destroyed: used until exit
  return *stash;
}

void ConnectionStash::DropExpiredLocked(Clock::time_point now) {
  // Their destructors end the sessions as the protocol asks (NBD_CMD_DISC).
  kept_.erase(std::remove_if(kept_.begin(), kept_.end(),
                             [now](const Kept& kept) { return kept.until <= now; }),
              kept_.end());
}

void ConnectionStash::Put(const std::string& export_address, Connection connection) {
  const Clock::time_point now = Clock::now();
  absl::MutexLock lock(&mutex_);
  DropExpiredLocked(now);
  kept_.erase(
      std::remove_if(kept_.begin(), kept_.end(),
                     [&](const Kept& kept) { return kept.export_address == export_address; }),
      kept_.end());
  kept_.push_back(Kept{export_address, std::move(connection), now + kKeepFor});
}

std::optional<Connection> ConnectionStash::Take(const std::string& export_address) {
  absl::MutexLock lock(&mutex_);
  DropExpiredLocked(Clock::now());
  auto it = std::find_if(kept_.begin(), kept_.end(),
                         [&](const Kept& kept) { return kept.export_address == export_address; });
  if (it == kept_.end()) return std::nullopt;
  std::optional<Connection> connection(std::move(it->connection));
  kept_.erase(it);
  return connection;
}

}  // namespace blk::server::nbd
