// jax_tmem: the weight-only 4-bit GEMM for 17-64 tokens (issue 14), fed by TMA like w4_tma.cuh, with
// the same math (kernels/w4_gemm.cuh) arranged for many tokens.
//
// Why another kernel: at M = 64 every weight byte carries 256 FLOPs (8192^2: 8.6 GFLOP, ~9 us at the
// dense bf16 peak against ~11 us to read 35.6 MB), and the activations, not the weights, dominate the
// bytes a CTA reads (64 tokens x 2 B against 0.5 B per weight element). The <= 16-token kernels split K
// over their warps, so a CTA held 16-64 rows and each CTA read every activation again from L2 (16 % of
// copy at M = 64, slower than bf16; H200 2026-11-25: 8192^2 MXFP4 71 us, now 33.5 here). Here WR
// groups of consumer warps split the rows instead (16 R each, 16 R WR per CTA; the WK warps of a group
// split each stage's K) and share each stage's activations: every widened weight fragment feeds 2 x MT
// mma.sync (MT = 8: 64 tokens), every activation fragment R of them. The grid is refilled by splitting K over a cluster of CS CTAs (the same
// rows, consecutive K ranges), whose partial sums are added through distributed shared memory in rank
// order (bitwise repeatable, no second launch, no workspace).
//
// Stage (256 K): the packed weights (one 128B-swizzled box of 128 bytes per row, read as in w4_tma.cuh:
// mma row g -> box row sigma(g)), the scales (SWIZZLE_NONE, a 16-byte window per row) and the activations
// (four 128B-swizzled boxes of 64 K x 8 MT tokens; TMA zero-fills past K and M). Thread (g, q) holds K
// elements [32 q, 32 q + 32) of each 128-K chunk (one 16-byte weight load per row); the threads with
// q & 2 take their four weight words in the order 2, 3, 0, 1, so that the 8 lanes of a quarter-warp
// read 8 distinct 16-byte columns of the swizzled activation rows (conflict-free), and mma's k-labels
// stay paired with the same K in both operands (each thread supplies both at its own labels).
#pragma once

#include <cuda.h>

#include "jax_tmem/kernels/w4_gemm.cuh"
#include "jax_tmem/ptx/cluster.cuh"
#include "jax_tmem/ptx/mbarrier.cuh"
#include "jax_tmem/ptx/tma.cuh"

