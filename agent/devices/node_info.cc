#include "agent/devices/node_info.h"

#include <sys/utsname.h>
#include <unistd.h>

#include "agent/version.h"
#include "server/ublk/support.h"

namespace blk::agent {

v1::GetNodeInfoResponse ReadNodeInfo(const BpfLocalityStatus& bpf_locality) {
  v1::GetNodeInfoResponse info;
  struct utsname name {};
  if (::uname(&name) == 0) info.set_kernel_release(name.release);
  const server::UblkSupport ublk = server::ProbeUblk();
  info.set_ublk_available(ublk.control_available);
  info.set_ublk_features(ublk.features);
  for (const std::string& feature : server::UblkFeatureNames(ublk.features)) {
    info.add_ublk_feature_names(feature);
  }
  info.set_cpu_count(static_cast<uint32_t>(::sysconf(_SC_NPROCESSORS_ONLN)));
  info.set_agent_version(kAgentVersion);
  info.set_bpf_locality_available(bpf_locality.available);
  info.set_bpf_locality_message(bpf_locality.message);
  return info;
}

}  // namespace blk::agent
