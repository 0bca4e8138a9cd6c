// jax_tmem: the weight-only 4-bit GEMM for decode, fed by TMA (issue 14; kernels/w4_gemm.cuh has the
// math, the operand layouts and the plain-load version this one replaces up to 16 tokens where TMA can
// map the scales).
//
// Why: the plain-load kernel kept each thread's next weight words in registers, so the bytes in flight
// per SM were bounded by the register file (Nsight Compute, H200 2026-11-24: 8192^2 MXFP4 at M = 1
// stalled on L1TEX 40 % of the time, 1.66 TB/s, issue slots 54 % busy). Here one producer warp streams
// the packed weights, their block scales and the activations by TMA into a ring of ST shared-memory
// stages (16 R rows x KW x 128 K elements each), so the loads in flight are as deep as the ring; KW
// consumer warps widen and multiply them as the plain kernel does (warp w takes the stage's w-th
// 128-element chunk of every row), reading each thread's 16 weight bytes with one conflict-free
// ld.shared. MXFP4 folds each block's scale into that row's lookup tables (e2m1_scaled_tables).
//
// Bank conflicts: a warp's quarter (8 lanes, one 16-byte load each) reads rows g, g + 1 of mma's
// fragment, chunks q = 0..3. In a 128B-swizzled box, chunk c of row r sits at c ^ (r & 7), so mma row g
// is mapped to box row sigma(g) = (g >> 1) | ((g & 1) << 2): the two rows of a quarter differ in swizzle
// bit 2 and their four chunks each land in disjoint halves of the 128 bytes. The output rows follow sigma.
//
// Slot reuse: the consumers read a stage with ld.shared (generic proxy) and the producer's next TMA
// writes it (async proxy): each consumer thread fences (fence.proxy.async) and arrives on the slot's
// empty barrier. Without the fence, results moved from run to run once the ring wrapped (H200,
// 2026-11-24: up to 21 of 30 runs wrong at K = 16384; 0 of 540 with it).
#pragma once

#include <cuda.h>

#include "jax_tmem/kernels/w4_gemm.cuh"
#include "jax_tmem/ptx/mbarrier.cuh"
#include "jax_tmem/ptx/tma.cuh"

namespace jax_tmem::w4 {

// The shared-memory plan of one configuration: ST stages of {KW / 2 weight boxes of 16 R rows x 128
// bytes, 16 R rows x SB scale bytes, KW / 2 activation boxes of 8 MT tokens x 256 bf16}, then 2 ST
// mbarriers; the consumers' partial sums reuse the ring.
template <int R, int KW, int V, int ST, int MT>
struct TmaPlan {
  static constexpr int kRows = 16 * R;
  static constexpr int kBoxBytes = kRows * 128;           // 256 K elements of 16 R rows
  static constexpr int kWBytes = KW / 2 * kBoxBytes;
  static constexpr int kSB = KW * kChunk / V;             // scale bytes per row and stage
  static constexpr int kXOffset = (kWBytes + kRows * kSB + 127) / 128 * 128;
  static constexpr int kXBoxBytes = 8 * MT * 512;         // 8 MT tokens x 256 bf16 (rows past M: zeros)
  static constexpr int kXBytes = KW / 2 * kXBoxBytes;
  static constexpr int kStageBytes = (kXOffset + kXBytes + 1023) / 1024 * 1024;
  static constexpr int kTxBytes = kWBytes + kRows * kSB + kXBytes;  // what TMA writes per stage
  static constexpr int kRingBytes = ST * kStageBytes;
  static constexpr int kRedBytes = KW * R * MT * 4 * 32 * 4;
  static constexpr int kBarOffset = kRingBytes > kRedBytes ? kRingBytes : kRedBytes;
  static constexpr int kSmemBytes = kBarOffset + 2 * ST * 8 + 1024;  // + alignment slack
  static_assert(KW % 2 == 0 && KW <= 16, "consumer warps come in pairs (one 128-byte box per pair)");
  static_assert(kSmemBytes <= 232448, "more shared memory than an sm_90 CTA may have (227 KB)");
};

// Grid (ceil(n / 16 R), ceil(m / 8 MT), batch), KW + 1 warps. wmap: the packed weights as bytes {K / 2,
// N, batch}, boxes {128, 16 R} (128B swizzle); smap: the scales {K / V, N, batch}, boxes {SB, 16 R};
// xmap: the activations {K, M, batch}, boxes {256, 8 MT} (TMA zero-fills past K and M, so no thread
// tests a bound; the plain-load version's per-thread prefetch of x stalled on L1TEX, Nsight Compute).
template <class OutT, int MT, int R, int KW, int V, int ST>
__global__ void __launch_bounds__((KW + 1) * 32) w4_tma_kernel(const __grid_constant__ CUtensorMap wmap,
                                                               const __grid_constant__ CUtensorMap smap,
                                                               const __grid_constant__ CUtensorMap xmap, const Params p) {
  using P = TmaPlan<R, KW, V, ST, MT>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + P::kBarOffset);
  uint64_t* empty = full + ST;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int b = blockIdx.z, row0 = blockIdx.x * P::kRows, tok0 = blockIdx.y * 8 * MT;
  const int bw = p.stride_w != 0 ? b : 0, bx_ = p.stride_x != 0 ? b : 0;  // batch coordinates (0: broadcast)
  constexpr int kStageK = KW * kChunk;
  const int nk = (p.k + kStageK - 1) / kStageK;
  ptx::init_ring(full, empty, ST, KW * 32);

