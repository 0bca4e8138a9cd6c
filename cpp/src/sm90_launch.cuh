// jax_tmem: host launch of one sm_90a kernel instantiation (shared by the sm90_gemm*.cu units, which
// split the instantiation menu so the build compiles them in parallel).
#pragma once

#include <algorithm>
#include <string>

#include "jax_tmem/kernels/sm90_gemm.cuh"
#include "launch_common.cuh"

namespace jax_tmem::sm90 {

template <class C>
std::string run(const GemmLaunch& L) {
  return launch_persistent<C>(sm90_gemm_kernel<C>, L);
}

// The fixed menu: 128-row tiles with BLOCK_N 256 (4 stages), 128 (6 stages) or 64 (8 stages, for
// problems with too few tiles to fill the GPU, e.g. decode); about 192 KB of ring each.
template <Kind K, bool AMN, bool BMN>
std::string run_tile(const GemmLaunch& L, int block_n) {
  if (block_n == -128) return run<Config<K, 128, 6, AMN, BMN, /*kPingPong=*/true>>(L);  // config 3
  if (block_n == -256) return run<Config<K, 256, 4, AMN, BMN, false, /*kSmemEpilogue=*/true>>(L);  // config 5
  if (block_n == 256) return run<Config<K, 256, 4, AMN, BMN>>(L);
  if (block_n == 64) return run<Config<K, 64, 8, AMN, BMN>>(L);
  return run<Config<K, 128, 6, AMN, BMN>>(L);
}

// Defined in sm90_gemm_8bit.cu: tf32 and every fp8 mix (K-major A and B only).
std::string run_8bit_or_tf32(const GemmLaunch& L, int block_n);

}  // namespace jax_tmem::sm90
