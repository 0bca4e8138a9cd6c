// jax_tmem: the weight-only 4-bit GEMM for decode (issue 14): out[b, m, n] = alpha * sum_k x[b, m, k] *
// (w[b, n, k] * s[b, n, k / V]), x bfloat16 (K-major), w float4_e2m1fn packed two per byte (XLA's E(4)
// layout: element 2i in the low nibble), K-major (N, K) like jax.nn.scaled_matmul's rhs, s the block
// scales (MXFP4: UE8M0 per V = 32; NVFP4: UE4M3 per V = 16), alpha an optional float32 scalar
// (NVFP4's global scale). Plain CUDA with mma.sync (sm_80+), so the same kernel serves every built arch.
//
// Decode reads each weight once: the kernel streams the packed bytes at full width (16 bytes per thread
// per load, 64 contiguous bytes per quad) and widens them on chip. Each warp owns 16 R weight rows
// (mma's M) and a quarter of K (the CTA's KW warps take 128-wide K chunks in turn and add their partial
// sums in shared memory, in a fixed order: bitwise repeatable); tokens are mma's N (8 per tile, MT tiles).
//
// The K order inside each 16-wide mma step is permuted, identically for both operands (a sum does not
// care): thread q of a quad holds K elements [32 q, 32 q + 32) of a chunk, exactly one MX block (two
// NVFP4 blocks), so its 16-byte load of a weight row is already in registers where mma wants it, and
// its activations are the matching 64 contiguous bytes. Widening: e2m1 -> bfloat16 by byte permutes
// (prmt) through 8-entry tables of the bf16 low and high bytes, the sign bits merged into the high
// bytes, then one bf16x2 multiply by the block scale (exact: an e2m1 value times a power of two or a
// UE4M3 scale has <= 6 significant bits).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "jax_tmem/ptx/cluster.cuh"
#include "jax_tmem/ptx/common.cuh"

