// jax_tmem: the derivative epilogue (GemmProblem::act_grad: y = (alpha * acc + bias) * act'(c), the backward GEMM of
// dot_general(..., input_activation=)) in the sm_90a TMA-store-overlap kernels (kEpiOverlap, 16-bit outputs), run
// where menu::act_grad_in_kernel holds.
//
// The overlapped epilogue already keeps a finished tile packed in registers (Packed<C>, the 16-bit y = alpha acc +
// bias) and writes it through the warpgroup's two 128-byte-wide output boxes under the next unit's first k-blocks.
// Here each 128-byte chunk of c (the activation's input, the output's shape and type) comes into the box the chunk
// will leave from, by TMA (the tensor map `tma_c`, the output's geometry), before the chunk is written: the threads
// read c with ldmatrix at the very addresses their stmatrix writes (the same fragment layout), multiply their packed
// values by act'(c) and store the products back in place; then the TMA store as before. So c is read once, from
// shared memory (no per-element global loads after the MMAs: 7-20 % of a large GEMM, docs/PERF.md 2026-11-27), and
// act' (one MUFU tanh and ~8 FP32 operations per value) runs one chunk per kSpacing k-blocks of the next unit, while
// its MMAs run. Chunks 0 and 1 of a tile are requested kLead k-blocks before its MMAs end (both boxes are free by
// then), chunk c >= 2 one k-block after chunk c - 2 left its box. (The product is rounded to the output type
// before the multiply: the unfused program's arithmetic. Computing act' in registers beside the MMAs instead cost
// 20 %: docs/PERF.md, 2026-11-30.)
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "jax_tmem/epilogue.cuh"
#include "jax_tmem/epilogue_tma.cuh"
#include "jax_tmem/gemm_problem.h"
#include "jax_tmem/kernels/sm90_epilogue.cuh"
#include "jax_tmem/ptx/common.cuh"
#include "jax_tmem/ptx/mbarrier.cuh"
#include "jax_tmem/ptx/tma.cuh"

#ifndef JT_ACT_GRAD_SPACING
#define JT_ACT_GRAD_SPACING 2  // k-blocks between two chunks of the derivative epilogue (an A/B build knob)
#endif

namespace jax_tmem::sm90 {

// d act / dx for relu, silu and gelu_tanh in one formula whose coefficients the activation picks once: with
// u = x (k1 + k3 x^2) and t = tanh(u),  act'(x) = (1 + t) / 2 + x (1 - t^2) (k1 + 3 k3 x^2) / 2
//   gelu_tanh: k1 = b, k3 = b 0.044715 (b = sqrt(2 / pi));   silu: k1 = 1/2, k3 = 0 (sigmoid(x) = (1 + tanh(x/2)) / 2);
//   relu: (x > 0), 0 at 0 and NaN (jax.nn.relu's gradient). epilogue_math.h apply_activation_grad is the reference.
struct ActGradFn {
  float k1, k3, h1, h3;  // h = half of u's derivative's coefficients
  bool relu;
  __device__ __forceinline__ explicit ActGradFn(Activation a) {
    constexpr float kBeta = 0.79788456080286536f, kC = 0.044715f;
    relu = a == Activation::kRelu;
    const bool gt = a == Activation::kGeluTanh;
    k1 = gt ? kBeta : 0.5f;
    k3 = gt ? kBeta * kC : 0.0f;
    h1 = 0.5f * k1;
    h3 = 1.5f * k3;
  }
  __device__ __forceinline__ float operator()(float x) const {
    const float x2 = x * x;
    const float t = ptx::tanh_approx(x * fmaf(k3, x2, k1));
    const float g = fmaf(x * fmaf(h3, x2, h1), fmaf(-t, t, 1.0f), fmaf(0.5f, t, 0.5f));
    return relu ? (x > 0.0f ? 1.0f : 0.0f) : g;
  }
};

// One word of two 16-bit values (T: __nv_bfloat16 or __half) times act' of the word of c beside it.
template <typename T>
__device__ __forceinline__ uint32_t times_act_grad(uint32_t y, uint32_t c, const ActGradFn& f) {
  float2 vy, vc;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    vy = make_float2(__uint_as_float(y << 16), __uint_as_float(y & 0xffff0000u));
    vc = make_float2(__uint_as_float(c << 16), __uint_as_float(c & 0xffff0000u));
  } else {
    vy = __half22float2(*reinterpret_cast<const __half2*>(&y));
    vc = __half22float2(*reinterpret_cast<const __half2*>(&c));
  }
  return epilogue::pack2<T>(vy.x * f(vc.x), vy.y * f(vc.y));
}

