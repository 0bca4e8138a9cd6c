// jax_tmem: host launch of one sm_100a/sm_103a kernel instantiation (shared by the sm100_gemm*.cu units).
#pragma once

#include <string>

#include "jax_tmem/kernels/sm100_gemm.cuh"
#include "jax_tmem/kernels/sm100_gemm_2cta.cuh"
#include "jax_tmem/menu.h"
#include "launch_common.cuh"

namespace jax_tmem::sm100 {

// The heuristic's code for the CTA-pair 256 x 256 tile (menu config 4).
constexpr int kPairTile = -256;

template <class C>
std::string run(const GemmLaunch& L) {
  return launch_persistent<C>(sm100_gemm_kernel<C>, L);
}

// The fixed menu: 128 x 256 tiles (4 stages, 512 TMEM columns = two 256-column accumulators) or
// 128 x 128 (6 stages, 256 columns).
// The CTA-pair kernel: 256 x 256 tiles over a (2,1,1) cluster, 6 stages of 32 KB per CTA.
template <class C>
std::string run_2cta(const GemmLaunch& L) {
  return launch_persistent<C>(sm100_gemm_2cta_kernel<C>, L);
}

template <Kind K, bool AMN, bool BMN>
std::string run_tile(const GemmLaunch& L, int block_n) {
  if constexpr (K == Kind::kS8S8) {
    if (block_n == kPairTile) block_n = 256;  // kind::i8 runs on the 1-CTA kernel
  } else {
    if (block_n == kPairTile) return run_2cta<Config2Cta<K, 256, 6, AMN, BMN>>(L);
  }
  if (block_n == 256) return run<Config<K, 256, 4, AMN, BMN>>(L);
  return run<Config<K, 128, 6, AMN, BMN>>(L);
}

template <Kind K>
std::string run_majors(const GemmLaunch& L, int block_n) {
  const bool am = L.p.a_mn_major, bm = L.p.b_mn_major;
  if (!am && !bm) return run_tile<K, false, false>(L, block_n);
  if (!am && bm) return run_tile<K, false, true>(L, block_n);
  if (am && !bm) return run_tile<K, true, false>(L, block_n);
  return run_tile<K, true, true>(L, block_n);
}

// Defined in sm100_gemm_fp8.cu: every fp8 mix and int8 x int8 (sm_100a only), any majorness.
std::string run_8bit(const GemmLaunch& L, int block_n);

}  // namespace jax_tmem::sm100
