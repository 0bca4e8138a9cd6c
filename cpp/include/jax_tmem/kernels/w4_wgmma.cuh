// jax_tmem: the weight-only 4-bit GEMM for 17-64 tokens on sm_90a (issue 14): the weights widened into
// wgmma's register A operand, the activations wgmma's B operand straight from the TMA ring.
//
// Why: at M = 64 a weight byte carries 256 FLOPs, where mma.sync has a fraction of wgmma's rate. Each
// consumer warpgroup widens its 64 rows into registers and issues wgmma.m64n{8 MT}k16 with A from
// registers (RS form), B (8 MT tokens x 16 K) by descriptor from the 128B-swizzled activation boxes.
//
// A's register fragment (per warp: rows g, g + 8; K labels 2q, 2q + 1, 2q + 8, 2q + 9 of each 16-wide
// step) takes, from each 64-byte chunk of a row, the bytes with index = q (mod 4): each thread of a quad
// loads the whole chunk (four 16-byte loads the quad shares: one wavefront each) and gathers its bytes
// with 3 byte permutes per word. Its word m then holds bytes 4 m .. 4 m + 3 (pairs of K elements 8 f +
// 2 q, + 1 for f = 4 m + b), so step s = 2 m + (b >> 1) reads widened pair b = 2 (s & 1) as K labels
// 2q, 2q + 1 and b + 1 as 2q + 8, 2q + 9: the K order is the natural one and B needs no permutation.
// MXFP4's block (32 K) is word m's, NVFP4's two blocks its bytes 0-1 and 2-3.
//
// Pipeline: chunk c's 8 wgmmas (one commit group) run while chunk c + 1 is widened into the other of two
// register sets; every group of a stage completes before the stage is released (a register set kept
// live across the loop's back edge made ptxas serialize every wgmma, warning C7513), so the other
// warpgroup covers that bubble. The producer, the clusters that split K and the epilogue are
// w4_wide.cuh's.
//
// Measured (H200, 2026-11-25, 8192^2 MXFP4, M = 64): 31.6 us against 33.5 for the mma.sync kernel and 71
// for the plain-load one; Nsight Compute: ALU pipe 47 %, issue slots 40 %, 2.2 warps per scheduler with
// 0.6 eligible: the widening (~12 instructions per 8 weights, plus the gather and the scales), not the
// tensor pipe, sets the pace.
#pragma once

#include "jax_tmem/kernels/w4_wide.cuh"
#include "jax_tmem/desc_sm90.h"
#include "jax_tmem/ptx/wgmma.cuh"