namespace jax_tmem::w4 {

constexpr int kChunk = 128;  // K elements per warp step (64 bytes of a weight row)

struct Params {
  const __nv_bfloat16* x;  // (batch, m, k) rows of lda elements
  const uint8_t* w;        // packed e2m1, (batch, n, k) rows of ldb elements (ldb / 2 bytes)
  const uint8_t* s;        // block scales, plain (batch, n, k / vec)
  const float* alpha;      // null or one float
  void* out;               // (batch, m, n)
  int m, n, k;
  int64_t lda, ldb, stride_x, stride_w, stride_s;  // elements (w: elements, i.e. 2 per byte)
};

// The first table words of the e2m1 -> bf16 lookups below (bf16 of 0, 0.5, 1, 1.5, 2, 3, 4, 6: 0000 3F00
// 3F80 3FC0 4000 4040 4080 40C0, low | high bytes), held in registers: PRMT takes one table word as an
// immediate, the other must be a register, and left to itself the compiler rematerialises the constant
// before every lookup (one IMAD each, 4 per word; SASS of 2026-11-24), also when the value is an opaque
// constant (it lands in a uniform register, which PRMT's first operand cannot read, and is copied out
// for each use). `zero` must be 0 at run time but per-lane to the compiler (the callers pass lane & (m
// >> 31)), so the words stay in two ordinary registers.
struct E2M1Tables {
  uint32_t lo0, hi0;
};
__device__ __forceinline__ E2M1Tables e2m1_tables(uint32_t zero) {
  return {0xC0800000u | zero, 0x3F3F3F00u | zero};
}

// Eight e2m1 values (one 32-bit word, element i in bits [4i, 4i + 4)) -> four bf16x2 (elements 2j, 2j+1),
// through the tables lo0 | lo1 (low bytes of the 8 magnitudes' bf16) and hi0 | hi1 (high bytes, msb clear).
__device__ __forceinline__ void e2m1x8_lookup(uint32_t v, uint32_t lo0, uint32_t lo1, uint32_t hi0, uint32_t hi1,
                                              uint32_t (&r)[4]) {
  const uint32_t mag = v & 0x77777777u, mag_hi = mag >> 16;
  const uint32_t lo03 = ptx::prmt(lo0, lo1, mag), hi03 = ptx::prmt(hi0, hi1, mag);
  const uint32_t lo47 = ptx::prmt(lo0, lo1, mag_hi), hi47 = ptx::prmt(hi0, hi1, mag_hi);
  // Sign bytes: the msb of byte i is element i's sign (odd elements: v's bytes; even: v << 4's). The
  // tables' high bytes have a clear msb, so each merge is one LOP3.
  const uint32_t v4 = v << 4;
  const uint32_t s03 = ptx::prmt(v, v4, 0x1504u), s47 = ptx::prmt(v, v4, 0x3726u);
  const uint32_t h03 = hi03 | (s03 & 0x80808080u);
  const uint32_t h47 = hi47 | (s47 & 0x80808080u);
  r[0] = ptx::prmt(lo03, h03, 0x5140u);
  r[1] = ptx::prmt(lo03, h03, 0x7362u);
  r[2] = ptx::prmt(lo47, h47, 0x5140u);
  r[3] = ptx::prmt(lo47, h47, 0x7362u);
}

// The unscaled tables: bf16 of 0, 0.5, 1, 1.5, 2, 3, 4, 6 = 0000 3F00 3F80 3FC0 4000 4040 4080 40C0.
__device__ __forceinline__ void e2m1x8_to_bf16(uint32_t v, const E2M1Tables& tb, uint32_t (&r)[4]) {
  e2m1x8_lookup(v, tb.lo0, 0xC0804000u, tb.hi0, 0x40404040u, r);
}

// The tables of one block, its scale folded in (bf16x2 `scale` in both halves): the 8 magnitudes times
// the scale by four bf16x2 multiplies (the same products as multiplying each widened value, NaN and
// subnormals included), split into low and high bytes. An MXFP4 thread reads 4 words per block, so
// this replaces 16 multiplies by 8 instructions.
struct ScaledTables {
  uint32_t lo0, lo1, hi0, hi1;
};
__device__ __forceinline__ uint32_t bmul2(uint32_t a, uint32_t b) {
  __nv_bfloat162 r = __hmul2(*reinterpret_cast<__nv_bfloat162*>(&a), *reinterpret_cast<__nv_bfloat162*>(&b));
  return *reinterpret_cast<uint32_t*>(&r);
}
__device__ __forceinline__ ScaledTables e2m1_scaled_tables(uint32_t scale) {
  const uint32_t u01 = bmul2(0x3F000000u, scale), u23 = bmul2(0x3FC03F80u, scale);
  const uint32_t u45 = bmul2(0x40404000u, scale), u67 = bmul2(0x40C04080u, scale);
  return {ptx::prmt(u01, u23, 0x6420u), ptx::prmt(u45, u67, 0x6420u), ptx::prmt(u01, u23, 0x7531u),
          ptx::prmt(u45, u67, 0x7531u)};
}

// Word j (0..3) of a thread's weight rows g (w0) and g + 8 (w1) widened into mma's A fragments of K
// elements 8 j .. 8 j + 3 (a0) and 8 j + 4 .. 8 j + 7 (a1) of the thread's 32: MXFP4 through the rows'
// scaled tables, NVFP4 times the rows' bf16x2 scale of that 16-K half (scl[row][j >> 1]).
template <int V>
__device__ __forceinline__ void widen_word(const uint4& w0, const uint4& w1, int j, const ScaledTables (&tab)[2],
                                           const E2M1Tables& tb, const uint32_t (&scl)[2][2], uint32_t (&a0)[4],
                                           uint32_t (&a1)[4]) {
  uint32_t lo[4], hi[4];
  const uint32_t v0 = j == 0 ? w0.x : j == 1 ? w0.y : j == 2 ? w0.z : w0.w;
  const uint32_t v1 = j == 0 ? w1.x : j == 1 ? w1.y : j == 2 ? w1.z : w1.w;
  if constexpr (V == 32) {
    e2m1x8_lookup(v0, tab[0].lo0, tab[0].lo1, tab[0].hi0, tab[0].hi1, lo);
    e2m1x8_lookup(v1, tab[1].lo0, tab[1].lo1, tab[1].hi0, tab[1].hi1, hi);
  } else {
    e2m1x8_to_bf16(v0, tb, lo);
    e2m1x8_to_bf16(v1, tb, hi);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      lo[e] = bmul2(lo[e], scl[0][j >> 1]);
      hi[e] = bmul2(hi[e], scl[1][j >> 1]);
    }
  }
  a0[0] = lo[0], a0[1] = hi[0], a0[2] = lo[1], a0[3] = hi[1];
  a1[0] = lo[2], a1[1] = hi[2], a1[2] = lo[3], a1[3] = hi[3];
}