// One consumer warpgroup's derivative epilogue: the state of its pending (packed, not yet stored) tile's chunks and
// of its two box barriers (`bar`: bar[b] completes when c's chunk landed in box b: one arrive.expect_tx + the TMA
// bytes), in one warpgroup-uniform word (few loop-carried registers beside 128 accumulators and the
// 64 packed words); the pending tile's origin is the kernel's (pending_batch / row0 / col0: b, r0, c0 below). The
// warpgroup's thread 0 issues the TMA.
template <class C>
struct ActGradPipe {
  static constexpr int kChunks = C::BLOCK_N / 64;  // 128-byte chunks of a 16-bit tile row
  static constexpr int kSpacing = JT_ACT_GRAD_SPACING, kLead = 3;
  // (Chunk c of every tile leaves from box c % 2: whole pairs of chunks, Config::kActGrad's assertion.)
  using Ring = epilogue::StoreRing<C::OUT_BOX_BYTES>;
  // bits 0-3: the pending tile's chunks stored (kChunks: nothing pending); 4-7: its chunks requested; 8-11: chunks
  // requested of the tile whose MMAs run (0 or 2); 12, 13: the parity of bar[0], bar[1]'s next completion.
  uint32_t s;

  __device__ __forceinline__ ActGradPipe() : s(kChunks | kChunks << 4) {}
  __device__ __forceinline__ int done() const { return s & 15u; }
  __device__ __forceinline__ int loads() const { return (s >> 4) & 15u; }
  __device__ __forceinline__ int ahead() const { return (s >> 8) & 15u; }

  // Requests chunk `chunk` of the tile at (b, r0, c0) into box chunk % 2, once the box's last store has read it
  // (`later` stores were committed after that one: 0 or more).
  __device__ __forceinline__ void request(const CUtensorMap* tma_c, uint8_t* boxes, uint64_t* bar, int chunk, int later,
                                          int b, int r0, int c0) const {
    if (threadIdx.x % 128 != 0) return;
    if (later >= 1) ptx::bulk_wait_group_read<1>();
    else ptx::bulk_wait_group_read<0>();
    uint64_t* bb = &bar[chunk & 1];
    ptx::mbarrier_arrive_expect_tx(bb, C::OUT_BOX_BYTES);
    ptx::tma_load_3d(boxes + (chunk & 1) * C::OUT_BOX_BYTES, tma_c, bb, c0 + chunk * 64, r0, b);
  }

  // Chunk kC of the pending tile: wait for its c, y *= act'(c) in the box, then the TMA store (the StoreRing protocol).
  template <int kC, typename T>
  __device__ __forceinline__ void finish_chunk(const Packed<C>& v, const Params& p, const CUtensorMap* tma_out,
                                               Ring& ring, uint64_t* bar, int cw, int b, int r0, int c0) {
    using namespace jax_tmem::ptx;
    const int t = threadIdx.x % 128, warp_q = t / 32, lane = t % 32;
    mbarrier_wait(&bar[kC & 1], (s >> (12 + (kC & 1))) & 1u);
    s ^= 1u << (12 + (kC & 1));
    const ActGradFn f(static_cast<Activation>(p.epi.activation & ~kActGradFlag));
    const int mat = lane / 8, st_row = 16 * warp_q + 8 * (mat & 1) + lane % 8;
    const uint32_t box_addr = smem_addr(ring.box());
#pragma unroll
    for (int jj = 0; jj < 8; jj += 2) {  // (store_fragment_tma's stmatrix walk; ldmatrix gives the same fragment)
      const int j = kC * 8 + jj;
      const uint32_t addr = box_addr + epilogue::swizzle128(st_row, 16 * (jj + (mat >> 1)));
      uint32_t c[4];
      ldmatrix_x4<false>(addr, c);
      stmatrix_x4(addr, times_act_grad<T>(v[2 * j], c[0], f), times_act_grad<T>(v[2 * j + 1], c[1], f),
                  times_act_grad<T>(v[2 * j + 2], c[2], f), times_act_grad<T>(v[2 * j + 3], c[3], f));
    }
    fence_proxy_async_shared();
    named_barrier_sync(1 + cw, 128);
    ring.store(t == 0, r0 < p.m && c0 + kC * 64 < p.n, tma_out, c0 + kC * 64, r0, b);
  }

