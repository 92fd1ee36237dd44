#include "server/nbd/handshake.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"

namespace blk::server::nbd {
namespace {

// Option replies longer than this are not trusted (a message or an info is a few bytes).
constexpr uint32_t kMaxOptionReplyBytes = 64 * 1024;

// Whatever errno says, a server that cannot be talked to is unavailable: worth another try.
absl::Status SocketError(const Address& address, absl::string_view what, int err) {
  return absl::UnavailableError(
      absl::ErrnoToStatus(err, absl::StrCat("NBD server ", address.ToString(), ": ", what))
          .message());
}

void SetTimeout(int fd, int option, std::chrono::milliseconds timeout) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, option, &tv, sizeof(tv));
}

void SetTimeouts(int fd, std::chrono::milliseconds timeout) {
  SetTimeout(fd, SO_RCVTIMEO, timeout);
  SetTimeout(fd, SO_SNDTIMEO, timeout);
}

// connect(2) on a TCP socket and its errno (0 when connected). A thread with an io_uring (a queue
// thread reconnecting) sees connect fail with EINTR whenever task work arrives
// (TIF_NOTIFY_SIGNAL), and a socket with a send timeout is never restarted: the connection goes on
// in the kernel, so wait for its outcome rather than give up or call connect again.
int ConnectTcp(int fd, const sockaddr* addr, socklen_t length, std::chrono::milliseconds timeout) {
  if (::connect(fd, addr, length) == 0) return 0;
  if (errno != EINTR) return errno;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  pollfd writable{.fd = fd, .events = POLLOUT, .revents = 0};
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    const int ready = ::poll(&writable, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (ready > 0) break;
    if (ready == 0) return ETIMEDOUT;
    if (errno != EINTR) return errno;
  }
  int err = 0;
  socklen_t err_length = sizeof(err);
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_length) != 0) return errno;
  return err;
}

// connect(2) on a Unix socket and its errno. It connects at once or waits (up to SO_SNDTIMEO) for
// room in the listener's backlog; an interrupted wait leaves nothing under way in the kernel (poll
// would find the unconnected socket writable at once), so connect again, for the time left.
int ConnectUnix(int fd, const sockaddr* addr, socklen_t length, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int err = 0;
  while ((err = ::connect(fd, addr, length) == 0 ? 0 : errno) == EINTR) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {  // and a timeout of 0 would wait forever
      err = ETIMEDOUT;
      break;
    }
    SetTimeout(fd, SO_SNDTIMEO, left);
  }
  SetTimeout(fd, SO_SNDTIMEO, timeout);
  return err;
}

absl::StatusOr<UniqueFd> Dial(const Address& address, std::chrono::milliseconds timeout) {
  if (address.is_unix()) {
    sockaddr_un sun{};
    sun.sun_family = AF_UNIX;
    if (address.unix_socket.size() >= sizeof(sun.sun_path)) {
      return absl::InvalidArgumentError(
          absl::StrCat("NBD socket path ", address.unix_socket, " is too long"));
    }
    std::memcpy(sun.sun_path, address.unix_socket.c_str(), address.unix_socket.size() + 1);
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return SocketError(address, "socket", errno);
    SetTimeouts(fd.get(), timeout);
    if (const int err =
            ConnectUnix(fd.get(), reinterpret_cast<sockaddr*>(&sun), sizeof(sun), timeout);
        err != 0) {
      return SocketError(address, "connect", err);
    }
    return fd;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* results = nullptr;
  const std::string port = std::to_string(address.port);
  const int rc = ::getaddrinfo(address.host.c_str(), port.c_str(), &hints, &results);
  if (rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("NBD server ", address.ToString(), ": resolve: ", gai_strerror(rc)));
  }
  int last_errno = ECONNREFUSED;
  UniqueFd connected;
  for (addrinfo* ai = results; ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      last_errno = errno;
      continue;
    }
    SetTimeouts(fd.get(), timeout);  // SO_SNDTIMEO bounds connect() too
    last_errno = ConnectTcp(fd.get(), ai->ai_addr, ai->ai_addrlen, timeout);
    if (last_errno == 0) {
      const int one = 1;
      ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      connected = std::move(fd);
      break;
    }
  }
  ::freeaddrinfo(results);
  if (!connected.valid()) return SocketError(address, "connect", last_errno);
  return connected;
}