// A block scale as bf16x2 (both halves): UE8M0 2^(e - 127) (0 -> 2^-127, 255 -> NaN), or UE4M3.
template <int V>
__device__ __forceinline__ uint32_t scale_bf16x2(uint32_t byte) {
  uint32_t h;
  if constexpr (V == 32) {
    h = byte == 0 ? 0x0040u : (byte == 255 ? 0x7FC0u : byte << 7);
  } else {
    const __half_raw hr = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(byte), __NV_E4M3);
    const __nv_bfloat16 b = __float2bfloat16_rn(__half2float(__half(hr)));
    h = *reinterpret_cast<const unsigned short*>(&b);
  }
  return h | (h << 16);
}

template <class OutT>
__device__ __forceinline__ void store_out(void* out, int64_t idx, float v) {
  if constexpr (sizeof(OutT) == 4) static_cast<float*>(out)[idx] = v;
  else if constexpr (std::is_same_v<OutT, __nv_bfloat16>) static_cast<__nv_bfloat16*>(out)[idx] = __float2bfloat16_rn(v);
  else static_cast<__half*>(out)[idx] = __float2half_rn(v);
}

// The KW warps' partial sums of a CTA (acc per lane, mma fragments of 16-row x 8-token tiles) added in warp
// order (bitwise repeatable): `red` holds G x KW x R x MT x 4 x 32 floats, `sync()` is a barrier over the
// G x KW warps; each sum goes to emit(i, r, tok, v): tile i's mma row r (0..15: g or g + 8) and token tok of
// the CTA's 8 MT (kernels/dense_decode.cuh finishes its output the same way). G > 1: G groups of rows, warp
// G ww + gi holding its group's R tiles (the decode kernel's wgmma form: a warp per 16 of 64 rows, G = 4,
// wgmma's D of 16 x 8 MT being acc[0][t][c] with register j = 4 t + c), summed over the KW warps of a group;
// the group's tiles are gi R .. gi R + R - 1. CK > 1: the same over the CK CTAs of a cluster (the decode kernel's K
// split, CTA `split`): a cluster barrier in place of sync() (every thread of the cluster: the producer warps too), CTA
// `split` adds its share of the slots over the CK CTAs (distributed shared memory) and the KW warps, in that order,
// and a second cluster barrier keeps every CTA until its peers have read its sums.
template <int MT, int R, int KW, int G = 1, int CK = 1, class Sync, class Emit>
__device__ __forceinline__ void sum_warps(float* red, const float (&acc)[R][MT][4], Sync sync, Emit emit,
                                          int split = 0) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  constexpr int kSlots = R * MT * 4 * 32, kShare = G * kSlots / CK;
  static_assert(G * kSlots % CK == 0, "whole shares");
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int t = 0; t < MT; ++t)
#pragma unroll
      for (int c = 0; c < 4; ++c) red[warp * kSlots + ((i * MT + t) * 4 + c) * 32 + lane] = acc[i][t][c];
  if constexpr (CK > 1) ptx::cluster_sync();
  else sync();
  const uint32_t red_addr = CK > 1 ? ptx::smem_addr(red) : 0u;
  for (int idx = split * kShare + static_cast<int>(threadIdx.x); idx < (split + 1) * kShare; idx += G * KW * 32) {
    const int gi = G == 1 ? 0 : idx / kSlots, slot = G == 1 ? idx : idx % kSlots;
    const int ln = slot & 31, c = (slot >> 5) & 3, t = (slot >> 7) % MT, i = (slot >> 7) / MT;
    float v = 0.0f;
#pragma unroll
    for (int r = 0; r < CK; ++r)
#pragma unroll
      for (int ww = 0; ww < KW; ++ww) {
        const int at = (G * ww + gi) * kSlots + slot;
        v += CK > 1 ? ptx::lds_cluster_f32(ptx::mapa_shared(red_addr + 4 * at, static_cast<uint32_t>(r))) : red[at];
      }
    emit(gi * R + i, 8 * (c >> 1) + (ln >> 2), 8 * t + 2 * (ln & 3) + (c & 1), v);
  }
  if constexpr (CK > 1) ptx::cluster_sync();
}

