// jax_tmem: workspaces whose ready flags need no memset before a launch. The kernels whose pieces meet through a
// workspace (a pair's K splits: pair_fixup; a shared last wave: tail_fixup) keep f32 partial sums there and, after
// them, one ready flag per piece, raised by the piece and lowered again by its owner once read: left zero for the
// next launch. So such a workspace can live in a pool that is zeroed once per device (reserve(), called by the Python
// package when it registers the CUDA targets, never by a handler: handlers do not allocate and may run inside a
// stream capture), one region per call: keyed by the workspace address XLA gave the call (calls that may run at the
// same time hold distinct ones: XLA keeps both alive; calls that share one run one after the other and find the
// flags lowered) and by where the flags sit (another layout gets its own region: its flags must not fall on sums).
// Without a pool (or when it is full) the launcher clears the flags in XLA's workspace with a memset, as before,
// counted in stats().misses. (The flags cannot travel as a kernel parameter of their own: a larger KernelParams
// made ptxas spill in the 256-token swap-AB entry, 156 bytes.)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace jax_tmem::flag_pool {

// Allocates and zeroes device `device`'s pool (CUDA runtime ordinal) of `mib` MiB once; nothing for a device
// whose kernels do not meet through workspaces (compute capability other than 9.0). Returns "" or why not.
std::string reserve(int device, int64_t mib);

// A workspace of `words` 4-byte words whose `flags` words from `flags_at` on are zero, the same for every later call
// with the same key and layout. Null: no pool on the device, or it is full. No CUDA call: safe inside a capture.
float* region(int device, const void* key, int64_t words, int64_t flags_at, int64_t flags);

struct Stats {
  std::vector<int> devices;  // devices with a pool
  int64_t bytes = 0;         // per pool
  int64_t regions = 0;       // regions handed out, all devices
  int64_t used = 0;          // words in them
  int64_t misses = 0;        // launches that cleared flags in XLA's workspace (no pool on their device, or full)
  std::string error;         // the last reserve() failure
};
Stats stats();

}  // namespace jax_tmem::flag_pool
