// jax_tmem: the sm_90a kernel's epilogues, run by a consumer warpgroup on its wgmma accumulator
// fragment (64 rows x BLOCK_N, f32 in registers): the fragment walk, the split-K partial store, the
// fused epilogue math, and the three ways to store a tile: straight from registers (epilogue_store),
// through a shared-memory staging buffer with the row-segment epilogue shared with sm_100a
// (epilogue_store_staged, config 5), and through a swizzled box and a TMA bulk store
// (epilogue_store_tma, configs 8-10). The kernel (sm90_gemm.cuh) picks one per its Config.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cuda/atomic>

#include "jax_tmem/epilogue.cuh"
#include "jax_tmem/epilogue_tma.cuh"
#include "jax_tmem/ptx/common.cuh"
#include "jax_tmem/ptx/cluster.cuh"
#include "jax_tmem/ptx/mbarrier.cuh"
#include "jax_tmem/ptx/tma.cuh"
#include "jax_tmem/scheduler.cuh"

namespace jax_tmem::sm90 {

using Params = epilogue::KernelParams;

// Calls f(row, col, v0, v1) for each pair of horizontally adjacent accumulators of a thread's wgmma
// fragment (acc[4j + 2h + {0,1}] is (row0 + 8h, col0 + 8j + {0,1})) whose first element is inside the
// rows x cols output; col + 1 may be outside (f checks).
template <class C, class F>
__device__ __forceinline__ void for_each_fragment_pair(const float (&acc)[C::ACC_REGS], int row0, int col0, int rows,
                                                       int cols, F&& f) {
#pragma unroll
  for (int j = 0; j < C::BLOCK_N / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + 8 * h, col = col0 + 8 * j;
      if (row < rows && col < cols) f(row, col, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
    }
}

// A finished unit's accumulators cast to T and stored (a plain() epilogue): kPartialOut == 1 in the output's
// orientation, 2 (swap-AB) transposed (kernel row = output column).
template <class C, typename T>
__device__ __forceinline__ void plain_store(const float (&acc)[C::ACC_REGS], const Params& p, T* out, int batch,
                                            int row0, int col0) {
  const auto cast = [](float v) {
    if constexpr (sizeof(T) == 4) {
      return v;
    } else {
      const uint32_t w = epilogue::pack2<T>(v, 0.f);
      return *reinterpret_cast<const T*>(&w);
    }
  };
  for_each_fragment_pair<C>(acc, row0, col0, p.m, p.n, [&](int row, int col, float v0, float v1) {
    if constexpr (C::kPartialOut == 1) {
      T* o = out + (int64_t(batch) * p.m + row) * p.n + col;
      o[0] = cast(v0);
      if (col + 1 < p.n) o[1] = cast(v1);
    } else {
      T* o = out + (int64_t(batch) * p.n + col) * p.m + row;
      o[0] = cast(v0);
      if (col + 1 < p.n) o[p.m] = cast(v1);
    }
  });
}

// Split-K / swap-AB (kPartialOut): the raw f32 accumulators of one work unit go to the workspace, in
// the OUTPUT's orientation, slab [split][batch] of [out rows][ws_ld] (splitk_reduce.cuh then sums the
// slabs in split order and runs the epilogue). kPartialOut == 1: kernel rows are output rows.
// kPartialOut == 2 (swap-AB: the kernel computes out^T, its A is the weight): kernel rows are output
// columns, so each value goes to the transposed place (rows = lanes / 4: 8 consecutive floats).
template <class C>
__device__ __forceinline__ void partial_store(const float (&acc)[C::ACC_REGS], const Params& p, int batch,
                                              int split, int row0, int col0) {
  const int64_t slab = static_cast<int64_t>(split) * p.batch + batch;
  // ws_ld 0: one split, or K splits summed in this kernel (split_fixup); < 0: one split, the last wave shared
  // (kSwapTail, tail_fixup): the output is finished here.
  if (p.ws_ld <= 0 && epilogue::plain(p.epi)) {  // nothing to apply: cast and store
    // The output type dispatched once, around a straight run of stores of that type: the code a decode GEMM
    // executes once per CTA, cold (its instruction fetches, not its arithmetic, are the epilogue's cost).
    if (p.epi.out_type == static_cast<int32_t>(DType::kBF16))
      plain_store<C>(acc, p, static_cast<__nv_bfloat16*>(p.epi.out), batch, row0, col0);
    else if (p.epi.out_type == static_cast<int32_t>(DType::kF32))
      plain_store<C>(acc, p, static_cast<float*>(p.epi.out), batch, row0, col0);
    else
      plain_store<C>(acc, p, static_cast<__half*>(p.epi.out), batch, row0, col0);
    return;
  }
  for_each_fragment_pair<C>(acc, row0, col0, p.m, p.n, [&](int row, int col, float v0, float v1) {
    if (p.ws_ld <= 0) {  // finish the output here (no partial sums for a reduce pass)
      // (!kFusedFinish: the launcher never runs this twin with a fused epilogue and ws_ld <= 0: see Config)
      if constexpr (!C::kFusedFinish) {
      } else if constexpr (C::kPartialOut == 1) {
        epilogue::finish_element(v0, p.epi, int64_t(batch) * p.m + row, col, p.n);
        if (col + 1 < p.n) epilogue::finish_element(v1, p.epi, int64_t(batch) * p.m + row, col + 1, p.n);
      } else {  // swap-AB: kernel row = output column, kernel column = output row
        epilogue::finish_element(v0, p.epi, int64_t(batch) * p.n + col, row, p.m);
        if (col + 1 < p.n) epilogue::finish_element(v1, p.epi, int64_t(batch) * p.n + col + 1, row, p.m);
      }
    } else if constexpr (C::kPartialOut == 1) {
      float* w = p.ws + (slab * p.m + row) * p.ws_ld + col;  // ws_ld is even: pairs are aligned
      if (col + 1 < p.n) *reinterpret_cast<float2*>(w) = make_float2(v0, v1);
      else w[0] = v0;
    } else {
      float* w = p.ws + (slab * p.n + col) * p.ws_ld + row;
      w[0] = v0;
      if (col + 1 < p.n) w[p.ws_ld] = v1;
    }
  });
}

// A swap-AB warp's finished rows (16 kernel rows = 16 output columns, BLOCK_N tokens) cast to 16 bits and stored
// through shared memory (`stage`: 32 x BLOCK_N bytes of the idle ring for this warp): stmatrix.trans writes each
// token's 16 values as one 32-byte row (its two halves swapped on every other group of 4 tokens: no bank conflict),
// then each lane stores whole 16-byte pieces of output rows: BLOCK_N / 16 full-sector stores per lane instead of
// BLOCK_N / 2 two-byte ones that write each sector in halves (H200, 2026-12-02 13:22, docs/PERF.md: 0.8-1.2 us off a
// 160-token pair kernel, 2.1-2.5 % per bf16 8B decode layer at 136-256 tokens).
// Only where M % 8 == 0 (every piece whole and 16-byte aligned: row_base is a multiple of 16, the output buffer 16-byte
// aligned: gpu_gemm.cc refuses another); tokens past N skipped.
__device__ __forceinline__ bool staged_swap_store_ok(const Params& p) {
  return p.ws_ld <= 0 && epilogue::plain(p.epi) && p.m % 8 == 0 &&
         (p.epi.out_type == static_cast<int32_t>(DType::kBF16) || p.epi.out_type == static_cast<int32_t>(DType::kF16));
}
template <class C, typename T>
__device__ __forceinline__ void staged_swap_store_as(const float (&acc)[C::ACC_REGS], const Params& p, T* out,
                                                     int batch, int row_base, int col_base, uint32_t stage) {
  static_assert(C::BLOCK_N % 16 == 0, "x4 stores: pairs of 8-token blocks");
  static_assert(4 * C::CONSUMERS * 32 * C::BLOCK_N <= int64_t(C::kStages) * C::STAGE_BYTES, "every warp's stage fits");
  const int lane = threadIdx.x % 32;
  const auto at = [](int token, int h) { return uint32_t(token * 32 + (h ^ ((token >> 2) & 1)) * 16); };
#pragma unroll
  for (int j = 0; j < C::BLOCK_N / 8; j += 2) {  // matrix q: rows 8 (q & 1) .. + 7, tokens 8 (j + q / 2) .. + 7
    const int q = lane / 8;
    ptx::stmatrix_x4_trans(stage + at(8 * (j + q / 2) + lane % 8, q & 1),
                           epilogue::pack2<T>(acc[4 * j], acc[4 * j + 1]),
                           epilogue::pack2<T>(acc[4 * j + 2], acc[4 * j + 3]),
                           epilogue::pack2<T>(acc[4 * j + 4], acc[4 * j + 5]),
                           epilogue::pack2<T>(acc[4 * j + 6], acc[4 * j + 7]));
  }
  __syncwarp();
#pragma unroll
  for (int r = 0; r < C::BLOCK_N / 16; ++r) {
    const int token = r * 16 + lane / 2, half = lane % 2;
    const int col = col_base + token, row = row_base + 8 * half;  // output row (token), first output column
    if (col >= p.n || row >= p.m) continue;
    const uint4 v = ptx::lds_v4(stage + at(token, half));
    *reinterpret_cast<uint4*>(out + (int64_t(batch) * p.n + col) * p.m + row) = v;  // 16-B aligned: M % 8 == 0
  }
}
template <class C>
__device__ __forceinline__ void staged_swap_store(const float (&acc)[C::ACC_REGS], const Params& p, int batch,
                                                  int row_base, int col_base, uint32_t stage) {
  if (p.epi.out_type == static_cast<int32_t>(DType::kBF16))
    staged_swap_store_as<C>(acc, p, static_cast<__nv_bfloat16*>(p.epi.out), batch, row_base, col_base, stage);
  else
    staged_swap_store_as<C>(acc, p, static_cast<__half*>(p.epi.out), batch, row_base, col_base, stage);
}

// The fused epilogue on the accumulator fragment: y = act(alpha * acc + bias) + c, cast, masked store.
// Each step is one uniform branch per tile around a straight unrolled loop (small i-cache footprint).
template <class C>
__device__ __forceinline__ void epilogue_math(float (&acc)[C::ACC_REGS], const Params& p, int batch, int row0,
                                              int col0) {
  const epilogue::Args& e = p.epi;
  constexpr int J = C::BLOCK_N / 8;  // 8-column groups; acc[4j + 2h + {0,1}] is (row0 + 8h, col0 + 8j + {0,1})
  const float alpha = epilogue::effective_alpha(e);
  if (alpha != 1.0f) {
#pragma unroll
    for (int i = 0; i < C::ACC_REGS; ++i) acc[i] *= alpha;
  }
  if (e.bias != nullptr) {
#pragma unroll
    for (int j = 0; j < J; ++j) {
      const int col = col0 + 8 * j;
      const float b0 = col < p.n ? e.bias[col] : 0.f;
      const float b1 = col + 1 < p.n ? e.bias[col + 1] : 0.f;
      acc[4 * j] += b0; acc[4 * j + 2] += b0;
      acc[4 * j + 1] += b1; acc[4 * j + 3] += b1;
    }
  }
  epilogue::activate(acc, e.activation);
  const int64_t base = static_cast<int64_t>(batch) * p.m;
  if (e.c != nullptr) {
#pragma unroll
    for (int j = 0; j < J; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + 8 * h, col = col0 + 8 * j;
        if (row < p.m && col < p.n) {
          const int64_t idx = (base + row) * p.n + col;
          acc[4 * j + 2 * h] += epilogue::load_out(e.c, e.out_type, idx);
          if (col + 1 < p.n) acc[4 * j + 2 * h + 1] += epilogue::load_out(e.c, e.out_type, idx + 1);
        }
      }
  }
}

// epilogue_math, then masked stores straight from the fragment registers.
template <class C>
__device__ __forceinline__ void epilogue_store(float (&acc)[C::ACC_REGS], const Params& p, int batch, int row0,
                                               int col0) {
  epilogue_math<C>(acc, p, batch, row0, col0);
  const epilogue::Args& e = p.epi;
  const int64_t base = static_cast<int64_t>(batch) * p.m;
  const bool vec_ok = (p.n % 2) == 0;  // then (row * n + even col) is even: pairs are aligned
  auto store_all = [&](auto tag) {
    using T = decltype(tag);
    for_each_fragment_pair<C>(acc, row0, col0, p.m, p.n, [&](int row, int col, float v0, float v1) {
      T* o = static_cast<T*>(e.out) + (base + row) * p.n + col;
      if (vec_ok && col + 1 < p.n) {
        if constexpr (sizeof(T) == 4) *reinterpret_cast<float2*>(o) = make_float2(v0, v1);
        else *reinterpret_cast<uint32_t*>(o) = epilogue::pack2<T>(v0, v1);
      } else {
        if constexpr (sizeof(T) == 4) { o[0] = v0; if (col + 1 < p.n) o[1] = v1; }
        else {
          const uint32_t w = epilogue::pack2<T>(v0, v1);
          o[0] = *reinterpret_cast<const T*>(&w);
          if (col + 1 < p.n) o[1] = *(reinterpret_cast<const T*>(&w) + 1);
        }
      }
    });
  };
  if (e.out_type == static_cast<int32_t>(DType::kF32)) store_all(float{});
  else if (e.out_type == static_cast<int32_t>(DType::kBF16)) store_all(__nv_bfloat16{});
  else store_all(__half{});
}

// The staged epilogue of one consumer warpgroup (64 rows of the tile): per 32-column chunk, every
// thread writes its wgmma fragment to shared memory, the warpgroup syncs on its named barrier, then
// thread t finishes columns [16 (t % 2), 16 (t % 2) + 16) of row t / 2 with the row-segment epilogue
// shared with sm_100a, and the warpgroup syncs again before the buffer is reused.
template <class C>
__device__ __forceinline__ void epilogue_store_staged(float (&acc)[C::ACC_REGS], const Params& p,
                                                      const sched::TileCoord& tc, int cta_row0, int cw, float* buf) {
  const int t = threadIdx.x % 128, warp_q = t / 32, lane = t % 32;
  const int frag_row = 16 * warp_q + lane / 4, frag_col = 2 * (lane % 4);
  const int my_row = t / 2, my_half = t % 2;
  const int row = cta_row0 + cw * 64 + my_row;
  const int64_t row_index = static_cast<int64_t>(tc.batch) * p.m + row;
  const uint32_t barrier_id = 1 + cw;  // 0 is __syncthreads
#pragma unroll
  for (int c = 0; c < C::BLOCK_N / C::EPI_COLS; ++c) {
#pragma unroll
    for (int jj = 0; jj < C::EPI_COLS / 8; ++jj) {
      const int j = c * (C::EPI_COLS / 8) + jj;  // 8-column group of the fragment
#pragma unroll
      for (int h = 0; h < 2; ++h)
        *reinterpret_cast<float2*>(&buf[(frag_row + 8 * h) * C::EPI_STRIDE + 8 * jj + frag_col]) =
            make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
    }
    ptx::named_barrier_sync(barrier_id, 128);
    float v[16];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const float4 f = *reinterpret_cast<const float4*>(&buf[my_row * C::EPI_STRIDE + 16 * my_half + 4 * q]);
      v[4 * q] = f.x; v[4 * q + 1] = f.y; v[4 * q + 2] = f.z; v[4 * q + 3] = f.w;
    }
    ptx::named_barrier_sync(barrier_id, 128);
    const int col0 = tc.n_blk * C::BLOCK_N + c * C::EPI_COLS + 16 * my_half;
    if (row < p.m && col0 < p.n) epilogue::finish_row_segment<16>(v, p.epi, row_index, col0, p.n);
  }
}

// The TMA-store epilogue of one consumer warpgroup (rows [wg_row0, wg_row0 + 64) of the output): per
// 128-byte column chunk (64 columns of a 2-byte output, 32 of f32) the StoreRing protocol
// (epilogue_tma.cuh) with the warpgroup as the group and its thread 0 as the leader; the fragment goes
// into the swizzled box conflict-free (the 8 rows one store instruction covers land in 8 different
// 16-byte units). `frag(j, h)` gives the values of fragment pair (8-column group j, row half h): two
// floats (f32 out) or one packed word (16-bit out).
template <class C, int ES, class Frag>
__device__ __forceinline__ void store_fragment_tma(const Params& p, int batch, int wg_row0, int col0,
                                                   const CUtensorMap* tma_out,
                                                   epilogue::StoreRing<C::OUT_BOX_BYTES>& ring, int cw, Frag&& frag) {
  using namespace jax_tmem::ptx;
  const int t = threadIdx.x % 128, warp_q = t / 32, lane = t % 32;
  const uint32_t barrier_id = 1 + cw;  // 0 is __syncthreads
  const int frag_row = 16 * warp_q + lane / 4;
  const bool leader = t == 0, rows_in = wg_row0 < p.m;
  constexpr int CW = 128 / ES, JC = CW / 8;  // columns and 8-column groups per chunk
#pragma unroll
  for (int c = 0; c < C::BLOCK_N / CW; ++c) {
    ring.wait_free(leader);
    named_barrier_sync(barrier_id, 128);
    uint8_t* box = ring.box();
    if constexpr (ES == 2) {
      // stmatrix x4 per two 8-column groups: matrices (rows 0-7, group j), (rows 8-15, j),
      // (rows 0-7, j + 1), (rows 8-15, j + 1) of the warp's 16 rows; lane l addresses row l % 8 of
      // matrix l / 8. An 8-column group of a 16-bit chunk is one 16-byte unit of the swizzled row.
      const int mat = lane / 8, st_row = 16 * warp_q + 8 * (mat & 1) + lane % 8;
      const uint32_t box_addr = smem_addr(box);
#pragma unroll
      for (int jj = 0; jj < JC; jj += 2) {
        const int j = c * JC + jj;
        stmatrix_x4(box_addr + epilogue::swizzle128(st_row, 16 * (jj + (mat >> 1))), frag(j, 0), frag(j, 1),
                    frag(j + 1, 0), frag(j + 1, 1));
      }
    } else {
#pragma unroll
      for (int jj = 0; jj < JC; ++jj)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          *reinterpret_cast<float2*>(box + epilogue::swizzle128(frag_row + 8 * h, (8 * jj + 2 * (lane % 4)) * ES)) =
              frag(c * JC + jj, h);
    }
    fence_proxy_async_shared();
    named_barrier_sync(barrier_id, 128);
    ring.store(leader, rows_in && col0 + c * CW < p.n, tma_out, col0 + c * CW, wg_row0, batch);
  }
}

// A 16-bit output tile of one consumer thread, two values per word: word 2j + h is fragment pair (j, h).
template <class C>
using Packed = uint32_t[C::ACC_REGS / 2];

// epilogue_math on a consumer warpgroup's fragment: rows [wg_row0, wg_row0 + 64), columns from col0.
template <class C>
__device__ __forceinline__ void epilogue_math_wg(float (&acc)[C::ACC_REGS], const Params& p, int batch, int wg_row0,
                                                 int col0) {
  const int t = threadIdx.x % 128;
  epilogue_math<C>(acc, p, batch, wg_row0 + 16 * (t / 32) + (t % 32) / 4, col0 + 2 * (t % 4));
}

// epilogue_math_wg, then the 16-bit result (bf16 or f16, the output type) packed into `out`.
template <class C>
__device__ __forceinline__ void epilogue_pack(float (&acc)[C::ACC_REGS], const Params& p, int batch, int wg_row0,
                                              int col0, Packed<C>& out) {
  epilogue_math_wg<C>(acc, p, batch, wg_row0, col0);
  if (p.epi.out_type == static_cast<int32_t>(DType::kBF16)) {
#pragma unroll
    for (int i = 0; i < C::ACC_REGS / 2; ++i) out[i] = epilogue::pack2<__nv_bfloat16>(acc[2 * i], acc[2 * i + 1]);
  } else {
#pragma unroll
    for (int i = 0; i < C::ACC_REGS / 2; ++i) out[i] = epilogue::pack2<__half>(acc[2 * i], acc[2 * i + 1]);
  }
}

template <class C>
__device__ __forceinline__ void store_packed_tma(const Packed<C>& v, const Params& p, int batch, int wg_row0, int col0,
                                                 const CUtensorMap* tma_out,
                                                 epilogue::StoreRing<C::OUT_BOX_BYTES>& ring, int cw) {
  store_fragment_tma<C, 2>(p, batch, wg_row0, col0, tma_out, ring, cw, [&](int j, int h) { return v[2 * j + h]; });
}

// The whole TMA-store epilogue of a tile: math, then the stores (16-bit outputs through epilogue_pack).
template <class C>
__device__ __forceinline__ void epilogue_store_tma(float (&acc)[C::ACC_REGS], const Params& p, int batch,
                                                   int wg_row0, int col0, const CUtensorMap* tma_out,
                                                   epilogue::StoreRing<C::OUT_BOX_BYTES>& ring, int cw) {
  if (p.epi.out_type == static_cast<int32_t>(DType::kF32)) {
    epilogue_math_wg<C>(acc, p, batch, wg_row0, col0);
    store_fragment_tma<C, 4>(p, batch, wg_row0, col0, tma_out, ring, cw,
                             [&](int j, int h) { return make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]); });
  } else {
    Packed<C> v;
    epilogue_pack<C>(acc, p, batch, wg_row0, col0, v);
    store_packed_tma<C>(v, p, batch, wg_row0, col0, tma_out, ring, cw);
  }
}