class Wire {
 public:
  Wire(int fd, const Address& address) : fd_(fd), address_(address) {}

  // Where the conversation is, for ending it politely: nothing to say before the options begin
  // or once the stream broke.
  enum class Phase { kGreeting, kOptions, kTransmission, kBroken };
  Phase phase() const { return phase_; }
  void Entered(Phase phase) {
    if (phase_ != Phase::kBroken) phase_ = phase;
  }

  absl::Status Read(void* out, size_t n) {
    auto* p = static_cast<uint8_t*>(out);
    while (n > 0) {
      const ssize_t got = ::recv(fd_, p, n, 0);
      if (got == 0) {
        phase_ = Phase::kBroken;
        return absl::UnavailableError(
            absl::StrCat("NBD server ", address_.ToString(), " closed the connection"));
      }
      if (got < 0) {
        if (errno == EINTR) continue;
        phase_ = Phase::kBroken;
        return SocketError(address_, "receive", errno);
      }
      p += got;
      n -= static_cast<size_t>(got);
    }
    return absl::OkStatus();
  }
  absl::Status Write(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    while (n > 0) {
      const ssize_t put = ::send(fd_, p, n, MSG_NOSIGNAL);
      if (put < 0) {
        if (errno == EINTR) continue;
        phase_ = Phase::kBroken;
        return SocketError(address_, "send", errno);
      }
      p += put;
      n -= static_cast<size_t>(put);
    }
    return absl::OkStatus();
  }
  absl::Status SendOption(uint32_t option, absl::string_view data) {
    std::vector<uint8_t> message = EncodeOption(option, data);
    return Write(message.data(), message.size());
  }
  // One option reply: header and payload.
  absl::Status ReadOptionReply(uint32_t option, OptionReplyHeader* header,
                               std::vector<uint8_t>* payload) {
    uint8_t raw[kOptionReplyHeaderBytes];
    absl::Status status = Read(raw, sizeof(raw));
    if (!status.ok()) return status;
    absl::StatusOr<OptionReplyHeader> parsed = ParseOptionReplyHeader(raw);
    if (!parsed.ok()) {
      phase_ = Phase::kBroken;
      return parsed.status();
    }
    if (parsed->option != option) {
      phase_ = Phase::kBroken;
      return absl::DataLossError(absl::StrCat("NBD server answered option ", parsed->option,
                                              " while option ", option, " was asked"));
    }
    if (parsed->length > kMaxOptionReplyBytes) {
      phase_ = Phase::kBroken;
      return absl::DataLossError(
          absl::StrCat("NBD option reply of ", parsed->length, " bytes is too long"));
    }
    *header = *parsed;
    payload->resize(parsed->length);
    return Read(payload->data(), payload->size());
  }

  // NBD_OPT_ABORT, and its acknowledgement awaited for at most a second: the server is told
  // the client goes, rather than finding the connection reset.
  void Abort() {
    SetTimeouts(fd_, std::chrono::milliseconds(1000));
    if (!SendOption(kOptAbort, "").ok()) return;
    OptionReplyHeader header;
    std::vector<uint8_t> payload;
    (void)ReadOptionReply(kOptAbort, &header, &payload);
  }

 private:
  int fd_;
  const Address& address_;
  Phase phase_ = Phase::kGreeting;
};

std::string ReplyText(const std::vector<uint8_t>& payload) {
  return std::string(payload.begin(), payload.end());
}