namespace jax_tmem::w4 {

// Byte q of each of v's four words, in word order (the quad's gather above).
__device__ __forceinline__ uint32_t gather_bytes(const uint4& v, uint32_t sel) {
  return ptx::prmt(ptx::prmt(v.x, v.y, sel), ptx::prmt(v.z, v.w, sel), 0x5410u);
}

// Grid and maps as w4_wide_kernel with 128-row CTAs (WidePlan<1, 8, 1, ...>); 2 consumer warpgroups (rows
// 64 wg + 16 w + g, + 8) and a producer warp.
template <class OutT, int MT, int V, int ST, int CS>
__global__ void __launch_bounds__(9 * 32) w4_wgmma_kernel(const __grid_constant__ CUtensorMap wmap,
                                                          const __grid_constant__ CUtensorMap smap,
                                                          const __grid_constant__ CUtensorMap xmap, const Params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using P = WidePlan<1, 8, 1, V, ST, MT>;
  constexpr int N = 8 * MT, kAcc = N / 2;
  extern __shared__ uint8_t smem_raw[];
  const WideCta<P, ST, CS> cta(smem_raw, 8, MT, p);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float acc[kAcc];
#pragma unroll
  for (int j = 0; j < kAcc; ++j) acc[j] = 0.0f;

  if (warp == 8) {  // the producer (w4_wide.cuh)
    if (lane == 0) wide_produce<P, V, ST>(cta, &wmap, &smap, &xmap);
    if constexpr (CS == 1) return;
    __syncwarp();
  } else {
    const int g = lane >> 2, q = lane & 3;
    const uint32_t sbase = ptx::smem_addr(cta.smem);
    const uint32_t sel = q | ((q + 4) << 4);  // prmt: byte q of the first word, byte q of the second
    const int row = 16 * warp + g;            // CTA row of h = 0 (warp 4 wg + w: 64 wg + 16 w + g)
    const uint32_t w_off = row * 128, s_off = P::kWBytes + row * P::kSB;
    const E2M1Tables tb = e2m1_tables(lane & (static_cast<uint32_t>(p.m) >> 31));
    const uint64_t desc_x = desc::sm90_smem_desc(sbase + P::kXOffset, 16, 1024, desc::Sm90Swizzle::k128B);
    for (int kt = cta.kt0; kt < cta.kt1; ++kt) {
      const int s = (kt - cta.kt0) % ST;
      ptx::mbarrier_wait(&cta.full[s], ((kt - cta.kt0) / ST) & 1);
      const uint32_t st = sbase + s * P::kStageBytes;
      uint32_t a[2][8][4];  // two register sets of a chunk's 8 k-steps
#pragma unroll
      for (int c = 0; c < P::kChunks; ++c) {
        uint32_t(&ac)[8][4] = a[c & 1];
        if (c >= 2) {
          ptx::wgmma_wait<1>();  // the group that read this set (chunk c - 2) has completed
#pragma unroll
          for (int sk = 0; sk < 8; ++sk) ptx::keep_operands_u32(ac[sk]);
        }
        uint32_t sc[2][2];  // scale bytes of the chunk: MXFP4 [h][0] (4 blocks), NVFP4 [h][0..1] (8)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint32_t sa = st + s_off + 8 * h * P::kSB + (V == 32 ? 4 : 8) * c + P::scale_byte(kt);
          sc[h][0] = ptx::lds_u32(sa);
          sc[h][1] = V == 32 ? 0u : ptx::lds_u32(sa + 4);
        }
#pragma unroll
        for (int m = 0; m < 4; ++m) {  // word m: K steps 2 m, 2 m + 1
          uint32_t wd[2][4];           // [h] widened pairs b = 0..3
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const uint4 v = ptx::lds_v4(st + (c >> 1) * P::kWBoxBytes + w_off + 8 * h * 128 + (((4 * (c & 1) + m) ^ g) << 4));
            e2m1x8_to_bf16(gather_bytes(v, sel), tb, wd[h]);
            const uint32_t s0 = V == 32 ? (sc[h][0] >> (8 * m)) & 0xFF : (sc[h][m >> 1] >> (16 * (m & 1))) & 0xFF;
            const uint32_t s1 = V == 32 ? s0 : (sc[h][m >> 1] >> (16 * (m & 1) + 8)) & 0xFF;
            const uint32_t f0 = scale_bf16x2<V>(s0), f1 = V == 32 ? f0 : scale_bf16x2<V>(s1);
            wd[h][0] = bmul2(wd[h][0], f0), wd[h][1] = bmul2(wd[h][1], f0);
            wd[h][2] = bmul2(wd[h][2], f1), wd[h][3] = bmul2(wd[h][3], f1);
          }
#pragma unroll
          for (int u = 0; u < 2; ++u) {
            ac[2 * m + u][0] = wd[0][2 * u], ac[2 * m + u][1] = wd[1][2 * u];
            ac[2 * m + u][2] = wd[0][2 * u + 1], ac[2 * m + u][3] = wd[1][2 * u + 1];
          }
        }
        ptx::wgmma_fence();
#pragma unroll
        for (int sk = 0; sk < 8; ++sk)  // box 2 c + sk / 4, 32 bytes per k-step inside its 128-byte rows
          ptx::wgmma_rs_bf16<N>(acc, ac[sk],
                                desc::sm90_desc_advance(desc_x, s * P::kStageBytes + (2 * c + sk / 4) * P::kXBoxBytes + 32 * (sk % 4)),
                                1u);
        ptx::wgmma_commit();
      }
      // The stage's wgmmas complete before it is released (no A register set lives across stages, so
      // the loop carries no register copies that ptxas would see redefining a running wgmma's inputs).
      ptx::wgmma_wait<0>();
      ptx::fence_operands(acc);
      ptx::fence_proxy_async_shared();
      ptx::mbarrier_arrive(&cta.empty[s]);
    }
  }

  float* red = reinterpret_cast<float*>(cta.smem);
  if (warp < 8) {
    ptx::named_barrier_sync(1, 8 * 32);  // every consumer is done with the ring
#pragma unroll
    for (int j = 0; j < kAcc; ++j) red[warp * P::kSlots + j * 32 + lane] = acc[j];
  }
  // wgmma's D: warp w, lane (g, q), register j: row 16 w + g + 8 ((j >> 1) & 1), token 8 (j >> 2) + 2 q + (j & 1)
  wide_reduce_store<OutT, CS, 1, 8 * P::kSlots>(red, cta.split, (CS > 1 ? 9 : 8) * 32, cta.row0, cta.tok0, cta.b, p, [](int e, int& r, int& t) {
    const int w = e / P::kSlots, j = (e % P::kSlots) >> 5, ln = e & 31;
    r = 16 * w + (ln >> 2) + 8 * ((j >> 1) & 1);
    t = 8 * (j >> 2) + 2 * (ln & 3) + (j & 1);
  });
#endif
}

}  // namespace jax_tmem::w4