// A tile's piece of f32 partial sums in a workspace slot (tail_fixup), shared by both consumer warpgroups:
// thread i's registers as float4s at i, i + threads, ... (coalesced both ways); one ready flag (a 32-bit word) each,
// zero at launch, raised by put and lowered again by the one add that reads the slot (flag_pool.h).
template <class C>
struct PieceSlots {
  static constexpr int kThreads = 128 * C::CONSUMERS, kVecs = C::ACC_REGS / 4;
  static constexpr int64_t kSlotVecs = int64_t(kVecs) * kThreads;  // = BLOCK_M x BLOCK_N floats / 4
  static_assert(C::ACC_REGS % 4 == 0, "float4 partial sums");
  float4* ws;
  unsigned int* flags;  // after `slots` slots
  __device__ PieceSlots(float* w, int64_t slots)
      : ws(reinterpret_cast<float4*>(w)), flags(reinterpret_cast<unsigned int*>(ws + slots * kSlotVecs)) {}
  // Stores the sums to `slot` and raises its flag (release).
  __device__ __forceinline__ void put(const float (&acc)[C::ACC_REGS], int64_t slot) const {
    const int i = threadIdx.x - 128;  // the consumer threads follow the producer warpgroup
    float4* dst = ws + slot * kSlotVecs + i;
#pragma unroll
    for (int v = 0; v < kVecs; ++v)
      __stcg(dst + v * kThreads, make_float4(acc[4 * v], acc[4 * v + 1], acc[4 * v + 2], acc[4 * v + 3]));
    __threadfence();
    ptx::named_barrier_sync(C::kTailBarrier, kThreads);
    if (i == 0)
      ::cuda::atomic_ref<unsigned int, ::cuda::thread_scope_device>(flags[slot]).store(1u, ::cuda::memory_order_release);
  }
  // Waits for `slot`'s flag (acquire), lowers it for the next launch and adds its sums into acc.
  __device__ __forceinline__ void add(float (&acc)[C::ACC_REGS], int64_t slot) const {
    const int i = threadIdx.x - 128;
    if (i == 0) {
      ::cuda::atomic_ref<unsigned int, ::cuda::thread_scope_device> flag(flags[slot]);
      while (flag.load(::cuda::memory_order_acquire) == 0u) __nanosleep(32);
      flag.store(0u, ::cuda::memory_order_relaxed);  // nobody raises it again in this launch
    }
    ptx::named_barrier_sync(C::kTailBarrier, kThreads);
    const float4* src = ws + slot * kSlotVecs + i;
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      const float4 q = __ldcg(src + v * kThreads);
      acc[4 * v] += q.x, acc[4 * v + 1] += q.y, acc[4 * v + 2] += q.z, acc[4 * v + 3] += q.w;
    }
  }
};

