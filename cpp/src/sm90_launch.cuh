// jax_tmem: host launch of one sm_90a kernel instantiation: run_tile<A, B, AMN, BMN> runs every menu entry
// of one kernel family. The dispatcher (sm90_gemm.cu) only declares the families; they are instantiated
// in generated translation units (sm90_instances.def, CMakeLists.txt), which the build compiles in parallel.
#pragma once

#include <algorithm>
#include <string>

#include "jax_tmem/kernels/sm90_gemm.cuh"
#include "jax_tmem/menu.h"
#include "launch_common.cuh"

namespace jax_tmem::sm90 {

template <class C>
std::string run(const GemmLaunch& L) {
  return launch_persistent<C>(sm90_gemm_kernel<C>, L);
}

// The fixed menu (jax_tmem/menu.h names and numbers the entries and holds the heuristic): 128-row
// tiles with BLOCK_N 256 (4 stages), 128 (6 stages) or 64 (8 stages), about 192 KB of ring each; the
// ping-pong, staged-epilogue, 2x1-cluster and TMA-store-epilogue variants (and their combination).
using Tile = menu::Sm90;

template <DType A, DType B, bool AMN, bool BMN>
std::string run_tile(const GemmLaunch& L, Tile tile) {
  switch (tile) {
    case Tile::k128x256: return run<Config<A, B, 256, 4, AMN, BMN>>(L);
    case Tile::k128x64: return run<Config<A, B, 64, 8, AMN, BMN>>(L);
    case Tile::k128x128PingPong: return run<Config<A, B, 128, 6, AMN, BMN, /*kPingPong=*/true>>(L);
    case Tile::k128x256Staged: return run<Config<A, B, 256, 4, AMN, BMN, false, /*kSmemEpilogue=*/true>>(L);
    case Tile::k128x256Cluster2: return run<Config<A, B, 256, 4, AMN, BMN, false, false, /*kClusterM=*/2>>(L);
    case Tile::k128x128Cluster2: return run<Config<A, B, 128, 6, AMN, BMN, false, false, /*kClusterM=*/2>>(L);
    case Tile::k128x256TmaStore: return run<Config<A, B, 256, 4, AMN, BMN, false, false, 1, /*kTmaStore=*/true>>(L);
    case Tile::k128x128TmaStore: return run<Config<A, B, 128, 6, AMN, BMN, false, false, 1, /*kTmaStore=*/true>>(L);
    case Tile::k128x256Cluster2TmaStore:
      return run<Config<A, B, 256, 4, AMN, BMN, false, false, /*kClusterM=*/2, /*kTmaStore=*/true>>(L);
    case Tile::k128x128SplitK: return run<Config<A, B, 128, 6, AMN, BMN, false, false, 1, false, /*kPartialOut=*/1>>(L);
    // Swap-AB (the launcher swapped the operands): B is the activation, K-major, 16-64 rows a tile.
    case Tile::k128x16SwapAB:
    case Tile::k128x32SwapAB:
    case Tile::k128x64SwapAB:
      if constexpr (BMN) {
        return "swap-AB entries need a K-major lhs (the activation)";
      } else {
        if (tile == Tile::k128x16SwapAB) return run<Config<A, B, 16, 12, AMN, false, false, false, 1, false, 2>>(L);
        if (tile == Tile::k128x32SwapAB) return run<Config<A, B, 32, 11, AMN, false, false, false, 1, false, 2>>(L);
        return run<Config<A, B, 64, 9, AMN, false, false, false, 1, false, 2>>(L);
      }
    default: return run<Config<A, B, 128, 6, AMN, BMN>>(L);
  }
}

}  // namespace jax_tmem::sm90
