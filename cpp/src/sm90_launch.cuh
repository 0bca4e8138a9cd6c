// jax_tmem: host launch of one sm_90a kernel instantiation (shared by the sm90_gemm*.cu units, which
// split the instantiation menu so the build compiles them in parallel).
#pragma once

#include <algorithm>
#include <string>

#include "jax_tmem/kernels/sm90_gemm.cuh"
#include "jax_tmem/launch.h"
#include "jax_tmem/tma_desc.h"

namespace jax_tmem::sm90 {

template <class C>
std::string run(const GemmLaunch& L) {
  const GemmProblem& p = L.p;
  CUtensorMap map_a, map_b;
  const bool a_batched = p.batch > 1 && p.stride_a != 0, b_batched = p.batch > 1 && p.stride_b != 0;
  std::string err;
  if constexpr (C::kAMN)
    err = tma::encode_operand(&map_a, L.a, p.a_type, p.m, p.k, a_batched ? p.batch : 1, p.lda, p.stride_a, 64, C::BLOCK_K);
  else
    err = tma::encode_operand(&map_a, L.a, p.a_type, p.k, p.m, a_batched ? p.batch : 1, p.lda, p.stride_a, C::BLOCK_K, C::BLOCK_M);
  if (!err.empty()) return "operand a: " + err;
  if constexpr (C::kBMN)
    err = tma::encode_operand(&map_b, L.b, p.b_type, p.n, p.k, b_batched ? p.batch : 1, p.ldb, p.stride_b, 64, C::BLOCK_K);
  else
    err = tma::encode_operand(&map_b, L.b, p.b_type, p.k, p.n, b_batched ? p.batch : 1, p.ldb, p.stride_b, C::BLOCK_K, C::BLOCK_N);
  if (!err.empty()) return "operand b: " + err;

  Params prm;
  prm.m = static_cast<int>(p.m);
  prm.n = static_cast<int>(p.n);
  prm.k = static_cast<int>(p.k);
  prm.batch = static_cast<int>(p.batch);
  prm.a_batched = a_batched;
  prm.b_batched = b_batched;
  prm.epi = epilogue::Args{L.out, L.c, L.bias, p.alpha, static_cast<int32_t>(p.activation),
                           static_cast<int32_t>(p.out_type)};

  auto kernel = sm90_gemm_kernel<C>;
  // Raising the dynamic shared-memory limit is a per-function attribute, not a stream operation, so
  // it is allowed while XLA captures the call into a command buffer; do it once per instantiation.
  static const cudaError_t attr_err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM_BYTES);
  if (attr_err != cudaSuccess) return std::string("cudaFuncSetAttribute: ") + cudaGetErrorString(attr_err);

  const int64_t tiles = p.batch * ((p.m + C::BLOCK_M - 1) / C::BLOCK_M) * ((p.n + C::BLOCK_N - 1) / C::BLOCK_N);
  const int grid = static_cast<int>(std::min<int64_t>(tiles, L.num_sms));
  kernel<<<grid, C::NUM_THREADS, C::SMEM_BYTES, L.stream>>>(map_a, map_b, prm);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return std::string("kernel launch failed: ") + cudaGetErrorString(e);
  return "";
}

// The fixed menu: BLOCK_N 256 (4 stages) or 128 (6 stages), 128-row tiles, 192 KB of ring.
template <Kind K, bool AMN, bool BMN>
std::string run_tile(const GemmLaunch& L, int block_n) {
  if (block_n == 256) return run<Config<K, 256, 4, AMN, BMN>>(L);
  return run<Config<K, 128, 6, AMN, BMN>>(L);
}

// Defined in sm90_gemm_8bit.cu: tf32 and every fp8 mix (K-major A and B only).
std::string run_8bit_or_tf32(const GemmLaunch& L, int block_n);

}  // namespace jax_tmem::sm90