// sum_warps, then alpha and the store: mma row r = 8 h + g of 16-row tile i is output row row0 + 16 i + 8 h + g,
// or + sigma(g) = (g >> 1) | ((g & 1) << 2) (kSigma: the TMA-fed kernel's bank-conflict-free row order).
template <class OutT, int MT, int R, int KW, bool kSigma, class Sync>
__device__ __forceinline__ void reduce_store(float* red, const float (&acc)[R][MT][4], Sync sync, int row0, int tok0,
                                             int b, const Params& p) {
  const float alpha = p.alpha ? *p.alpha : 1.0f;
  sum_warps<MT, R, KW>(red, acc, sync, [&](int i, int r, int tk, float v) {
    const int g = r & 7, rg = kSigma ? ((g >> 1) | ((g & 1) << 2)) : g;
    const int row = row0 + 16 * i + (r & 8) + rg, tok = tok0 + tk;
    if (row < p.n && tok < p.m) store_out<OutT>(p.out, (int64_t(b) * p.m + tok) * p.n + row, v * alpha);
  });
}

// Grid (ceil(n / (16 R)), ceil(m / (8 MT)), batch), KW warps. V: 32 (MXFP4) or 16 (NVFP4). K a multiple of
// 32. NB: chunks per pipeline step.
template <class OutT, int MT, int R, int KW, int V, int NB>
__global__ void __launch_bounds__(KW * 32) w4_gemm_kernel(const Params p) {
  __shared__ float red[KW][R][MT][4][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
  const int b = blockIdx.z;
  const int row0 = blockIdx.x * 16 * R, tok0 = blockIdx.y * 8 * MT;
  const __nv_bfloat16* x = p.x + b * p.stride_x + int64_t(tok0) * p.lda;
  const uint8_t* w = p.w + b * (p.stride_w / 2);
  const uint8_t* s = p.s + b * p.stride_s;
  const int sf_cols = p.k / V, m_left = p.m - tok0;
  const E2M1Tables tb = e2m1_tables(lane & (static_cast<uint32_t>(p.m) >> 31));

  float acc[R][MT][4] = {};

  // This thread's weight rows (2 per 16-row tile: g and g + 8), clamped to n - 1 (their sums are not stored).
  int64_t rows[R][2];
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) rows[i][h] = min(row0 + 16 * i + g + 8 * h, p.n - 1);

  // The weight words and scales of one chunk (zeros past K: a thread's 32 K elements are all in or out).
  struct Stage {
    uint4 wv[R][2];
    uint32_t sc[R][2][2];  // [tile][row g / g + 8][first / second 16 K] bf16x2 scales
  };
  auto load = [&](Stage& st, int kc) {
    const int k0 = kc + 32 * q;
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t r = rows[i][h];
        if (k0 < p.k) {
          st.wv[i][h] = ptx::ldg_stream_v4(w + (r * p.ldb + k0) / 2);
          if constexpr (V == 32) {
            st.sc[i][h][0] = st.sc[i][h][1] = __ldg(s + r * sf_cols + k0 / 32);
          } else {
            st.sc[i][h][0] = __ldg(s + r * sf_cols + k0 / 16);
            st.sc[i][h][1] = __ldg(s + r * sf_cols + k0 / 16 + 1);
          }
        } else {
          st.wv[i][h] = make_uint4(0, 0, 0, 0);
          st.sc[i][h][0] = st.sc[i][h][1] = 0;
        }
      }
  };

  // NB chunks per step; the next step's NB chunks are loaded before this step's are widened, so
  // 2 NB weight loads of 16 bytes per row stay in flight per thread.
  constexpr int kStep = KW * kChunk;  // between a warp's consecutive chunks
  Stage cur[NB], nxt[NB];
  const int first = warp * kChunk;