  if (warp == KW) {  // the producer
    if (lane == 0) {
      ptx::prefetch_tensormap(&wmap);
      ptx::prefetch_tensormap(&smap);
      ptx::prefetch_tensormap(&xmap);
      for (int kt = 0; kt < nk; ++kt) {
        const int s = kt % ST;
        ptx::mbarrier_wait(&empty[s], ((kt / ST) & 1) ^ 1);
        ptx::mbarrier_arrive_expect_tx(&full[s], P::kTxBytes);
        uint8_t* st = smem + s * P::kStageBytes;
#pragma unroll
        for (int bx = 0; bx < KW / 2; ++bx)
          ptx::tma_load_3d(st + bx * P::kBoxBytes, &wmap, &full[s], (kt * kStageK + bx * 256) / 2, row0, bw);
        ptx::tma_load_3d(st + P::kWBytes, &smap, &full[s], kt * kStageK / V, row0, bw);
#pragma unroll
        for (int bx = 0; bx < KW / 2; ++bx)
          ptx::tma_load_3d(st + P::kXOffset + bx * P::kXBoxBytes, &xmap, &full[s], kt * kStageK + bx * 256, tok0, bx_);
      }
    }
    return;
  }

  // The consumers. Thread (g, q) of warp w: box rows 16 i + 8 h + sigma(g), the w-th 64 bytes of each.
  const int g = lane >> 2, q = lane & 3, sg = (g >> 1) | ((g & 1) << 2);
  const uint32_t sbase = ptx::smem_addr(smem);
  const uint32_t w_off = (warp >> 1) * P::kBoxBytes + sg * 128 + (((4 * (warp & 1) + q) ^ sg) << 4);
  const uint32_t s_off = P::kWBytes + sg * P::kSB + (V == 32 ? 4 * warp + q : 8 * warp + 2 * q);
  // This thread's activations: token 8 t + g, the 32 K elements of its weight words (16 bytes per word j).
  const uint32_t x_off = P::kXOffset + (warp >> 1) * P::kXBoxBytes + g * 512 + (warp & 1) * 256 + 64 * q;
  const E2M1Tables tb = e2m1_tables(lane & (static_cast<uint32_t>(p.m) >> 31));

  float acc[R][MT][4] = {};

  for (int kt = 0; kt < nk; ++kt) {
    const int s = kt % ST;
    ptx::mbarrier_wait(&full[s], (kt / ST) & 1);
    const uint32_t st = sbase + s * P::kStageBytes;
    uint4 wv[R][2];
    uint32_t sc[R][2];  // [tile][row g / g + 8]: the scale byte (MXFP4) or two (NVFP4: first, second 16 K)
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        wv[i][h] = ptx::lds_v4(st + w_off + (16 * i + 8 * h) * 128);
        const uint32_t sa = st + s_off + (16 * i + 8 * h) * P::kSB;
        sc[i][h] = V == 32 ? ptx::lds_u8(sa) : ptx::lds_u16(sa);
      }
    uint4 xa[4][MT];
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int t = 0; t < MT; ++t) xa[j][t] = ptx::lds_v4(st + x_off + t * 8 * 512 + 16 * j);
    // Every consumer thread releases the slot after its own loads, ordered before the producer's next
    // TMA write into it (an async-proxy write after generic-proxy reads: fence.proxy.async).
    ptx::fence_proxy_async_shared();
    ptx::mbarrier_arrive(&empty[s]);
    // MXFP4: the thread's 32 K elements of a row are one block, so the scale goes into that row's
    // tables (w4_gemm.cuh: e2m1_scaled_tables); NVFP4 (two blocks of 16, two words each) multiplies.
    uint32_t scl[R][2][2];  // bf16x2 scales [tile][row][first / second 16 K]
    ScaledTables tab[R][2];
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        scl[i][h][0] = scale_bf16x2<V>(sc[i][h] & 0xFF);
        scl[i][h][1] = V == 32 ? scl[i][h][0] : scale_bf16x2<V>(sc[i][h] >> 8);
        if constexpr (V == 32) tab[i][h] = e2m1_scaled_tables(scl[i][h][0]);
      }
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // weight word j: K elements 8 j .. 8 j + 7 of the thread's 32 = two mma steps
#pragma unroll
      for (int i = 0; i < R; ++i) {
        uint32_t a0[4], a1[4];
        widen_word<V>(wv[i][0], wv[i][1], j, tab[i], tb, scl[i], a0, a1);
#pragma unroll
        for (int t = 0; t < MT; ++t) {
          ptx::mma_m16n8k16_bf16(acc[i][t], a0, xa[j][t].x, xa[j][t].y);
          ptx::mma_m16n8k16_bf16(acc[i][t], a1, xa[j][t].z, xa[j][t].w);
        }
      }
    }
  }

  // Every stage is consumed (each full barrier was waited on), so the ring is free for the partial sums.
  // (named barrier 1 over the KW consumer warps: the producer warp has returned)
  const auto consumers_sync = [] { ptx::named_barrier_sync(1, KW * 32); };
  consumers_sync();
  reduce_store<OutT, MT, R, KW, true>(reinterpret_cast<float*>(smem), acc, consumers_sync, row0, tok0, b, p);
}

}  // namespace jax_tmem::w4
