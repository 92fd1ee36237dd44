#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace blk::server {

struct UblkSupport {
  bool control_available = false;  // /dev/ublk-control opened
  uint64_t features = 0;  // GET_FEATURES result; 0 when the kernel lacks GET_FEATURES (<6.5)
  std::string error;      // why not available, when !control_available
};

// Asks the running kernel what ublk offers. Never fails: the answer says what is missing.
UblkSupport ProbeUblk();

// "ZERO_COPY", "COMP_IN_TASK", ...; bits this build does not know are named "BIT_<n>".
std::vector<std::string> UblkFeatureNames(uint64_t features);

}  // namespace blk::server
