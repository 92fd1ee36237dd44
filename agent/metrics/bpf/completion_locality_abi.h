// Shared by completion_locality.bpf.c and the agent that reads its maps.
#pragma once

#include <linux/types.h>

#define BLK_LOCALITY_MAX_DEVICES 256
#define BLK_LOCALITY_MAX_PAIRS 16384

struct blk_locality_key {
  __u32 dev;  // the kernel's dev_t: major << 20 | minor
  __u32 submit_cpu;
  __u32 complete_cpu;
};
