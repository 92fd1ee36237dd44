// Helpers for the NBD backend's host tests: a real nbdkit process, a minimal stand-in for the
// queue thread that drives a Backend through its own ring (or several, each on its own thread), and
// a fake server that lies.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/backend.h"
#include "server/nbd/protocol.h"
#include "server/tsan_annotations.h"
#include "server/ublk/ring.h"

namespace blk::server::testing_nbd {

using Clock = std::chrono::steady_clock;

inline bool CanConnectUnix(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un sun{};
  sun.sun_family = AF_UNIX;
  std::strncpy(sun.sun_path, path.c_str(), sizeof(sun.sun_path) - 1);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&sun), sizeof(sun)) == 0;
  ::close(fd);
  return ok;
}

inline bool CanConnectTcp(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

// Whether `pid` has ended (gone, or a zombie nobody reaped yet).
inline bool ProcessEnded(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_field, comm, state;
  if (!(stat >> pid_field >> comm >> state)) return true;
  return state == "Z" || state == "X";
}

// A loopback port nobody listens on right now.
inline uint16_t FreeTcpPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ADD_FAILURE() << "no free loopback port: " << std::strerror(errno);
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Another NBD server (qemu-nbd, nbd-server): argv as given, ready once `unix_socket` accepts
// connections. One that daemonizes names its pid file; it is killed through it at the end.
class ServerProcess {
 public:
  ServerProcess(std::vector<std::string> argv, std::string unix_socket, std::string pid_file = "")
      : argv_(std::move(argv)),
        unix_socket_(std::move(unix_socket)),
        pid_file_(std::move(pid_file)) {}
  ~ServerProcess() {
    if (!pid_file_.empty()) {
      pid_t daemon = 0;
      std::ifstream(pid_file_) >> daemon;
      if (daemon > 0) ::kill(daemon, SIGKILL);
    }
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  // Stops it the way its users do (SIGTERM to it, or to the pid in its pid file) and waits (up to
  // 10 s) until it is gone. False if it would not go.
  bool Stop(int signal = SIGTERM) {
    pid_t target = pid_;
    if (!pid_file_.empty()) std::ifstream(pid_file_) >> target;
    if (target <= 0 || ::kill(target, signal) != 0) return false;
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    bool ended = false;
    while (!ended && Clock::now() < deadline) {
      if (target == pid_) {
        ended = ::waitpid(pid_, nullptr, WNOHANG) == pid_;
      } else {
        ended = ProcessEnded(target);
      }
      if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling interval
    }
    if (ended && target == pid_) pid_ = -1;
    return ended;
  }
  // Waits until it accepts a connection, unless `await_ready` is false (a server that serves one
  // client, whom a test connection would be).
  bool Start(bool await_ready = true) {
    ::unlink(unix_socket_.c_str());
    pid_ = ::fork();
    if (pid_ == 0) {
      std::vector<char*> c_argv;
      for (auto& a : argv_) c_argv.push_back(a.data());
      c_argv.push_back(nullptr);
      ::execvp(c_argv[0], c_argv.data());
      ::_exit(127);
    }
    if (!await_ready) return pid_ > 0;
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < deadline) {
      if (CanConnectUnix(unix_socket_)) return true;
      int status = 0;
      if (pid_ > 0 && ::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        // A daemon's parent exits once the daemon runs.
        if (pid_file_.empty() || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling interval
    }
    return false;
  }

 private:
  std::vector<std::string> argv_;
  std::string unix_socket_;
  std::string pid_file_;
  pid_t pid_ = -1;
};

// nbdkit in the foreground, on a Unix socket (unix_socket set) or a loopback TCP port.
class NbdKit {
 public:
  NbdKit(std::string unix_socket, uint16_t port, std::vector<std::string> args)
      : unix_socket_(std::move(unix_socket)), port_(port), args_(std::move(args)) {}
  ~NbdKit() { Kill(); }

  // Starts it and waits (up to 10 s) until it accepts connections.
  bool Start() {
    if (!unix_socket_.empty()) ::unlink(unix_socket_.c_str());
    std::vector<std::string> argv = {"nbdkit", "-f", "--exit-with-parent"};
    if (!unix_socket_.empty()) {
      argv.insert(argv.end(), {"-U", unix_socket_});
    } else {
      argv.insert(argv.end(), {"-i", "127.0.0.1", "-p", std::to_string(port_)});
    }
    argv.insert(argv.end(), args_.begin(), args_.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      if (!stderr_path.empty()) {
        const int log =
            ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (log >= 0) ::dup2(log, STDERR_FILENO);
      }
      std::vector<char*> c_argv;
      c_argv.reserve(argv.size() + 1);
      for (auto& a : argv) c_argv.push_back(a.data());
      c_argv.push_back(nullptr);
      ::execvp("nbdkit", c_argv.data());
      ::_exit(127);
    }
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < deadline) {
      if (unix_socket_.empty() ? CanConnectTcp(port_) : CanConnectUnix(unix_socket_)) return true;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling interval
    }
    return false;
  }
  // SIGKILL and reap: the server vanishes mid-stream.
  void Kill() { Stop(SIGKILL); }
  // Sends `signal` (SIGTERM, SIGINT: the graceful stops) and waits until it exited.
  void Stop(int signal) {
    if (pid_ <= 0) return;
    ::kill(pid_, signal);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // Where its stderr goes (its -v debug messages), when set before Start.
  std::string stderr_path;

  std::string uri(const std::string& export_name = "") const {
    if (!unix_socket_.empty()) return "nbd+unix:///" + export_name + "?socket=" + unix_socket_;
    return "nbd://127.0.0.1:" + std::to_string(port_) + "/" + export_name;
  }

 private:
  std::string unix_socket_;
  uint16_t port_;
  std::vector<std::string> args_;
  pid_t pid_ = -1;
};

// A result Driver::Run reports for a request that did not complete before its deadline.
inline constexpr int32_t kNotCompleted = std::numeric_limits<int32_t>::min();

// Does what the queue thread does for the backend: submits I/Os per tag, feeds it the CQEs, ends
// each turn, and takes the results it completes (through the Completer, or as kResult CQEs on the
// ring).
class Driver {
 public:
  static constexpr uint32_t kMaxIoBytes = 1024 * 1024;

  Driver(std::unique_ptr<Backend> backend, uint16_t depth)
      : backend_(std::move(backend)), buffers_(size_t{depth} * kMaxIoBytes) {
    ring_ = std::move(*Ring::Create(512));
    attach_status_ = backend_->Attach(*ring_, 0, Completer(&Driver::Completed, this));
  }
  const absl::Status& attach_status() const { return attach_status_; }
  Ring& ring() { return *ring_; }
  uint8_t* Buffer(uint16_t tag) { return buffers_.data() + size_t{tag} * kMaxIoBytes; }

  // Runs ios[i] on tag i, all at once; results in order. kNotCompleted for any still pending at
  // the deadline.
  std::vector<int32_t> Run(std::vector<BlockIo> ios,
                           std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    results_.assign(ios.size(), kNotCompleted);
    pending_ = ios.size();
    for (size_t tag = 0; tag < ios.size(); ++tag) {
      ios[tag].buffer = Buffer(static_cast<uint16_t>(tag));
      backend_->Submit(static_cast<uint16_t>(tag), ios[tag]);
    }
    backend_->EndOfTurn();
    const auto deadline = Clock::now() + limit;
    while (pending_ > 0 && Clock::now() < deadline) {
      Pump(std::chrono::milliseconds(100));
      if (on_pumped) on_pumped();
    }
    std::vector<int32_t> results = std::move(results_);
    results_.clear();
    return results;
  }
  int32_t RunOne(const BlockIo& io) { return Run({io})[0]; }

  // Waits up to `wait` for CQEs and hands them to the backend (or, for kResult, takes them).
  void Pump(std::chrono::milliseconds wait) {
    __kernel_timespec ts{};
    ts.tv_nsec = static_cast<long long>(wait.count()) * 1000000;
    io_uring_cqe* cqe = nullptr;
    io_uring_submit_and_wait_timeout(ring_->get(), &cqe, 1, &ts, nullptr);
    unsigned head;
    unsigned seen = 0;
    io_uring_for_each_cqe(ring_->get(), head, cqe) {
      ++seen;
      switch (KindOf(cqe->user_data)) {
        case CqeKind::kBackend:
          backend_->OnCompletion(TagOf(cqe->user_data), *cqe);
          break;
        case CqeKind::kResult:
          HappensAfter(ring_.get());
          Completed(this, TagOf(cqe->user_data), cqe->res);
          break;
        default:
          break;
      }
    }
    io_uring_cq_advance(ring_->get(), seen);
    backend_->EndOfTurn();
  }

  std::function<void(uint16_t, int32_t)> on_result;
  // Called by Run after each Pump (a test changing the server's state outside a completion).
  std::function<void()> on_pumped;
  // Completions of tags that Run did not submit (or completed twice): always a bug.
  int unexpected_completions = 0;

 private:
  static void Completed(void* self, uint16_t tag, int32_t result) {
    Driver& driver = *static_cast<Driver*>(self);
    if (tag >= driver.results_.size() || driver.results_[tag] != kNotCompleted) {
      ++driver.unexpected_completions;
      return;
    }
    driver.results_[tag] = result;
    --driver.pending_;
    if (driver.on_result) driver.on_result(tag, result);
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Ring> ring_;
  std::vector<uint8_t> buffers_;
  absl::Status attach_status_;
  std::vector<int32_t> results_;
  size_t pending_ = 0;
};

// One queue of a test that drives several at once: a thread that makes and uses its own Driver
// (a ring belongs to the thread that made it) and runs the work it is given. Between works it keeps
// handing CQEs to its backend, so a queue serving the others' I/O (a shared connection) goes on
// answering them.
class QueueThread {
 public:
  using Work = std::function<std::string(Driver&)>;  // returns what went wrong, "" when nothing

  // Returns once the backend attached to the new ring.
  QueueThread(std::unique_ptr<Backend> backend, uint16_t depth) {
    std::promise<absl::Status> attached;
    std::future<absl::Status> attached_future = attached.get_future();
    thread_ = std::thread(
        [this, attached = std::move(attached), depth, b = std::move(backend)]() mutable {
          Driver driver(std::move(b), depth);
          attached.set_value(driver.attach_status());
          if (driver.attach_status().ok()) Loop(driver);
        });
    attach_status_ = attached_future.get();
  }
  ~QueueThread() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    thread_.join();
  }
  const absl::Status& attach_status() const { return attach_status_; }

  std::future<std::string> Post(Work work) {
    std::lock_guard<std::mutex> lock(mutex_);
    work_ = std::move(work);
    done_ = std::promise<std::string>();
    return done_.get_future();
  }

 private:
  void Loop(Driver& driver) {
    for (;;) {
      Work work;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stopping_) return;
        work = std::move(work_);
        work_ = nullptr;
      }
      if (work) {
        std::string problem = work(driver);
        std::lock_guard<std::mutex> lock(mutex_);
        done_.set_value(std::move(problem));
      } else {
        driver.Pump(std::chrono::milliseconds(20));
      }
    }
  }

  std::thread thread_;
  absl::Status attach_status_;
  std::mutex mutex_;
  bool stopping_ = false;
  Work work_;
  std::promise<std::string> done_;
};

}  // namespace blk::server::testing_nbd
