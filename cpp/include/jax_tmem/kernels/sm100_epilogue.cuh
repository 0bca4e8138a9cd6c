// jax_tmem: the epilogues of the sm_100a / sm_103a kernels (kernels/sm100_gemm.cuh, sm100_gemm_2cta.cuh):
// one warp drains its TMEM lane quadrant (tcgen05.ld 32x32b: one thread = one output row) into the shared
// row-segment epilogue (epilogue.cuh) with direct stores, through swizzled shared-memory boxes and TMA
// stores (config 8 / 9), or as split-K / swap-AB partial sums (finished here when the plan has one
// split). NEVER EXECUTED ON A BLACKWELL GPU (compiled and SASS-checked).
#pragma once

#include <cstdint>

#include "jax_tmem/desc_sm100.h"
#include "jax_tmem/epilogue.cuh"
#include "jax_tmem/epilogue_tma.cuh"
#include "jax_tmem/ptx/common.cuh"
#include "jax_tmem/ptx/tcgen05.cuh"

namespace jax_tmem::sm100 {

using Params = epilogue::KernelParams;

// The epilogue of one tile for one warp: TMEM lanes of the warp's quadrant (one thread = one row) ->
// registers (tcgen05.ld 32x32b.x32, 32 columns at a time) -> fused epilogue -> global.
template <class C>
__device__ __forceinline__ void epilogue_tile(uint32_t taddr, int row, int64_t row_index, int n_blk, const Params& p) {
  using namespace jax_tmem::ptx;
#pragma unroll 1
  for (int c = 0; c < C::BLOCK_N / 32; ++c) {
    uint32_t r[32];
    tmem_ld_32x32b_x32(taddr + c * 32, r);
    tcgen05_wait_ld();
    float v[32];
#pragma unroll
    for (int j = 0; j < 32; ++j)  // s32 accumulators (kind::i8) convert exactly up to 2^24
      v[j] = C::kMma == desc::MmaKind::kI8 ? static_cast<float>(static_cast<int32_t>(r[j])) : __uint_as_float(r[j]);
    const int col0 = n_blk * C::BLOCK_N + c * 32;
    if (row < p.m && col0 < p.n) epilogue::finish_row_segment<32>(v, p.epi, row_index, col0, p.n);
  }
}

// The TMA-store epilogue of one tile for one warp (its 32 rows, from warp_row0): per 128-byte column
// chunk, tcgen05.ld 32 columns at a time, row_segment_math, write the row into the swizzled box, and
// the StoreRing protocol with the warp as the group and lane 0 as the leader. Rows past M hold values
// computed from zero-filled or (a tail box's slot) stale A rows; the TMA store clips them.
template <class C>
__device__ __forceinline__ void epilogue_tile_tma(uint32_t taddr, int row, int64_t row_index, int warp_row0,
                                                  int batch, int n_blk, const Params& p, const CUtensorMap* tma_out,
                                                  epilogue::StoreRing<C::OUT_BOX_BYTES>& ring, int lane) {
  using namespace jax_tmem::ptx;
  const bool leader = lane == 0, row_ok = row < p.m;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    constexpr int ES = sizeof(T), CW = 128 / ES;  // columns per chunk: 64 (2-byte output) or 32 (f32)
#pragma unroll 1
    for (int c = 0; c < C::BLOCK_N / CW; ++c) {
      ring.wait_free(leader);
      __syncwarp();
      uint8_t* box = ring.box();
#pragma unroll
      for (int s = 0; s < CW / 32; ++s) {
        uint32_t r[32];
        tmem_ld_32x32b_x32(taddr + c * CW + s * 32, r);
        tcgen05_wait_ld();
        float v[32];
#pragma unroll
        for (int j = 0; j < 32; ++j)  // s32 accumulators (kind::i8) convert exactly up to 2^24
          v[j] = C::kMma == desc::MmaKind::kI8 ? static_cast<float>(static_cast<int32_t>(r[j])) : __uint_as_float(r[j]);
        epilogue::row_segment_math<32>(v, p.epi, row_index, n_blk * C::BLOCK_N + c * CW + s * 32, p.n, row_ok);
        epilogue::stage_row_swizzled<32, T>(v, box, lane, s * 32 * ES);
      }
      fence_proxy_async_shared();
      __syncwarp();
      const int col0 = n_blk * C::BLOCK_N + c * CW;
      ring.store(leader, warp_row0 < p.m && col0 < p.n, tma_out, col0, warp_row0, batch);
    }
  };
  if (p.epi.out_type == static_cast<int32_t>(DType::kF32)) run(float{});
  else if (p.epi.out_type == static_cast<int32_t>(DType::kBF16)) run(__nv_bfloat16{});
  else run(__half{});
}

