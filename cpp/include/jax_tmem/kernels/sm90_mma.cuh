// jax_tmem: the wgmma steps of the sm_90a GEMM kernel (sm90_gemm.cuh): one K step of a consumer
// warpgroup's 64 x N tile, and the MMAs of one ring slot, for the operand types and majorness of a
// kernel Config.
#pragma once

#include <cstdint>

#include "jax_tmem/desc_sm90.h"
#include "jax_tmem/dtypes.h"
#include "jax_tmem/ptx/wgmma.cuh"

namespace jax_tmem::sm90 {

// One K step (INSTR_K deep) of the 64 x N x INSTR_K warpgroup MMA (N: the tile's BLOCK_N unless given).
template <class C, int N = C::BLOCK_N>
__device__ __forceinline__ void mma_step(float (&acc)[N / 2], uint64_t da, uint64_t db, uint32_t scale_d) {
  using namespace jax_tmem::ptx;
  constexpr int TA = C::kAMNSmem ? 1 : 0, TB = C::kBMN ? 1 : 0;
  constexpr DType A = C::kA, B = C::kB;
  if constexpr (A == DType::kBF16 && B == DType::kBF16) wgmma_bf16<N, TA, TB>(acc, da, db, scale_d);
  else if constexpr (A == DType::kF16 && B == DType::kF16) wgmma_f16<N, TA, TB>(acc, da, db, scale_d);
  else if constexpr (A == DType::kF32 && B == DType::kF32) wgmma_tf32<N>(acc, da, db, scale_d);
  else if constexpr (A == DType::kE4M3 && B == DType::kE4M3) wgmma_e4m3_e4m3<N>(acc, da, db, scale_d);
  else if constexpr (A == DType::kE4M3 && B == DType::kE5M2) wgmma_e4m3_e5m2<N>(acc, da, db, scale_d);
  else if constexpr (A == DType::kE5M2 && B == DType::kE4M3) wgmma_e5m2_e4m3<N>(acc, da, db, scale_d);
  else if constexpr (A == DType::kE5M2 && B == DType::kE5M2) wgmma_e5m2_e5m2<N>(acc, da, db, scale_d);
  else static_assert(A == DType::kInvalid, "no sm_90a wgmma for these operand types");
}

// The MMAs of one ring slot (K_CHUNKS x BLOCK_K / INSTR_K steps) into `d`, N columns of B from byte
// offset `b_off`, A from `a_off`, committed as one group; `zero`: the first step overwrites d (scale-d 0).
template <class C, int N>
__device__ __forceinline__ void slot_mmas(float (&d)[N / 2], uint64_t desc_a0, uint64_t desc_b0, uint32_t a_off,
                                          uint32_t b_off, bool zero) {
  using namespace jax_tmem::ptx;
  constexpr uint32_t K_STEP_A = C::kAMNSmem ? C::INSTR_K * 128 : 32;  // bytes per wgmma K step
  constexpr uint32_t K_STEP_B = C::kBMN ? C::INSTR_K * 128 : 32;
  fence_operands(d);
  wgmma_fence();
#pragma unroll
  for (int c = 0; c < C::K_CHUNKS; ++c) {
#pragma unroll
    for (int ks = 0; ks < C::BLOCK_K / C::INSTR_K; ++ks) {
      const uint64_t da = desc::sm90_desc_advance(desc_a0, a_off + c * C::A_CHUNK + ks * K_STEP_A);
      const uint64_t db = desc::sm90_desc_advance(desc_b0, b_off + c * C::B_CHUNK + ks * K_STEP_B);
      mma_step<C, N>(d, da, db, (!zero || c > 0 || ks > 0) ? 1u : 0u);
    }
  }
  wgmma_commit();
  fence_operands(d);
}

}  // namespace jax_tmem::sm90