// What an option's error reply means (the NBD protocol's NBD_REP_ERR_* values).
std::string OptionErrorName(uint32_t type) {
  switch (type & ~kRepFlagError) {
    case 1:
      return "NBD_REP_ERR_UNSUP: option not supported";
    case 2:
      return "NBD_REP_ERR_POLICY: forbidden by the server's policy";
    case 3:
      return "NBD_REP_ERR_INVALID: invalid request";
    case 4:
      return "NBD_REP_ERR_PLATFORM: not supported on the server's platform";
    case 5:
      return "NBD_REP_ERR_TLS_REQD: the server requires TLS";
    case 6:
      return "NBD_REP_ERR_UNKNOWN: no such export";
    case 7:
      return "NBD_REP_ERR_SHUTDOWN: the server is shutting down";
    case 8:
      return "NBD_REP_ERR_BLOCK_SIZE_REQD: the server requires block size negotiation";
    case 9:
      return "NBD_REP_ERR_TOO_BIG: request or reply too large";
    default:
      return absl::StrCat("NBD error ", type & ~kRepFlagError);
  }
}

// A server on its way down answers options with NBD_REP_ERR_SHUTDOWN: unavailable, so worth
// another try (a restarted one will serve), unlike a refusal of the export.
absl::Status ShuttingDown(const Address& address, const std::vector<uint8_t>& payload) {
  return absl::UnavailableError(
      absl::StrCat("NBD server ", address.ToString(), " is shutting down: ", ReplyText(payload)));
}

// The server's greeting, and our flags in answer: whether the server leaves out the 124 zero
// bytes after the export info of NBD_OPT_EXPORT_NAME.
absl::StatusOr<bool> Greet(Wire& wire, const Address& address) {
  uint8_t greeting[18];
  absl::Status status = wire.Read(greeting, sizeof(greeting));
  if (!status.ok()) return status;
  if (GetU64(greeting) != kInitMagic) {
    return absl::DataLossError(absl::StrCat(address.ToString(), " is not an NBD server"));
  }
  if (GetU64(greeting + 8) != kOptMagic) {
    return absl::FailedPreconditionError(
        absl::StrCat("NBD server ", address.ToString(), " speaks only the oldstyle handshake"));
  }
  const uint16_t server_flags = GetU16(greeting + 16);
  if (!(server_flags & kFlagFixedNewstyle)) {
    return absl::FailedPreconditionError(
        absl::StrCat("NBD server ", address.ToString(), " lacks the fixed newstyle handshake"));
  }
  const bool no_zeroes = server_flags & kFlagNoZeroes;
  uint8_t client_flags[4];
  PutU32(client_flags, kClientFlagFixedNewstyle | (no_zeroes ? kClientFlagNoZeroes : 0));
  status = wire.Write(client_flags, sizeof(client_flags));
  if (!status.ok()) return status;
  wire.Entered(Wire::Phase::kOptions);
  return no_zeroes;
}

// NBD_OPT_STRUCTURED_REPLY: whether the server will send structured replies.
absl::StatusOr<bool> AskStructuredReplies(Wire& wire, const Address& address) {
  absl::Status status = wire.SendOption(kOptStructuredReply, "");
  if (!status.ok()) return status;
  OptionReplyHeader header;
  std::vector<uint8_t> payload;
  status = wire.ReadOptionReply(kOptStructuredReply, &header, &payload);
  if (!status.ok()) return status;
  if (header.type == kRepErrShutdown) return ShuttingDown(address, payload);
  return header.type == kRepAck;
}