// The split-K / swap-AB epilogue of one work unit for one warp: its 32 rows (one per thread) of raw f32
// accumulators -> the workspace, in the output's orientation (the layout partial_store of the sm_90a
// kernel writes). kPartialOut == 1: row-contiguous float4 stores. kPartialOut == 2 (swap-AB: kernel rows
// are output columns): for each column, the warp's 32 lanes write 32 consecutive floats.
template <class C>
__device__ __forceinline__ void epilogue_tile_partial(uint32_t taddr, int row, int batch, int split, int n_blk,
                                                      const Params& p) {
  using namespace jax_tmem::ptx;
  constexpr int W = C::BLOCK_N < 32 ? C::BLOCK_N : 32;  // columns per tcgen05.ld
  const int64_t slab = static_cast<int64_t>(split) * p.batch + batch;
  if constexpr (C::kPartialOut == 1) {  // one split: the plain epilogue finishes the output
    if (p.splits == 1) return epilogue_tile<C>(taddr, row, static_cast<int64_t>(batch) * p.m + row, n_blk, p);
  }
#pragma unroll 1
  for (int c = 0; c < C::BLOCK_N / W; ++c) {
    uint32_t r[W];
    if constexpr (W == 32) tmem_ld_32x32b_x32(taddr + c * W, r);
    else tmem_ld_32x32b_x16(taddr + c * W, r);
    tcgen05_wait_ld();
    const int col0 = n_blk * C::BLOCK_N + c * W;
    if (row >= p.m || col0 >= p.n) {
      // nothing of this chunk is inside the output (the warp stays converged for the next tcgen05.ld)
    } else if (C::kPartialOut == 2 && p.splits == 1) {  // swap-AB, one split: output (col, row), finished here
#pragma unroll
      for (int j = 0; j < W; ++j)
        if (col0 + j < p.n)
          epilogue::finish_element(__uint_as_float(r[j]), p.epi, static_cast<int64_t>(batch) * p.n + col0 + j, row, p.m);
    } else if constexpr (C::kPartialOut == 1) {
      float* w = p.ws + (slab * p.m + row) * p.ws_ld + col0;  // ws_ld % 4 == 0, col0 % 16 == 0: aligned
      if (col0 + W <= p.ws_ld) {
#pragma unroll
        for (int j = 0; j < W; j += 4)
          *reinterpret_cast<float4*>(w + j) = make_float4(__uint_as_float(r[j]), __uint_as_float(r[j + 1]),
                                                          __uint_as_float(r[j + 2]), __uint_as_float(r[j + 3]));
      } else {
#pragma unroll
        for (int j = 0; j < W; ++j)
          if (col0 + j < p.n) w[j] = __uint_as_float(r[j]);
      }
    } else {
      float* w = p.ws + (slab * p.n + col0) * p.ws_ld + row;
#pragma unroll
      for (int j = 0; j < W; ++j)
        if (col0 + j < p.n) w[static_cast<int64_t>(j) * p.ws_ld] = __uint_as_float(r[j]);
    }
  }
}

}  // namespace jax_tmem::sm100
