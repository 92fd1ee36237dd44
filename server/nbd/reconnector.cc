#include "server/nbd/reconnector.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace blk::server::nbd {
namespace {

constexpr std::chrono::milliseconds kFirstBackoff(50);
constexpr std::chrono::milliseconds kMaxBackoff(2000);

}  // namespace

absl::StatusOr<std::unique_ptr<Reconnector>> Reconnector::Create(
    Address address, std::chrono::milliseconds dial_timeout) {
  std::unique_ptr<Reconnector> r(new Reconnector(std::move(address), dial_timeout));
  r->event_fd_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!r->event_fd_.valid()) {
    return absl::ErrnoToStatus(errno, "eventfd for NBD reconnect");
  }
  return r;
}

Reconnector::~Reconnector() { Stop(); }

void Reconnector::Start() {
  if (thread_.joinable()) {
    absl::MutexLock lock(&mutex_);
    if (!ready_.has_value() && !stopping_) return;  // still dialing
  }
  if (thread_.joinable()) thread_.join();
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = false;
    ready_.reset();
  }
  thread_ = std::thread([this] { Run(); });
}

std::optional<Connection> Reconnector::Take() {
  uint64_t count = 0;
  [[maybe_unused]] ssize_t n = ::read(event_fd_.get(), &count, sizeof(count));
  std::optional<Connection> connection;
  {
    absl::MutexLock lock(&mutex_);
    connection = std::move(ready_);
    ready_.reset();
  }
  if (connection.has_value() && thread_.joinable()) thread_.join();
  return connection;
}

void Reconnector::Stop() {
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;  // ends the helper's backoff wait at once
  }
  if (thread_.joinable()) thread_.join();
}

void Reconnector::Run() {
  std::chrono::milliseconds backoff = kFirstBackoff;
  for (;;) {
    absl::StatusOr<Connection> connection = Connect(address_, dial_timeout_);
    absl::MutexLock lock(&mutex_);
    if (stopping_) return;
    if (connection.ok()) {
      ready_ = std::move(*connection);
      const uint64_t one = 1;
      [[maybe_unused]] ssize_t n = ::write(event_fd_.get(), &one, sizeof(one));
      return;
    }
    // Backoff between attempts; Stop() interrupts it.
    mutex_.AwaitWithTimeout(absl::Condition(&stopping_), absl::FromChrono(backoff));
    if (stopping_) return;
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

}  // namespace blk::server::nbd