// NBD_OPT_GO: fills `info` from the server's replies; false when the server does not know GO
// (NBD_OPT_EXPORT_NAME must be used instead).
absl::StatusOr<bool> Go(Wire& wire, const Address& address, ExportInfo* info) {
  absl::Status status = wire.SendOption(kOptGo, GoOptionData(address.export_name));
  if (!status.ok()) return status;
  OptionReplyHeader header;
  std::vector<uint8_t> payload;
  bool have_export = false;
  for (;;) {
    status = wire.ReadOptionReply(kOptGo, &header, &payload);
    if (!status.ok()) return status;
    if (header.type == kRepInfo) {
      status = ApplyInfoReply(payload.data(), payload.size(), info);
      if (!status.ok()) return status;
      if (payload.size() >= 2 && GetU16(payload.data()) == kInfoExport) have_export = true;
      continue;
    }
    if (header.type == kRepAck) {
      wire.Entered(Wire::Phase::kTransmission);
      break;
    }
    if (header.type == kRepErrUnsup) return false;
    if (header.type == kRepErrShutdown) return ShuttingDown(address, payload);
    if (header.type & kRepFlagError) {
      const std::string text = ReplyText(payload);
      return absl::NotFoundError(
          absl::StrCat("NBD server ", address.ToString(), " refused export \"", address.export_name,
                       "\" (", OptionErrorName(header.type), ")", text.empty() ? "" : ": ", text));
    }
    // Other reply types to GO are to be ignored.
  }
  if (!have_export) {
    return absl::DataLossError(
        absl::StrCat("NBD server ", address.ToString(), " did not describe the export"));
  }
  return true;
}

// NBD_OPT_EXPORT_NAME, the older way into the transmission phase: size and flags only.
absl::Status ExportName(Wire& wire, const Address& address, bool no_zeroes, ExportInfo* info) {
  absl::Status status = wire.SendOption(kOptExportName, address.export_name);
  if (!status.ok()) return status;
  uint8_t reply[10 + 124];
  status = wire.Read(reply, no_zeroes ? 10 : sizeof(reply));
  if (!status.ok()) return status;
  wire.Entered(Wire::Phase::kTransmission);
  info->size = GetU64(reply);
  info->flags = GetU16(reply + 8);
  return absl::OkStatus();
}

// The options up to the transmission phase; `info` describes the export then.
absl::Status Negotiate(Wire& wire, const Address& address, ExportInfo* info) {
  absl::StatusOr<bool> no_zeroes = Greet(wire, address);
  if (!no_zeroes.ok()) return no_zeroes.status();
  absl::StatusOr<bool> structured = AskStructuredReplies(wire, address);
  if (!structured.ok()) return structured.status();
  info->structured_replies = *structured;
  absl::StatusOr<bool> went = Go(wire, address, info);
  if (!went.ok()) return went.status();
  if (*went) return absl::OkStatus();
  return ExportName(wire, address, *no_zeroes, info);
}

}  // namespace

Connection& Connection::operator=(Connection&& other) noexcept {
  if (this != &other) {
    if (fd.valid()) SendDisconnect(fd.get());
    fd = std::move(other.fd);
    info = other.info;
  }
  return *this;
}

Connection::~Connection() {
  if (fd.valid()) SendDisconnect(fd.get());
}

void SendDisconnect(int fd) {
  uint8_t request[kRequestHeaderBytes];
  EncodeRequest(request, 0, kCmdDisc, 0, 0, 0);
  [[maybe_unused]] const ssize_t sent =
      ::send(fd, request, sizeof(request), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(fd, SHUT_WR);
}

absl::StatusOr<Connection> Connect(const Address& address, std::chrono::milliseconds timeout) {
  absl::StatusOr<UniqueFd> fd = Dial(address, timeout);
  if (!fd.ok()) return fd.status();
  Wire wire(fd->get(), address);
  Connection connection;
  if (absl::Status negotiated = Negotiate(wire, address, &connection.info); !negotiated.ok()) {
    if (wire.phase() == Wire::Phase::kOptions) wire.Abort();
    if (wire.phase() == Wire::Phase::kTransmission) SendDisconnect(fd->get());
    return negotiated;
  }
  SetTimeouts(fd->get(), std::chrono::milliseconds(0));
  connection.fd = std::move(*fd);
  // In transmission now: a refusal from here on ends with NBD_CMD_DISC (~Connection).
  if (absl::Status status = ValidateBlockSizes(connection.info); !status.ok()) return status;
  return connection;
}

}  // namespace blk::server::nbd