  // The pending tile's next chunk (compile-time register indices: one branch per chunk, no local memory), then
  // counted as stored.
  template <int kC = 0>
  __device__ __forceinline__ void finish_next(const Packed<C>& v, const Params& p, const CUtensorMap* tma_out,
                                              Ring& ring, uint64_t* bar, int cw, int b, int r0, int c0) {
    if constexpr (kC < kChunks) {
      if (done() == kC) {
        finish_chunk<kC, __nv_bfloat16>(v, p, tma_out, ring, bar, cw, b, r0, c0);  // (bf16 outputs only: the launcher)
        s += 1u;
      } else {
        finish_next<kC + 1>(v, p, tma_out, ring, bar, cw, b, r0, c0);
      }
    }
  }

  // The pending tile's next request, where its box is free (its box's last chunk, done - 1 or earlier, stored).
  __device__ __forceinline__ void request_next(const CUtensorMap* tma_c, uint8_t* boxes, uint64_t* bar, int b, int r0,
                                               int c0) {
    request(tma_c, boxes, bar, loads(), done() - loads() + 1, b, r0, c0);
    s += 1u << 4;
  }

  // The running tile's first two chunks (after the pending tile's last two left boxes 0 and 1).
  __device__ __forceinline__ void request_ahead(const CUtensorMap* tma_c, uint8_t* boxes, uint64_t* bar, int b, int r0,
                                                int c0) {
    request(tma_c, boxes, bar, 0, 1, b, r0, c0);
    request(tma_c, boxes, bar, 1, 0, b, r0, c0);
    s = (s & ~(15u << 8)) | (2u << 8);
  }

  // After k-block r of a unit of `len` k-blocks has its MMAs issued: the pending tile's (b, r0, c0) chunk of this
  // k-block and its next request (in the unit's last k-block every chunk left: a short unit); then, near the unit's
  // end, the running tile's (nb, nr0, nc0) first two chunks, if this warpgroup stores it (`stores`). So the pending
  // tile is stored before the running one is packed: no chunk work after the MMAs, where the accumulators and the
  // packed words are live together (that form spilled ~300 bytes: ptxas, 2026-11-30).
  __device__ __forceinline__ void step(int r, int len, bool stores, const Packed<C>& v, const Params& p,
                                       const CUtensorMap* tma_out, const CUtensorMap* tma_c, Ring& ring, uint64_t* bar,
                                       int cw, int b, int r0, int c0, int nb, int nr0, int nc0) {
    if (done() < kChunks) {
      if (r == len - 1) {
        flush(v, p, tma_out, tma_c, ring, bar, cw, b, r0, c0);
      } else {
        if (r == kSpacing * done() && loads() > done()) finish_next(v, p, tma_out, ring, bar, cw, b, r0, c0);
        const int l = loads();
        if (l < kChunks && l >= 2 && l <= done() + 1 && r == kSpacing * (l - 2) + 1)
          request_next(tma_c, ring.base, bar, b, r0, c0);
      }
    }
    if (done() == kChunks && stores && ahead() == 0 && r >= len - kLead)
      request_ahead(tma_c, ring.base, bar, nb, nr0, nc0);
  }

  // Every chunk of the pending tile, now (the unit's last k-block, or the kernel's end).
  __device__ __forceinline__ void flush(const Packed<C>& v, const Params& p, const CUtensorMap* tma_out,
                                        const CUtensorMap* tma_c, Ring& ring, uint64_t* bar, int cw, int b, int r0,
                                        int c0) {
    while (done() < kChunks) {
      if (loads() <= done()) request_next(tma_c, ring.base, bar, b, r0, c0);
      finish_next(v, p, tma_out, ring, bar, cw, b, r0, c0);
    }
  }

  // After the running tile is packed into v (step stored the pending one and requested the running one's first two
  // chunks in the unit's last k-blocks), it is the pending tile: done 0, requested = ahead, ahead 0, parities kept.
  __device__ __forceinline__ void after_pack() {
    s = (s & (3u << 12)) | (ahead() << 4);
  }
};

}  // namespace jax_tmem::sm90