// A piece of a tile of the last wave (sched::TailSplit), after its MMAs retired, in both consumer
// warpgroups of CTA c. A piece that does not start at k-block 0 stores its accumulators to CTA c's slot,
// raises c's flag and returns false: no epilogue. The owner's piece (k-block 0) waits for each later
// piece's flag in CTA order, adds its partial sums into `acc` in that order (bitwise repeatable) and
// returns true: it stores the tile.
template <class C>
__device__ __forceinline__ bool tail_fixup(float (&acc)[C::ACC_REGS], const epilogue::KernelParams& p,
                                           const sched::TailSplit& tail, int t, int kb0) {
  const PieceSlots<C> slots(p.ws, tail.ctas);
  const int c = blockIdx.x;
  if (kb0 != 0) {
    slots.put(acc, c);
    return false;
  }
  for (int src_cta = tail.next_piece(c, t); src_cta >= 0; src_cta = tail.next_piece(src_cta, t)) slots.add(acc, src_cta);
  return true;
}

// A weight-multicast pair's K splits (Config::kPairSplits, KernelParams splits > 1) summed inside the kernel through
// the workspace, as cuBLAS's 1x2 decode kernels do: each split of a tile runs on a pair of its own (clusters of 2, all
// resident: menu::pair_split_ws_floats). Split q > 0 stores each CTA's sums to slot ((t x (splits - 1) + q - 1) x 2 +
// rank) and raises its flag; split 0 waits for splits 1, 2, ... in that order and adds them (the reduce pass's order:
// the same bits), then stores the tile. Units of a tile are consecutive and a waiting unit waits only for later ones,
// so a grid of at least `splits` clusters cannot deadlock. Every flag is lowered again by its reader.
template <class C>
__device__ __forceinline__ bool pair_fixup(float (&acc)[C::ACC_REGS], const epilogue::KernelParams& p, int num_tiles,
                                           int t, int split, uint32_t rank) {
  const int64_t per_tile = int64_t(p.splits - 1) * C::CTAS_PER_TILE, base = t * per_tile + rank;
  const PieceSlots<C> slots(p.ws, num_tiles * per_tile);
  if (split != 0) {
    slots.put(acc, base + (split - 1) * C::CTAS_PER_TILE);
    return false;
  }
  for (int q = 1; q < p.splits; ++q) slots.add(acc, base + (q - 1) * C::CTAS_PER_TILE);
  return true;
}