namespace jax_tmem::w4 {

template <int R, int WR, int WK, int V, int ST, int MT>
struct WidePlan {
  static constexpr int kRows = 16 * R * WR;
  static constexpr int kStageK = 256, kChunks = kStageK / kChunk;
  static constexpr int kWBoxBytes = kRows * 128;  // 256 K of every row
  static constexpr int kWBytes = kWBoxBytes;
  // Scale bytes per row and stage: 16 (NVFP4's 16 blocks; MXFP4's 8 sit in a 16-byte window that starts
  // 16-byte aligned, as a TMA box must: stage kt's at byte 8 (kt & 1) of it, zero-filled past K / 32).
  static constexpr int kSB = 16;
  static constexpr int scale_col(int kt) { return kt * kStageK / V / 16 * 16; }
  static constexpr int scale_byte(int kt) { return kt * kStageK / V % 16; }
  static constexpr int kXOffset = (kWBytes + kRows * kSB + 1023) / 1024 * 1024;
  static constexpr int kXBoxBytes = 8 * MT * 128;  // 64 K x 8 MT tokens
  static constexpr int kStageBytes = kXOffset + 4 * kXBoxBytes;
  static constexpr int kTxBytes = kWBytes + kRows * kSB + 4 * kXBoxBytes;
  static constexpr int kSlots = R * MT * 4 * 32;  // partial sums per warp
  static constexpr int kRedBytes = WK * WR * kSlots * 4;
  static constexpr int kRingBytes = ST * kStageBytes;
  static constexpr int kBarOffset = kRingBytes > kRedBytes ? kRingBytes : kRedBytes;
  static constexpr int kSmemBytes = kBarOffset + 2 * ST * 8 + 1024;  // + alignment slack
  static_assert(kRows <= 256, "a TMA box has at most 256 rows");
  static_assert((kStageK / kChunk) % WK == 0, "the chunks of a stage are split over WK warps");
  static_assert(kSmemBytes <= 232448, "more shared memory than an sm_90 CTA may have (227 KB)");
};

// A CTA of the many-token kernels: shared memory (1024-aligned), the ring's barriers (initialised, then
// __syncthreads), its rows, tokens, batch and K range (split = rank in its cluster of CS).
template <class P, int ST, int CS>
struct WideCta {
  uint8_t* smem;
  uint64_t *full, *empty;
  int split, b, row0, tok0, bw, bx, kt0, kt1;
  __device__ __forceinline__ WideCta(uint8_t* raw, int consumers, int mt, const Params& p) {
    smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
    full = reinterpret_cast<uint64_t*>(smem + P::kBarOffset);
    empty = full + ST;
    split = CS > 1 ? static_cast<int>(blockIdx.x % CS) : 0;  // == %cluster_ctarank
    b = blockIdx.z, row0 = static_cast<int>(blockIdx.x / CS) * P::kRows, tok0 = blockIdx.y * 8 * mt;
    bw = p.stride_w != 0 ? b : 0, bx = p.stride_x != 0 ? b : 0;  // batch coordinates (0: broadcast)
    const int nk = (p.k + P::kStageK - 1) / P::kStageK;
    kt0 = nk * split / CS, kt1 = nk * (split + 1) / CS;
    ptx::init_ring(full, empty, ST, consumers * 32);
  }
};

// The producer of the many-token kernels (lane 0 of their last warp): the CTA's stages of 256 K into a
// ring of ST slots: the weight box, the scales' window, four activation boxes of 64 K.
template <class P, int V, int ST, class Cta>
__device__ __forceinline__ void wide_produce(const Cta& c, const CUtensorMap* wmap, const CUtensorMap* smap,
                                             const CUtensorMap* xmap) {
  ptx::prefetch_tensormap(wmap);
  ptx::prefetch_tensormap(smap);
  ptx::prefetch_tensormap(xmap);
  for (int kt = c.kt0; kt < c.kt1; ++kt) {
    const int s = (kt - c.kt0) % ST;
    ptx::mbarrier_wait(&c.empty[s], (((kt - c.kt0) / ST) & 1) ^ 1);
    ptx::mbarrier_arrive_expect_tx(&c.full[s], P::kTxBytes);
    uint8_t* st = c.smem + s * P::kStageBytes;
    const int k0 = kt * P::kStageK;
    ptx::tma_load_3d(st, wmap, &c.full[s], k0 / 2, c.row0, c.bw);
    ptx::tma_load_3d(st + P::kWBytes, smap, &c.full[s], P::scale_col(kt), c.row0, c.bw);
#pragma unroll
    for (int i = 0; i < 4; ++i) ptx::tma_load_3d(st + P::kXOffset + i * P::kXBoxBytes, xmap, &c.full[s], k0 + i * 64, c.tok0, c.bx);
  }
}

// The epilogue of the many-token kernels. `red` (this CTA's shared memory) holds WK x kAll partial sums
// (the K parts of one slot kAll apart); after a barrier, CTA `split` of the CS adds its share of the slots
// over the CS CTAs (distributed shared memory) and the WK parts, in that order (bitwise repeatable), and
// stores alpha times the sum at where(e, row, tok) (CTA-local row, token). Called by `nthreads` threads:
// with CS > 1 every thread of the CTA (a cluster barrier; the producer warp reconverged first), else the
// consumers only (named barrier 1; the producer warp has returned, as in w4_tma.cuh).
template <class OutT, int CS, int WK, int kAll, class Where>
__device__ __forceinline__ void wide_reduce_store(const float* red, int split, int nthreads, int row0, int tok0, int b,
                                                  const Params& p, Where where) {
  if constexpr (CS > 1) ptx::cluster_sync();
  else ptx::named_barrier_sync(1, nthreads);
  const float alpha = p.alpha ? *p.alpha : 1.0f;
  constexpr int kShare = (kAll + CS - 1) / CS;
  const uint32_t red_addr = ptx::smem_addr(red);
  const int end = min(kAll, (split + 1) * kShare);
  for (int e = split * kShare + static_cast<int>(threadIdx.x); e < end; e += nthreads) {
    float v = 0.0f;
#pragma unroll 1
    for (int r = 0; r < CS; ++r)
#pragma unroll
      for (int k = 0; k < WK; ++k) {
        const int at = e + k * kAll;
        v += CS > 1 ? ptx::lds_cluster_f32(ptx::mapa_shared(red_addr + 4 * at, r)) : red[at];
      }
    int row, tok;
    where(e, row, tok);
    row += row0, tok += tok0;
    if (row < p.n && tok < p.m) store_out<OutT>(p.out, (int64_t(b) * p.m + tok) * p.n + row, v * alpha);
  }
  if constexpr (CS > 1) ptx::cluster_sync();  // no CTA leaves while a peer reads its partial sums
}

// Grid (ceil(n / (16 R WR)) x CS, ceil(m / (8 MT)), batch), clusters of (CS, 1, 1), WR WK + 1 warps (warp
// w: rows of group w % WR, the (w / WR)-th of WK parts of each stage's 2 chunks). Maps as in w4_tma.cuh
// with boxes {128, 16 R WR} (weights), {16, 16 R WR} (scales), {64, 8 MT} (activations, 128B swizzle).
template <class OutT, int MT, int R, int WR, int WK, int V, int ST, int CS>
__global__ void __launch_bounds__((WR * WK + 1) * 32) w4_wide_kernel(const __grid_constant__ CUtensorMap wmap,
                                                                const __grid_constant__ CUtensorMap smap,
                                                                const __grid_constant__ CUtensorMap xmap, const Params p) {
  using P = WidePlan<R, WR, WK, V, ST, MT>;
  constexpr int kConsumers = WR * WK;
  extern __shared__ uint8_t smem_raw[];
  const WideCta<P, ST, CS> cta(smem_raw, kConsumers, MT, p);
  uint8_t* smem = cta.smem;
  uint64_t *full = cta.full, *empty = cta.empty;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int split = cta.split, b = cta.b, row0 = cta.row0, tok0 = cta.tok0, kt0 = cta.kt0, kt1 = cta.kt1;

  float acc[R][MT][4] = {};

  if (warp == kConsumers) {  // the producer (its TMA loads complete on the ring's barriers if it returns)
    if (lane == 0) wide_produce<P, V, ST>(cta, &wmap, &smap, &xmap);
    if constexpr (CS == 1) return;
    __syncwarp();  // converged for the cluster barriers (.aligned)
  } else {  // the consumers: warp w owns rows 16 R (w % WR) + 16 i + 8 h + sigma(g), chunks c0 .. of each stage
    const int g = lane >> 2, q = lane & 3, sg = (g >> 1) | ((g & 1) << 2);
    const int wr = warp % WR, c0 = warp / WR * (P::kChunks / WK);
    const bool swap = q & 2;  // words 2, 3, 0, 1 (see the top)
    const uint32_t sbase = ptx::smem_addr(smem);
    const uint32_t w_off = (16 * R * wr + sg) * 128;
    const uint32_t s_off = P::kWBytes + (16 * R * wr + sg) * P::kSB + (V == 32 ? q : 2 * q);
    // Word j (after the swap) of chunk c, token 8 t + g: box 2 c + (q >> 1), 16-byte column
    // (4 (q & 1) + (j ^ (q & 2))) ^ g of the token's 128-byte row.
    const uint32_t mq = g ^ (q & 2) ^ ((q & 1) << 2);
    const uint32_t x_off = P::kXOffset + (q >> 1) * P::kXBoxBytes + g * 128;
    const E2M1Tables tb = e2m1_tables(lane & (static_cast<uint32_t>(p.m) >> 31));
    for (int kt = kt0; kt < kt1; ++kt) {
      const int s = (kt - kt0) % ST;
      ptx::mbarrier_wait(&full[s], ((kt - kt0) / ST) & 1);
      const uint32_t st = sbase + s * P::kStageBytes;
#pragma unroll
      for (int cc = 0; cc < P::kChunks / WK; ++cc) {  // 128-K chunks
        const int c = c0 + cc;
        uint4 wv[R][2];
        uint32_t scl[R][2][2];  // bf16x2 scales [tile][row g / g + 8][first / second 16 K of the thread's words]
        ScaledTables tab[R][2];
#pragma unroll
        for (int i = 0; i < R; ++i)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const uint4 v = ptx::lds_v4(st + (c >> 1) * P::kWBoxBytes + w_off + (16 * i + 8 * h) * 128 +
                                        ((((4 * (c & 1) + q) ^ sg)) << 4));
            wv[i][h] = swap ? make_uint4(v.z, v.w, v.x, v.y) : v;
            const uint32_t sa = st + s_off + (16 * i + 8 * h) * P::kSB + (V == 32 ? 4 * c : 8 * c) + P::scale_byte(kt);
            if constexpr (V == 32) {
              scl[i][h][0] = scl[i][h][1] = scale_bf16x2<V>(ptx::lds_u8(sa));
              tab[i][h] = e2m1_scaled_tables(scl[i][h][0]);
            } else {
              const uint32_t two = ptx::lds_u16(sa);
              const uint32_t first = scale_bf16x2<V>(two & 0xFF), second = scale_bf16x2<V>(two >> 8);
              scl[i][h][0] = swap ? second : first;
              scl[i][h][1] = swap ? first : second;
            }
          }
#pragma unroll
        for (int j = 0; j < 4; ++j) {  // weight word j: two mma steps; every row tile widened first, then
          uint32_t a[R][2][4];          // each token tile's activations loaded and used R times
#pragma unroll
          for (int i = 0; i < R; ++i) widen_word<V>(wv[i][0], wv[i][1], j, tab[i], tb, scl[i], a[i][0], a[i][1]);
#pragma unroll
          for (int t = 0; t < MT; ++t) {
            const uint4 xa = ptx::lds_v4(st + x_off + (2 * c) * P::kXBoxBytes + t * 1024 + ((j ^ mq) << 4));
#pragma unroll
            for (int i = 0; i < R; ++i) {
              ptx::mma_m16n8k16_bf16(acc[i][t], a[i][0], xa.x, xa.y);
              ptx::mma_m16n8k16_bf16(acc[i][t], a[i][1], xa.z, xa.w);
            }
          }
        }
      }
      // Release the stage (generic-proxy reads before the producer's next async-proxy write: w4_tma.cuh).
      ptx::fence_proxy_async_shared();
      ptx::mbarrier_arrive(&empty[s]);
    }
  }