#pragma unroll
  for (int u = 0; u < NB; ++u) load(cur[u], first + u * kStep);
  for (int kc = first; kc < p.k; kc += NB * kStep) {
    if (kc + NB * kStep < p.k) {
#pragma unroll
      for (int u = 0; u < NB; ++u) load(nxt[u], kc + (NB + u) * kStep);
    }
#pragma unroll
    for (int u = 0; u < NB; ++u) {
      const Stage& st = cur[u];
      const int k0 = kc + u * kStep + 32 * q;
      const bool kin = k0 < p.k;
#pragma unroll
      for (int j = 0; j < 4; ++j) {  // weight word j: K elements k0 + 8 j .. + 7 = two mma steps
        uint32_t xb[MT][4];
#pragma unroll
        for (int t = 0; t < MT; ++t) {
          const int tok = 8 * t + g;
          if (kin && tok < m_left) {
            const uint4 xv = __ldg(reinterpret_cast<const uint4*>(x + tok * p.lda + k0 + 8 * j));
            xb[t][0] = xv.x; xb[t][1] = xv.y; xb[t][2] = xv.z; xb[t][3] = xv.w;
          } else {
            xb[t][0] = xb[t][1] = xb[t][2] = xb[t][3] = 0;
          }
        }
#pragma unroll
        for (int i = 0; i < R; ++i) {
          uint32_t lo[4], hi[4];  // rows g and g + 8: bf16x2 of elements (0,1) (2,3) (4,5) (6,7)
          const uint4 w0 = st.wv[i][0], w1 = st.wv[i][1];
          e2m1x8_to_bf16(j == 0 ? w0.x : j == 1 ? w0.y : j == 2 ? w0.z : w0.w, tb, lo);
          e2m1x8_to_bf16(j == 0 ? w1.x : j == 1 ? w1.y : j == 2 ? w1.z : w1.w, tb, hi);
          const uint32_t sl = scale_bf16x2<V>(st.sc[i][0][j >> 1]), sh = scale_bf16x2<V>(st.sc[i][1][j >> 1]);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            lo[e] = bmul2(lo[e], sl);
            hi[e] = bmul2(hi[e], sh);
          }
          const uint32_t a0[4] = {lo[0], hi[0], lo[1], hi[1]};  // mma step 1: elements 0..3
          const uint32_t a1[4] = {lo[2], hi[2], lo[3], hi[3]};  // mma step 2: elements 4..7
#pragma unroll
          for (int t = 0; t < MT; ++t) {
            ptx::mma_m16n8k16_bf16(acc[i][t], a0, xb[t][0], xb[t][1]);
            ptx::mma_m16n8k16_bf16(acc[i][t], a1, xb[t][2], xb[t][3]);
          }
        }
      }
    }
#pragma unroll
    for (int u = 0; u < NB; ++u) cur[u] = nxt[u];
  }

  reduce_store<OutT, MT, R, KW, false>(&red[0][0][0][0][0], acc, [] { __syncthreads(); }, row0, tok0, b, p);
}

}  // namespace jax_tmem::w4