// K splits summed inside the kernel (menu::k_splits: KernelParams splits > 1 with ws_ld 0). The launcher ran each
// tile's splits as one cluster of p.splits CTAs, one unit per CTA, split = the CTA's rank in the cluster: the
// sums meet in distributed shared memory, no workspace, no flags, no reduce pass. Consumer warp w's rows are
// finished by the CTA of rank w % splits (the epilogue shared out). Every CTA leaves its sums in its own shared
// memory (the ring, idle once both consumer warpgroups' MMAs retired); after a cluster barrier each owner reads
// the splits' sums of its rows in split order and adds them (the reduce pass's order: the same bits) straight
// into its accumulators (no second register set: a 256-wide tile has 128 per thread). Returns whether this
// thread's warp runs the epilogue. Every thread of every CTA of the cluster passes both cluster barriers: the
// producer warpgroup at the kernel's end (cluster_split_barriers).
template <class C>
__device__ __forceinline__ bool split_fixup(float (&acc)[C::ACC_REGS], uint8_t* smem, int split, int splits) {
  constexpr int kThreads = 128 * C::CONSUMERS, kVecs = C::ACC_REGS / 4;
  static_assert(C::ACC_REGS % 4 == 0, "float4 partial sums");
  static_assert(int64_t(kVecs) * kThreads * 16 <= int64_t(C::kStages) * C::STAGE_BYTES, "a CTA's sums fit its ring");
  const int i = threadIdx.x - 128;  // the consumer threads follow the producer warpgroup
  const bool mine = (i / 32) % splits == split;
  float4* slot = reinterpret_cast<float4*>(smem) + i;  // float4 v of thread i at v * kThreads + i: coalesced
  ptx::named_barrier_sync(C::kTailBarrier, kThreads);  // both warpgroups' MMAs retired: the ring is idle
#pragma unroll
  for (int v = 0; v < kVecs; ++v) slot[v * kThreads] = make_float4(acc[4 * v], acc[4 * v + 1], acc[4 * v + 2], acc[4 * v + 3]);
  ptx::cluster_sync();  // releases our sums to the cluster, acquires the other splits'
  if (mine) {
    const uint32_t src0 = ptx::mapa_shared(ptx::smem_addr(slot), 0u);
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      const float4 x = ptx::lds_cluster_f32x4(src0 + v * kThreads * 16);
      acc[4 * v] = x.x, acc[4 * v + 1] = x.y, acc[4 * v + 2] = x.z, acc[4 * v + 3] = x.w;
    }
    for (int q = 1; q < splits; ++q) {
      const uint32_t src = ptx::mapa_shared(ptx::smem_addr(slot), static_cast<uint32_t>(q));
#pragma unroll
      for (int v = 0; v < kVecs; ++v) {
        const float4 x = ptx::lds_cluster_f32x4(src + v * kThreads * 16);
        acc[4 * v] += x.x, acc[4 * v + 1] += x.y, acc[4 * v + 2] += x.z, acc[4 * v + 3] += x.w;
      }
    }
  }
  ptx::cluster_sync();  // every owner's reads of our shared memory are done: we may exit
  return mine;
}

// The producer warpgroup's part in split_fixup's two cluster barriers (it has no sums), at the kernel's end.
template <class C>
__device__ __forceinline__ void cluster_split_barriers(const epilogue::KernelParams& p) {
  if constexpr (C::kSplitsInKernel) {
    if (p.splits > 1 && p.ws_ld == 0) {
      __syncwarp();
      ptx::cluster_sync();
      ptx::cluster_sync();
    }
  }
}

}  // namespace jax_tmem::sm90
