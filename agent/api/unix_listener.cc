#include "agent/api/unix_listener.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/server_posix.h"
#include "spdlog/spdlog.h"

namespace blk::agent {

namespace {

absl::Status Bind(int fd, const std::string& path) {
  struct sockaddr_un address {};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path too long: ", path));
  }
  ::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  // Never let the socket exist with wider permissions than 0600, even for a moment: it gets its
  // owner and mode before anyone can find it under its real name.
  const mode_t previous_umask = ::umask(0177);
  const int bound = ::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  const int err = errno;
  ::umask(previous_umask);
  if (bound != 0) return absl::ErrnoToStatus(err, absl::StrCat("cannot bind ", path));
  return absl::OkStatus();
}

absl::Status SetOwnerAndMode(const std::string& path, std::optional<gid_t> group, mode_t mode) {
  if (group && ::chown(path.c_str(), static_cast<uid_t>(-1), *group) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot give ", path, " group ", *group));
  }
  if (::chmod(path.c_str(), mode) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot chmod ", path));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PeerCredentials> ReadPeerCredentials(int fd) {
  struct ucred credentials {};
  socklen_t length = sizeof(credentials);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) {
    return absl::ErrnoToStatus(errno, "SO_PEERCRED");
  }
  PeerCredentials peer{
      .uid = credentials.uid, .gid = credentials.gid, .pid = credentials.pid, .groups = {}};
  std::vector<gid_t> groups(64);
  for (;;) {
    socklen_t bytes = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &bytes) == 0) {
      groups.resize(bytes / sizeof(gid_t));
      break;
    }
    // ERANGE: `bytes` now says how much room the groups need.
    if (errno != ERANGE) return absl::ErrnoToStatus(errno, "SO_PEERGROUPS");
    groups.resize(bytes / sizeof(gid_t) + 1);
  }
  peer.groups = std::move(groups);
  return peer;
}

absl::StatusOr<std::unique_ptr<UnixListener>> UnixListener::Listen(const std::string& staging,
                                                                   const std::string& path,
                                                                   std::optional<gid_t> group,
                                                                   mode_t mode) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, "cannot create a Unix socket");
  const int stop_fd = ::eventfd(0, EFD_CLOEXEC);
  if (stop_fd < 0) {
    const int err = errno;
    ::close(fd);
    return absl::ErrnoToStatus(err, "cannot create an eventfd");
  }
  // From here the listener owns both fds.
  std::unique_ptr<UnixListener> listener(new UnixListener(fd, stop_fd));
  absl::Status ready = Bind(fd, staging);
  if (ready.ok()) ready = SetOwnerAndMode(staging, group, mode);
  if (ready.ok() && ::listen(fd, SOMAXCONN) != 0) {
    ready = absl::ErrnoToStatus(errno, absl::StrCat("cannot listen on ", staging));
  }
  if (ready.ok() && ::rename(staging.c_str(), path.c_str()) != 0) {
    ready = absl::ErrnoToStatus(errno, absl::StrCat("cannot move ", staging, " to ", path));
  }
  if (!ready.ok()) {
    ::unlink(staging.c_str());
    return ready;
  }
  return listener;
}

UnixListener::~UnixListener() {
  Stop();
  ::close(listen_fd_);
  ::close(stop_fd_);
}

void UnixListener::Serve(grpc::Server& server, CallerAccess& access) {
  acceptor_ = std::thread([this, &server, &access] { Accept(server, access); });
}

void UnixListener::Stop() {
  const uint64_t one = 1;
  if (::write(stop_fd_, &one, sizeof(one)) < 0) {
    spdlog::error("cannot wake the socket acceptor: {}", strerrordesc_np(errno));
  }
  if (acceptor_.joinable()) acceptor_.join();
}

void UnixListener::Accept(grpc::Server& server, CallerAccess& access) {
  for (;;) {
    struct pollfd ready[2] = {{.fd = listen_fd_, .events = POLLIN, .revents = 0},
                              {.fd = stop_fd_, .events = POLLIN, .revents = 0}};
    if (::poll(ready, 2, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::critical("socket acceptor: poll: {}", strerrordesc_np(errno));
      return;
    }
    if (ready[1].revents != 0) return;
    if (ready[0].revents == 0) continue;
    const int connection = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (connection < 0) {
      // The peer may have gone already, or fds are short for a moment: keep serving the others.
      if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
        spdlog::warn("socket acceptor: accept: {}", strerrordesc_np(errno));
      }
      continue;
    }
    absl::StatusOr<PeerCredentials> peer = ReadPeerCredentials(connection);
    if (!peer.ok()) {
      spdlog::warn("dropping a connection whose credentials cannot be read: {}",
                   peer.status().ToString());
      ::close(connection);
      continue;
    }
    access.Remember(connection, *peer);
    grpc::AddInsecureChannelFromFd(&server, connection);
  }
}

}  // namespace blk::agent