  // The partial sums: each consumer warp's into the (consumed) ring, then CTA rank r of the cluster adds
  // the r-th share of every slot over the CS CTAs and the WK warps of its rows, in that order, and stores it.
  float* red = reinterpret_cast<float*>(smem);
  if (warp < kConsumers) {
    ptx::named_barrier_sync(1, kConsumers * 32);  // every consumer is done reading the ring
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
      for (int t = 0; t < MT; ++t)
#pragma unroll
        for (int c = 0; c < 4; ++c) red[warp * P::kSlots + ((i * MT + t) * 4 + c) * 32 + lane] = acc[i][t][c];
  }
  constexpr int kThreads = (CS > 1 ? kConsumers + 1 : kConsumers) * 32;
  wide_reduce_store<OutT, CS, WK, WR * P::kSlots>(red, split, kThreads, row0, tok0, b, p, [](int e, int& row, int& tok) {
    const int w = e / P::kSlots, sl = e % P::kSlots;
    const int ln = sl & 31, c = (sl >> 5) & 3, t = (sl >> 7) % MT, i = (sl >> 7) / MT, g = ln >> 2;
    row = 16 * R * w + 16 * i + 8 * (c >> 1) + ((g >> 1) | ((g & 1) << 2));
    tok = 8 * t + 2 * (ln & 3) + (c & 1);
  });
}

}  // namespace jax_tmem::w4
