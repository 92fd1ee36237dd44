// blk_server_smoke --file PATH [--size BYTES] [--queues N]
//
// Creates a file-backed and a null ublk device, prints
//   file /dev/ublkbN
//   null /dev/ublkbM
//   ready
// then serves them while reading commands from stdin, one a line:
//   stop file|null [force]   -> "stopped NAME" or "refused NAME: MESSAGE"
//   counters file|null       -> "counters NAME reads=R writes=W flushes=F discards=D zeroes=Z
//   errors=E"
// On stdin EOF or SIGTERM it force-stops what is left and exits (0 when every stop worked).
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "server/ublk/device.h"
#include "server/ublk/support.h"

namespace {

using blk::server::Device;
using blk::server::DeviceConfig;
using blk::server::IoCounters;
using blk::server::IoKind;

int Usage() {
  std::cerr << "usage: blk_server_smoke --file PATH [--size BYTES] [--queues N]\n";
  return 2;
}

uint64_t Sum(const Device& device,
             const std::atomic<uint64_t> (IoCounters::*field)[IoCounters::kKinds], IoKind kind) {
  uint64_t total = 0;
  for (size_t q = 0; q < device.queue_count(); ++q) {
    total += (device.queue_counters(q).*field)[static_cast<int>(kind)].load();
  }
  return total;
}

void PrintCounters(const std::string& name, const Device& device) {
  uint64_t errors = 0;
  for (int k = 0; k < IoCounters::kKinds; ++k) {
    errors += Sum(device, &IoCounters::errors, static_cast<IoKind>(k));
  }
  std::cout << "counters " << name << " reads=" << Sum(device, &IoCounters::ios, IoKind::kRead)
            << " writes=" << Sum(device, &IoCounters::ios, IoKind::kWrite)
            << " flushes=" << Sum(device, &IoCounters::ios, IoKind::kFlush)
            << " discards=" << Sum(device, &IoCounters::ios, IoKind::kDiscard)
            << " zeroes=" << Sum(device, &IoCounters::ios, IoKind::kWriteZeroes)
            << " errors=" << errors << std::endl;
}

}  // namespace

int main(int argc, char** argv) {  // NOLINT(bugprone-exception-escape): a test tool
  std::string file;
  uint64_t size = 256ULL << 20;
  uint16_t queues = 2;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (i + 1 >= argc) return Usage();
    if (arg == "--file") {
      file = argv[++i];
    } else if (arg == "--size") {
      size = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--queues") {
      queues = static_cast<uint16_t>(std::atoi(argv[++i]));
    } else {
      return Usage();
    }
  }
  if (file.empty()) return Usage();

  // SIGTERM arrives through a signalfd; blocked before any queue thread exists so none takes it.
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigaddset(&term, SIGINT);
  sigprocmask(SIG_BLOCK, &term, nullptr);
  int signal_fd = signalfd(-1, &term, SFD_CLOEXEC);

  blk::server::UblkSupport support = blk::server::ProbeUblk();
  std::cout << "features 0x" << std::hex << support.features << std::dec;
  for (const std::string& name : blk::server::UblkFeatureNames(support.features)) {
    std::cout << " " << name;
  }
  std::cout << std::endl;

  std::map<std::string, std::unique_ptr<Device>> devices;
  DeviceConfig config;
  config.size_bytes = size;
  config.queues = queues;
  config.queue_depth = 64;
  config.backend = blk::server::FileBackendConfig{file};
  absl::StatusOr<std::unique_ptr<Device>> file_device = Device::Create(config);
  if (!file_device.ok()) {
    std::cerr << "create file device: " << file_device.status() << std::endl;
    return 1;
  }
  devices["file"] = std::move(*file_device);
  config.backend = blk::server::NullBackendConfig{};
  absl::StatusOr<std::unique_ptr<Device>> null_device = Device::Create(config);
  if (!null_device.ok()) {
    std::cerr << "create null device: " << null_device.status() << std::endl;
    return 1;
  }
  devices["null"] = std::move(*null_device);
  for (const auto& [name, device] : devices) {
    std::cout << name << " " << device->block_path() << std::endl;
  }
  std::cout << "ready" << std::endl;

  int failures = 0;
  std::string pending;
  bool done = false;
  while (!done) {
    pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {signal_fd, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) continue;
    if (fds[1].revents & POLLIN) break;
    char chunk[256];
    ssize_t n = read(STDIN_FILENO, chunk, sizeof(chunk));
    if (n <= 0) break;
    pending.append(chunk, static_cast<size_t>(n));
    size_t newline;
    while ((newline = pending.find('\n')) != std::string::npos) {
      std::istringstream line(pending.substr(0, newline));
      pending.erase(0, newline + 1);
      std::string verb, name, option;
      line >> verb >> name >> option;
      auto it = devices.find(name);
      if (it == devices.end()) {
        std::cout << "unknown device '" << name << "'" << std::endl;
        continue;
      }
      if (verb == "counters") {
        PrintCounters(name, *it->second);
      } else if (verb == "stop") {
        absl::Status stopped = it->second->Stop(/*force=*/option == "force");
        if (stopped.ok()) {
          std::cout << "stopped " << name << std::endl;
        } else {
          std::cout << "refused " << name << ": " << stopped << std::endl;
        }
      } else {
        std::cout << "unknown command '" << verb << "'" << std::endl;
      }
    }
  }
  for (auto& [name, device] : devices) {
    absl::Status stopped = device->Stop(/*force=*/true);
    if (!stopped.ok()) {
      std::cerr << "stop " << name << ": " << stopped << std::endl;
      ++failures;
    }
  }
  std::cout << "bye" << std::endl;
  return failures == 0 ? 0 : 1;
}
