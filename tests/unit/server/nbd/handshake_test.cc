// Dialing an NBD server while signals arrive. A signal handler that runs while connect(2) waits on
// a socket with a send timeout (the dial sets one), or while poll(2) waits, makes the call fail
// with EINTR, SA_RESTART or not; a thread with an io_uring sees the same whenever task work
// arrives. Such an interruption must neither fail the dial nor hang it. The listener here has a
// full backlog, so the dial waits in the kernel until the test frees a place; meanwhile a real
// signal hits it, once in each wait.
#include "server/nbd/handshake.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/unique_fd.h"
#include "gtest/gtest.h"
#include "server/nbd/protocol.h"

namespace blk::server::nbd {
namespace {

using std::chrono::milliseconds;

constexpr uint64_t kExportBytes = 1024 * 1024;
constexpr milliseconds kDialTimeout{30000};
// How long the test waits for a condition before it calls it a hang.
constexpr milliseconds kPatience{20000};

std::atomic<int> signals_handled{0};
void CountSignal(int /*signal*/) { signals_handled.fetch_add(1); }

// SIGUSR1 runs CountSignal, without SA_RESTART, while this lives.
class InterruptingSignal {
 public:
  InterruptingSignal() {
    struct sigaction action {};
    action.sa_handler = CountSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;
    ::sigaction(SIGUSR1, &action, &previous_);
  }
  ~InterruptingSignal() { ::sigaction(SIGUSR1, &previous_, nullptr); }
  InterruptingSignal(const InterruptingSignal&) = delete;
  InterruptingSignal& operator=(const InterruptingSignal&) = delete;

