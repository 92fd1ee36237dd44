#include "agent/service_notifier.h"

#include <systemd/sd-daemon.h>

#include <map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "blk/v1/volume_state_name.h"
#include "spdlog/spdlog.h"

namespace blk::agent {
namespace {

void Notify(const std::string& message) {
  // unset_environment stays 0: STOPPING goes to the same socket later.
  const int result = sd_notify(/*unset_environment=*/0, message.c_str());
  if (result < 0) {
    spdlog::warn("cannot notify systemd ({}): {}", message,
                 absl::ErrnoToStatus(-result, "sd_notify").ToString());
  }
}

}  // namespace

void NotifyReady(const std::string& status) { Notify(absl::StrCat("READY=1\nSTATUS=", status)); }

void NotifyStopping(const std::string& status) {
  Notify(absl::StrCat("STOPPING=1\nSTATUS=", status));
}

std::string ServingStatus(const std::vector<v1::Volume>& recovered) {
  std::map<std::string, int> by_state;
  for (const v1::Volume& volume : recovered) {
    ++by_state[v1::VolumeStateName(volume.status().state())];
  }
  std::vector<std::string> counts;
  counts.reserve(by_state.size());
  for (const auto& [state, n] : by_state) counts.push_back(absl::StrCat(n, " ", state));
  return absl::StrCat("serving; ", recovered.size(), recovered.size() == 1 ? " volume" : " volumes",
                      " recovered",
                      counts.empty() ? "" : absl::StrCat(" (", absl::StrJoin(counts, ", "), ")"));
}

}  // namespace blk::agent
