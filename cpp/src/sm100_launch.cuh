// jax_tmem: host launch of one sm_100a/sm_103a kernel instantiation: run_tile<A, B, AMN, BMN> runs every
// menu entry of one kernel family. The dispatcher (sm100_gemm.cu) only declares the families; they are
// instantiated in generated translation units (sm100_instances.def, CMakeLists.txt), built in parallel.
#pragma once

#include <string>

#include "jax_tmem/kernels/sm100_gemm.cuh"
#include "jax_tmem/kernels/sm100_gemm_2cta.cuh"
#include "jax_tmem/menu.h"
#include "launch_common.cuh"

namespace jax_tmem::sm100 {

using Tile = menu::Sm100;  // the menu entries (jax_tmem/menu.h)

template <class C>
std::string run(const GemmLaunch& L) {
  return launch_persistent<C>(sm100_gemm_kernel<C>, L);
}

// The fixed menu: 128 x 256 tiles (4 stages, 512 TMEM columns = two 256-column accumulators) or
// 128 x 128 (6 stages, 256 columns).
// The CTA-pair kernel: 256 x 256 tiles over a (2,1,1) cluster, 6 stages of 32 KB per CTA (with the
// TMA-store epilogue, config 9, plus 32 KB of output boxes).
template <class C>
std::string run_2cta(const GemmLaunch& L) {
  return launch_persistent<C>(sm100_gemm_2cta_kernel<C>, L);
}

template <DType A, DType B, bool AMN, bool BMN>
std::string run_tile(const GemmLaunch& L, Tile tile) {
  switch (tile) {
    case Tile::k256x256Pair:
      if constexpr (A == DType::kS8) return run<Config<A, B, 256, 4, AMN, BMN>>(L);  // no kind::i8 pair kernel
      else return run_2cta<Config2Cta<A, B, 256, 6, AMN, BMN>>(L);
    case Tile::k128x256: return run<Config<A, B, 256, 4, AMN, BMN>>(L);
    case Tile::k128x256TmaStore: return run<Config<A, B, 256, 4, AMN, BMN, /*kTmaStore=*/true>>(L);
    case Tile::k256x256PairTmaStore:
      if constexpr (A == DType::kS8) return run<Config<A, B, 256, 4, AMN, BMN, true>>(L);  // no kind::i8 pair kernel
      else return run_2cta<Config2Cta<A, B, 256, 6, AMN, BMN, /*kTmaStore=*/true>>(L);
    // Split-K / swap-AB (f32 partials + the reduce pass; not int8: the dispatcher refuses it first).
    case Tile::k128x128SplitK:
      if constexpr (A == DType::kS8) return "split-K takes no int8";
      else return run<Config<A, B, 128, 6, AMN, BMN, false, /*kPartialOut=*/1>>(L);
    case Tile::k128x16SwapAB:
    case Tile::k128x32SwapAB:
    case Tile::k128x64SwapAB:
      // The launcher swapped the operands: B is the activation, K-major, 16-64 rows a tile.
      if constexpr (A == DType::kS8 || BMN) {
        return "swap-AB entries need a K-major lhs (the activation) and a non-int8 kind";
      } else {
        if (tile == Tile::k128x16SwapAB) return run<Config<A, B, 16, 12, AMN, false, false, 2>>(L);
        if (tile == Tile::k128x32SwapAB) return run<Config<A, B, 32, 11, AMN, false, false, 2>>(L);
        return run<Config<A, B, 64, 9, AMN, false, false, 2>>(L);
      }
    default: return run<Config<A, B, 128, 6, AMN, BMN>>(L);
  }
}


}  // namespace jax_tmem::sm100