 private:
  struct sigaction previous_ {};
};

// Whether `condition` came true within kPatience (it is checked every millisecond).
bool WaitFor(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

std::string ReadProcFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

// Whether thread `tid` of this process sleeps in one of `syscalls` (/proc's syscall and stat).
bool SleepsIn(pid_t tid, const std::vector<long>& syscalls) {
  const std::string task = "/proc/self/task/" + std::to_string(tid);
  const std::string stat = ReadProcFile(task + "/stat");
  const size_t name_end = stat.rfind(')');
  if (name_end == std::string::npos || name_end + 2 >= stat.size() || stat[name_end + 2] != 'S') {
    return false;
  }
  long number = -1;
  std::istringstream(ReadProcFile(task + "/syscall")) >> number;
  return std::find(syscalls.begin(), syscalls.end(), number) != syscalls.end();
}

const std::vector<long> kConnect = {SYS_connect};

const std::vector<long>& ConnectOrPoll() {
  static const std::vector<long> syscalls = {
      SYS_connect,
      SYS_ppoll,
#ifdef SYS_poll
      SYS_poll,
#endif
  };
  return syscalls;
}

bool Readable(int fd) {
  pollfd readable{.fd = fd, .events = POLLIN, .revents = 0};
  return ::poll(&readable, 1, 0) == 1;
}

bool WriteAll(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t put = ::send(fd, p, n, MSG_NOSIGNAL);
    if (put <= 0) return false;
    p += put;
    n -= static_cast<size_t>(put);
  }
  return true;
}

bool ReadAll(int fd, void* out, size_t n) {
  auto* p = static_cast<uint8_t*>(out);
  while (n > 0) {
    const ssize_t got = ::recv(fd, p, n, 0);
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

bool SendOptionReply(int fd, uint32_t option, uint32_t type, const std::vector<uint8_t>& data) {
  uint8_t header[kOptionReplyHeaderBytes];
  PutU64(header, kOptReplyMagic);
  PutU32(header + 8, option);
  PutU32(header + 12, type);
  PutU32(header + 16, static_cast<uint32_t>(data.size()));
  return WriteAll(fd, header, sizeof(header)) && WriteAll(fd, data.data(), data.size());
}

// The server's side of a fixed newstyle handshake up to NBD_OPT_GO, for an export of
// kExportBytes: no structured replies, no block size constraints.
void ServeHandshake(int fd) {
  uint8_t greeting[18];
  PutU64(greeting, kInitMagic);
  PutU64(greeting + 8, kOptMagic);
  PutU16(greeting + 16, kFlagFixedNewstyle | kFlagNoZeroes);
  uint8_t client_flags[4];
  ASSERT_TRUE(WriteAll(fd, greeting, sizeof(greeting)));
  ASSERT_TRUE(ReadAll(fd, client_flags, sizeof(client_flags)));
  for (;;) {
    uint8_t header[16];
    ASSERT_TRUE(ReadAll(fd, header, sizeof(header)));
    ASSERT_EQ(GetU64(header), kOptMagic);
    const uint32_t option = GetU32(header + 8);
    std::vector<uint8_t> data(GetU32(header + 12));
    ASSERT_TRUE(ReadAll(fd, data.data(), data.size()));
    if (option != kOptGo) {
      ASSERT_TRUE(SendOptionReply(fd, option, kRepErrUnsup, {}));
      continue;
    }
    std::vector<uint8_t> info(12);
    PutU16(info.data(), kInfoExport);
    PutU64(info.data() + 2, kExportBytes);
    PutU16(info.data() + 10, kFlagHasFlags);
    ASSERT_TRUE(SendOptionReply(fd, option, kRepInfo, info));
    ASSERT_TRUE(SendOptionReply(fd, option, kRepAck, {}));
    return;
  }
}

// A listener whose backlog one connection fills (listen(2) with a backlog of 0 queues one).
struct FullListener {
  UniqueFd listener;
  UniqueFd filler;  // the connection in the backlog, never accepted until Free
  Address address;

  // Makes room for one more connection.
  void Free() {
    UniqueFd queued(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    EXPECT_TRUE(queued.valid()) << std::strerror(errno);
  }
};

FullListener UnixListener(const std::string& path) {
  FullListener full;
  sockaddr_un sun{};
  sun.sun_family = AF_UNIX;
  std::strncpy(sun.sun_path, path.c_str(), sizeof(sun.sun_path) - 1);
  const auto* addr = reinterpret_cast<const sockaddr*>(&sun);
  full.listener = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  EXPECT_EQ(::bind(full.listener.get(), addr, sizeof(sun)), 0) << std::strerror(errno);
  EXPECT_EQ(::listen(full.listener.get(), 0), 0) << std::strerror(errno);
  full.filler = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  EXPECT_EQ(::connect(full.filler.get(), addr, sizeof(sun)), 0) << std::strerror(errno);
  full.address.unix_socket = path;
  return full;
}

FullListener TcpListener() {
  FullListener full;
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(sin);
  auto* addr = reinterpret_cast<sockaddr*>(&sin);
  full.listener = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  EXPECT_EQ(::bind(full.listener.get(), addr, length), 0) << std::strerror(errno);
  EXPECT_EQ(::listen(full.listener.get(), 0), 0) << std::strerror(errno);
  EXPECT_EQ(::getsockname(full.listener.get(), addr, &length), 0) << std::strerror(errno);
  full.filler = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  EXPECT_EQ(::connect(full.filler.get(), addr, length), 0) << std::strerror(errno);
  full.address.host = "127.0.0.1";
  full.address.port = ntohs(sin.sin_port);
  return full;
}

// Dials `full` on a thread of its own, interrupts the dial with SIGUSR1 while it waits in
// connect(2), and again in whatever wait follows (poll(2), or connect(2) again), then frees the
// backlog and serves the handshake: the dial must succeed.
void DialSurvivesSignals(FullListener& full) {
  InterruptingSignal interrupting;
  signals_handled.store(0);
  std::atomic<pid_t> dialer_tid{0};
  std::atomic<bool> dialed{false};
  std::optional<absl::StatusOr<Connection>> result;
  struct Dialer {
    std::thread thread;
    FullListener& full;
    // A test that failed half way: a closed listener ends the dial.
    ~Dialer() {
      if (!thread.joinable()) return;
      full.listener.Reset();
      thread.join();
    }
  } dialer{std::thread([&] {
             dialer_tid.store(static_cast<pid_t>(::syscall(SYS_gettid)));
             result = Connect(full.address, kDialTimeout);
             dialed.store(true);
           }),
           full};
  const pthread_t dialer_thread = dialer.thread.native_handle();
  const auto dialer_waits_in = [&](const std::vector<long>& syscalls) {
    return dialed.load() || (dialer_tid.load() != 0 && SleepsIn(dialer_tid.load(), syscalls));
  };

  ASSERT_TRUE(WaitFor([&] { return dialer_waits_in(kConnect); }));
  ASSERT_FALSE(dialed.load()) << "the dial never waited: the listener's backlog was not full";
  ASSERT_EQ(::pthread_kill(dialer_thread, SIGUSR1), 0);
  ASSERT_TRUE(WaitFor([] { return signals_handled.load() == 1; }));

  ASSERT_TRUE(WaitFor([&] { return dialer_waits_in(ConnectOrPoll()); }));
  if (!dialed.load()) {
    ASSERT_EQ(::pthread_kill(dialer_thread, SIGUSR1), 0);
    ASSERT_TRUE(WaitFor([] { return signals_handled.load() == 2; }));
  }

  full.Free();
  // The dial gets through only now: until then it must still be waiting, not failed.
  ASSERT_TRUE(WaitFor([&] { return dialed.load() || Readable(full.listener.get()); }));
  if (!dialed.load()) {
    UniqueFd served(::accept4(full.listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    ASSERT_TRUE(served.valid()) << std::strerror(errno);
    ServeHandshake(served.get());
  }
  ASSERT_TRUE(WaitFor([&] { return dialed.load(); })) << "the dial hangs";
  dialer.thread.join();
  ASSERT_TRUE(result.has_value());
  ASSERT_TRUE(result->ok()) << result->status();
  EXPECT_EQ((*result)->info.size, kExportBytes);
}

TEST(NbdDial, UnixConnectInterruptedBySignalsStillConnects) {
  std::string dir = "/tmp/blk-nbd-dial-XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr) << std::strerror(errno);
  const std::string path = dir + "/nbd.sock";
  {
    FullListener full = UnixListener(path);
    DialSurvivesSignals(full);
  }
  ::unlink(path.c_str());
  ::rmdir(dir.c_str());
}

TEST(NbdDial, TcpConnectInterruptedBySignalsStillConnects) {
  FullListener full = TcpListener();
  DialSurvivesSignals(full);
}

}  // namespace
}  // namespace blk::server::nbd
