// blk_vm_reap [ID...]
//
// Removes ublk devices that a VM scenario left behind, e.g. after its server was
// killed: STOP_DEV then DEL_DEV for each id given, or for every /dev/ublkcN present.
// For the test bed only (tests/vm/scenarios/all.sh runs it between scenarios).
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>

#include "server/ublk/control.h"

namespace {

std::set<uint32_t> PresentDeviceIds() {
  std::set<uint32_t> ids;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/dev", error)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 5 && name.rfind("ublkc", 0) == 0 &&
        name.find_first_not_of("0123456789", 5) == std::string::npos) {
      ids.insert(static_cast<uint32_t>(std::stoul(name.substr(5))));
    }
  }
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  std::set<uint32_t> ids;
  for (int i = 1; i < argc; ++i) {
    char* end = nullptr;
    const unsigned long id = std::strtoul(argv[i], &end, 10);
    if (end == argv[i] || *end != '\0' || id > UINT32_MAX) {
      std::cerr << "usage: blk_vm_reap [ID...]: '" << argv[i] << "' is not a device id\n";
      return 2;
    }
    ids.insert(static_cast<uint32_t>(id));
  }
  if (argc == 1) ids = PresentDeviceIds();
  if (ids.empty()) return 0;

  auto control = blk::server::ControlDevice::Open();
  if (!control.ok()) {
    std::cerr << "blk_vm_reap: " << control.status() << "\n";
    return 1;
  }
  int failures = 0;
  for (const uint32_t id : ids) {
    // STOP_DEV fails on a device that never started; DEL_DEV decides.
    const absl::Status stopped = (*control)->StopDev(id);
    // Not waiting: a leftover opener of /dev/ublkbN must not hang the test bed.
    const absl::Status deleted = (*control)->DelDev(id, /*wait=*/false);
    if (deleted.ok()) {
      std::cout << "blk_vm_reap: removed ublk device " << id << "\n";
    } else {
      std::cerr << "blk_vm_reap: device " << id << ": " << deleted
                << (stopped.ok() ? "" : " (stop: " + stopped.ToString() + ")") << "\n";
      ++failures;
    }
  }
  return failures == 0 ? 0 : 1;
}
