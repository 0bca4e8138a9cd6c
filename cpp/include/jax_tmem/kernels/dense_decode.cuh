// jax_tmem: the decode GEMM for few tokens (issue 15; sm_90a menu entries 25-34 and 51-54): out[b, m, n] =
// epilogue(sum_k x[b, m, k] * w[b, n, k]), x and w bfloat16 (or both float16, or fp8: e4m3 / e5m2 in any
// mix, or a 16-bit x with an fp8 w: kMix below), x K-major, w stored (N, K) or (K, N) (kWMN), M <= 8 MT tokens
// per CTA row (more: more CTA rows, each re-reading the weight).
//
// Why a kernel of its own: the wgmma swap-AB entries (kernels/sm90_gemm.cuh) hold 64 weight rows per CTA at
// least (wgmma's M), so a 4096-row weight makes 64 CTAs on 132 SMs, and more need K splits whose partial
// sums a second kernel adds. XLA's Triton GEMM for the same decode problem runs 224-256 CTAs of 4 warps,
// two or more per SM, and streams the weight at 3.5-4.2 TB/s against our 3.0-3.8 (Nsight Compute and a
// CUDA-graph trace of bench_decode.py's 8B step, H200 2026-11-26). Here a CTA holds 16 R rows: mma.sync
// (m16n8k16) takes 16-row tiles, the CTA's KW consumer warps take the K range in turn (warp w the w-th
// 64-element chunk of every stage) and add their partial sums in shared memory at the end, in warp order
// (bitwise repeatable; no workspace, no second launch; with KS > 1, KS warps share a chunk, each taking its
// share of the chunk's mma steps: the kWMN form). One producer warp streams the weight, 16 R rows x
// 128 bytes per warp and stage, and the activations, 8 MT tokens x 128 bytes, by TMA (128B swizzle; zero
// fill past N, M and K) into a ring of ST stages. 128 bytes are 64 16-bit or 128 8-bit K elements: one warp
// chunk is 4 mma steps either way (m16n8k16, or m16n8k32 for fp8). The epilogue is the other kernels' (epilogue.cuh: alpha,
// bias, activation, c, any output dtype), run on each output element once the warps' sums are added.
//
// kWG (entries 32-34, 9-64 tokens of an fp8 (K, N) weight): the same ring and A fragments, but a warpgroup
// per chunk, a warp per 16 of the CTA's 64 rows, and wgmma (A from registers, B the activation box by
// descriptor) in place of mma.sync: mma.sync's rate is a fraction of wgmma's once the tokens are many.
//
// kMix (16-bit activations x an fp8 weight, e.g. bf16 tokens x e4m3 weights: the weight read in place at 1 byte
// per element and widened on chip, exactly, to the activations' type; mma m16n8k16 or wgmma k16 of that type):
// a weight chunk is still 128 bytes of K (128 elements), its activations two 128-byte boxes (64 elements each).
// (N, K) weights: thread (g, q) widens its 32 weight bytes per row (elements 32 q .. 32 q + 31 of the chunk) and
// reads the same 32 elements (64 bytes) of its token: 8 mma steps, K order permuted alike for both operands.
// (K, N) weights: ldmatrix.trans of natural k-rows (matrix mt: k-rows 8 mt .. 8 mt + 7 of a 32-K block) gives
// thread (g, q) k 2 q, 2 q + 1 of weights 2 g, 2 g + 1; widened, bytes 0 / 2 and 1 / 3 are mma's a0 (row g ->
// weight 2 g) and a1 (row g + 8 -> weight 2 g + 1): mma's own K order, so the activations are the 16-bit
// kernel's (ldmatrix, or wgmma's B by descriptor).
//
// Operand registers: thread (g, q) of a warp reads 32 contiguous bytes (bytes 32 q .. 32 q + 31 of the
// warp's chunk) of weight rows g and g + 8 of each 16-row tile and of token g of each 8-token tile, two
// 16-byte loads each (conflict-free: chunk c of row r sits at c ^ (r & 7)). The K order inside an mma step
// is permuted the same way for both operands (a sum does not care): step j takes the thread's 32-bit words
// 2 j and 2 j + 1 as mma's first (a0 / a1, b0: k = 2 q, 2 q + 1, or fp8 4 q .. 4 q + 3) and second (a2 / a3,
// b1: k + 8, or fp8 k + 16) K halves.
#pragma once

#include <cuda.h>

#include "jax_tmem/desc_sm90.h"
#include "jax_tmem/epilogue.cuh"
#include "jax_tmem/fp8_convert.cuh"
#include "jax_tmem/kernels/w4_gemm.cuh"
#include "jax_tmem/pipeline.cuh"
#include "jax_tmem/ptx/cluster.cuh"
#include "jax_tmem/ptx/mbarrier.cuh"
#include "jax_tmem/ptx/tma.cuh"
#include "jax_tmem/ptx/wgmma.cuh"

namespace jax_tmem::dd {

struct Params {
  int m, n, k;
  int w_batched, x_batched;  // the batch coordinate of each map (0: one operand for every batch entry)
  int x_rows;                // tokens per activation box: min(M, 8 MT)
  epilogue::Args e;          // the output and its epilogue, as every other kernel's
};

// One mma.sync step, f32 accumulators in place: A (the weight, type kW) 16 x K, B (the activations, kX)
// K x 8; m16n8k16 for bf16 / f16, m16n8k32 for fp8 (e4m3 / e5m2, any mix; sm_89+: on sm_90a ptxas emits
// F2FP.F16.E4M3.UNPACK_B conversions and f16 HMMA.16816, exact, as Hopper's tensor cores take fp8 only in
// wgmma; cuobjdump -sass, 2026-11-26).
template <DType kW, DType kX>
__device__ __forceinline__ void mma_step(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  using D = DType;
  if constexpr (kW == D::kBF16 && kX == D::kBF16) ptx::mma_m16n8k16_bf16(d, a, b0, b1);
  else if constexpr (kW == D::kF16 && kX == D::kF16) ptx::mma_m16n8k16_f16(d, a, b0, b1);
  else if constexpr ((kW == D::kE4M3 || kW == D::kE5M2) && (kX == D::kE4M3 || kX == D::kE5M2))
    ptx::mma_m16n8k32_fp8<kW == D::kE5M2, kX == D::kE5M2>(d, a, b0, b1);
  else static_assert(kW == D::kInvalid, "bf16 x bf16, f16 x f16 or fp8 x fp8");
}

// One wgmma K step of the warpgroup (kWG): D (64 weight rows x N tokens) += A (registers: each warp's 16 rows
// in mma.sync's A layout) x B (the activations' K-major box, by descriptor).
template <DType kW, DType kX, int N>
__device__ __forceinline__ void wg_step(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t db) {
  using D = DType;
  if constexpr (kW == D::kBF16 && kX == D::kBF16) ptx::wgmma_rs_bf16<N>(d, a, db, 1u);
  else if constexpr (kW == D::kF16 && kX == D::kF16) ptx::wgmma_rs_f16<N>(d, a, db, 1u);
  else if constexpr (kW == D::kE4M3 && kX == D::kE4M3) ptx::wgmma_rs_e4m3_e4m3<N>(d, a, db, 1u);
  else if constexpr (kW == D::kE4M3 && kX == D::kE5M2) ptx::wgmma_rs_e4m3_e5m2<N>(d, a, db, 1u);
  else if constexpr (kW == D::kE5M2 && kX == D::kE4M3) ptx::wgmma_rs_e5m2_e4m3<N>(d, a, db, 1u);
  else if constexpr (kW == D::kE5M2 && kX == D::kE5M2) ptx::wgmma_rs_e5m2_e5m2<N>(d, a, db, 1u);
  else static_assert(kW == D::kInvalid, "bf16 x bf16, f16 x f16 or fp8 x fp8");
}

// The shared-memory plan: ST stages of {KW weight boxes of 16 R rows x 128 bytes, KW x XR activation boxes
// of 8 MT tokens x 128 bytes (XR = 2 for kMix)}, then 2 ST mbarriers; the consumers' partial sums reuse the ring.
template <int R, int KW, int ST, int MT, int KS = 1, bool kWG = false, int XR = 1>
struct Plan {
  static constexpr int kRows = 16 * R;
  static constexpr int kWBox = kRows * 128;
  static constexpr int kXBox = 8 * MT * 128;
  static constexpr int kXChunk = XR * kXBox;  // a chunk's activation boxes
  static constexpr int kStageBytes = KW * (kWBox + kXChunk);
  static constexpr int kRingBytes = ST * kStageBytes;
  static constexpr int kRedBytes = KW * KS * (kWG ? 1 : R) * MT * 4 * 32 * 4;  // every warp's sums
  static constexpr int kBarOffset = kRingBytes > kRedBytes ? kRingBytes : kRedBytes;
  static constexpr int kSmemBytes = kBarOffset + 2 * ST * 8 + 1024;  // + alignment slack
  static_assert(kWBox % 1024 == 0 && kXBox % 1024 == 0, "128B-swizzled boxes start 1024-byte aligned");
  static_assert(kSmemBytes <= 232448, "more shared memory than an sm_90 CTA may have (227 KB)");
};

// Grid (ceil(n / 16 R), ceil(m / 8 MT), batch), KW + 1 warps. wmap: w {K, N, batch}, boxes {128 bytes of K,
// 16 R}; xmap: x {K, M, batch}, boxes {128 bytes of K, x_rows} with x_rows = min(M, 8 MT) (the tokens past it
// are not loaded: at M = 1 a full 8-token box would stage half as many bytes again as the weight; their
// mma columns hold zeros, or in the kWMN loop stale bytes, and are never stored); 128B swizzle.
// kWMN: w stored (K, N) (Flax's layout), wmap {N, K, batch} in boxes {16 R, 128 bytes of K (64 16-bit or 128
// 8-bit k-rows)} swizzled by their 16 R-element rows (32, 64 or 128 bytes): ldmatrix.trans turns each block
// into mma's A fragment (8-bit: with two byte permutes per register pair), the K order then mma's own, and
// the activations' fragments come by ldmatrix too.
// CK > 1 (kWG or kWMN: entries 51-54): clusters of CK CTAs along x (grid x = row tiles x CK), CTA `split` of a cluster
// takes stages [nk split / CK, nk (split + 1) / CK) of the K range; their warpgroups' sums meet through distributed
// shared memory (w4::sum_warps' CK): the weight's 64-row tiles on CK times as many SMs, no workspace, no second launch.
template <DType kW, DType kX, int MT, int R, int KW, int ST, bool kWMN = false, int KS = 1, bool kWG = false,
          int CK = 1>
__global__ void __launch_bounds__((KW * KS + 1) * 32) dense_decode_kernel(const __grid_constant__ CUtensorMap wmap,
                                                                          const __grid_constant__ CUtensorMap xmap,
                                                                          const Params p) {
  constexpr bool kMix = dtype_bytes(kW) == 1 && dtype_bytes(kX) == 2;  // 16-bit x an fp8 weight, widened
  constexpr int kXR = kMix ? 2 : 1;                                     // activation boxes per chunk
  static_assert(dtype_bytes(kW) == dtype_bytes(kX) || kMix, "operands of one width, or 16-bit x an fp8 weight");
  static_assert(KS == 1 || ((kWMN || kWG) && (KS == 2 || KS == 4)), "(K, N) weights: 1, 2 or 4 warps per chunk");
  static_assert(!kWG || (KS == 4 && R == 4), "kWG: a warpgroup per chunk, a warp per 16 of its 64 rows");
  static_assert(!kMix || !kWG || kWMN, "kMix's wgmma form reads a (K, N) weight (natural K order)");
  static_assert(CK == 1 || ((kWG || kWMN) && (CK == 2 || CK == 4)), "K split over clusters of 2 or 4 CTAs: the wgmma "
                "form or a (K, N) weight");
  constexpr int kCW = KW * KS;  // consumer warps
  constexpr bool kFp8 = dtype_bytes(kW) == 1;
  constexpr int kChunkK = 128 / dtype_bytes(kW), kStageK = KW * kChunkK;  // K elements per warp chunk, stage
  const int x_rows = p.x_rows;
  using P = Plan<R, KW, ST, MT, KS, kWG, kXR>;
  uint8_t* smem = aligned_dynamic_smem();
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + P::kBarOffset);
  uint64_t* empty = full + ST;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int split = CK > 1 ? static_cast<int>(blockIdx.x % CK) : 0;  // == %cluster_ctarank
  const int b = blockIdx.z, row0 = static_cast<int>(blockIdx.x / CK) * P::kRows, tok0 = blockIdx.y * 8 * MT;
  const int nk_all = (p.k + kStageK - 1) / kStageK, kt0 = nk_all * split / CK;
  const int nk = nk_all * (split + 1) / CK - kt0;  // this CTA's stages
  ptx::init_ring(full, empty, ST, kCW * 32);

  if (warp == kCW) {  // the producer
    if (lane == 0) {
      ptx::prefetch_tensormap(&wmap);
      ptx::prefetch_tensormap(&xmap);
      const int bw = p.w_batched ? b : 0, bx = p.x_batched ? b : 0;
      for (int kt = 0; kt < nk; ++kt) {
        const int s = kt % ST;
        ptx::mbarrier_wait(&empty[s], ((kt / ST) & 1) ^ 1);
        ptx::mbarrier_arrive_expect_tx(&full[s], KW * (P::kWBox + kXR * x_rows * 128));
        uint8_t* st = smem + s * P::kStageBytes;
#pragma unroll
        for (int w = 0; w < KW; ++w) {
          const int k0 = (kt0 + kt) * kStageK + kChunkK * w;
          if constexpr (kWMN) ptx::tma_load_3d(st + w * P::kWBox, &wmap, &full[s], row0, k0, bw);
          else ptx::tma_load_3d(st + w * P::kWBox, &wmap, &full[s], k0, row0, bw);
#pragma unroll
          for (int r = 0; r < kXR; ++r)  // (kMix: 64 16-bit elements a box)
            ptx::tma_load_3d(st + KW * P::kWBox + w * P::kXChunk + r * P::kXBox, &xmap, &full[s], k0 + 64 * r, tok0,
                             bx);
        }
      }
    }
    if constexpr (CK > 1) {  // the producer warp's part in w4::sum_warps' two cluster barriers
      __syncwarp();
      ptx::cluster_sync();
      ptx::cluster_sync();
    }
    return;
  }

  const int g = lane >> 2, q = lane & 3;
  const uint32_t sbase = ptx::smem_addr(smem);
  // Byte offsets in a stage of this thread's two 16-byte chunks of box row r (r & 7 == g & 7 == g).
  const uint32_t c0 = ((2 * q) ^ g) << 4, c1 = ((2 * q + 1) ^ g) << 4;
  const uint32_t w_off = warp * P::kWBox + g * 128, x_off = KW * P::kWBox + warp * P::kXChunk + g * 128;

  float acc[R][MT][4] = {};

  // Lane l addresses row l & 7 of matrix l >> 3 of each ldmatrix.x4 (rows: k-rows of the box, RB bytes
  // of weight rows each, swizzled by RB). 16-bit: weight block (i, j) (16 rows from 16 i, k from 16 j):
  // matrix mt = n rows 8 (mt & 1) .., k 8 (mt >> 1) .. (a0 .. a3 of mma's A). 8-bit (a 16-bit matrix holds
  // 16 bytes of 8 k-rows): block (i, j) = 16 rows from 16 i, k from 32 j; matrix mt = k-rows
  // kSet[mt & 1][0..7] + 16 (mt >> 1) of that 16-byte piece, so thread (g, q) gets (k, n) bytes
  // (s0, 2 g), (s0, 2 g + 1), (s1, 2 g), (s1, 2 g + 1) with s0, s1 = kSet[mt & 1][2 q, 2 q + 1]; two
  // byte permutes of matrices 0 / 1 (2 / 3) give a0 / a1 (a2 / a3): k 4 q .. 4 q + 3 (+ 16) of n = 2 g
  // (mma row g) and n = 2 g + 1 (mma row g + 8): the rows of a tile are interleaved (the epilogue maps
  // them back), the K order is mma's own, so the activations' fragments are the 16-bit kernel's.
  // kSet: each thread's two k-rows of a matrix lie in its k group 4 q .. 4 q + 3, and the 8 rows of a
  // matrix sit in 8 different 16-byte bank groups for 32, 64 and 128-byte swizzled rows (conflict-free).
  // (N, K) weights (kWG only: the mma.sync loop below has its own loads): matrix mt = rows 8 (mt & 1) + r8 of
  // the block, its 16-byte K chunk 2 j + (mt >> 1) (128B swizzle): a0 .. a3 in mma's own order.
  // Activations, token tile t, k from 32 p (16-bit) or 64 p (8-bit): matrix mt = 16-byte piece 4 p + mt
  // (b0, b1 of steps 2 p, 2 p + 1).
  constexpr int kRB = 16 * R * dtype_bytes(kW);  // bytes of one k-row of the warp's box
  constexpr uint32_t kMask = kRB / 16 - 1;
  const int mt = lane >> 3, r8 = lane & 7;
  const auto swz = [](uint32_t off) { return off ^ (((off >> 7) & kMask) << 4); };
  // kSet = {0, 3, 4, 7, 9, 10, 13, 14}, {1, 2, 5, 6, 8, 11, 12, 15}: k group r8 / 2, its outer rows 0 and 3
  // (set 0 for r8 < 4, set 1 from 4 on) or its inner rows 1 and 2.
  const bool outer = (r8 < 4) == ((mt & 1) == 0);
  const int kset = 4 * (r8 >> 1) + (outer ? 3 * (r8 & 1) : 1 + (r8 & 1));
  const int w_krow = kMix ? 8 * mt + r8 : kFp8 ? kset + 16 * (mt >> 1) : 8 * (mt >> 1) + r8;
  const uint32_t sel_even = q < 2 ? 0x2640u : 0x6204u, sel_odd = sel_even + 0x1111u;  // (see kSet)
  // The A fragment of block (i, j) of the weight box at wb.
  const auto a_frag = [&](uint32_t (&a)[4], uint32_t wb, int j, int i) {
    if constexpr (!kWMN) {
      const int row = 16 * i + 8 * (mt & 1) + r8;
      ptx::ldmatrix_x4<false>(wb + row * 128 + (((2 * j + (mt >> 1)) ^ r8) << 4), a);
    } else if constexpr (kFp8) {
      uint32_t r[4];
      ptx::ldmatrix_x4<true>(wb + swz((32 * j + w_krow) * kRB + 16 * i), r);
      a[0] = ptx::prmt(r[0], r[1], sel_even);
      a[1] = ptx::prmt(r[0], r[1], sel_odd);
      a[2] = ptx::prmt(r[2], r[3], sel_even);
      a[3] = ptx::prmt(r[2], r[3], sel_odd);
    } else {
      ptx::ldmatrix_x4<true>(wb + swz((16 * j + w_krow) * kRB + (2 * i + (mt & 1)) * 16), a);
    }
  };
  // kMix, (K, N): the two 16-K steps (s) of fp8 block (i, j) widened to kX: matrices 2 s, 2 s + 1 (k-rows 16 s ..
  // 16 s + 15), bytes 0 / 2 -> weight 2 g (a0 / a2), 1 / 3 -> weight 2 g + 1 (a1 / a3).
  const auto a_frag_mix = [&](uint32_t (&a)[2][4], uint32_t wb, int j, int i) {
    if constexpr (kMix) {
      uint32_t r[4];
      ptx::ldmatrix_x4<true>(wb + swz((32 * j + w_krow) * kRB + 16 * i), r);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        a[h][0] = fp8x2_widen<kW, kX>(ptx::prmt(r[2 * h], 0u, 0x20u));
        a[h][1] = fp8x2_widen<kW, kX>(ptx::prmt(r[2 * h], 0u, 0x31u));
        a[h][2] = fp8x2_widen<kW, kX>(ptx::prmt(r[2 * h + 1], 0u, 0x20u));
        a[h][3] = fp8x2_widen<kW, kX>(ptx::prmt(r[2 * h + 1], 0u, 0x31u));
      }
    }
  };
  // Output element (mma row r of 16-row block i, token tk of the CTA's): weight row row0 + 16 i + r (8-bit
  // (K, N): 2 r, or 2 (r - 8) + 1 from r = 8 on, as a_frag interleaves them).
  const bool plain = epilogue::plain(p.e);
  const auto emit = [&](int i, int r, int tk, float v) {
    const int row = row0 + 16 * i + (kWMN && kFp8 ? (r < 8 ? 2 * r : 2 * r - 15) : r), tok = tok0 + tk;
    if (row < p.n && tok < p.m) {
      const int64_t row_index = int64_t(b) * p.m + tok;
      if (plain) epilogue::store_element(v, p.e, row_index, row, p.n);
      else epilogue::finish_element(v, p.e, row_index, row, p.n);
    }
  };
  const auto sync = [] { ptx::named_barrier_sync(1, kCW * 32); };

  if constexpr (kWG) {
    // Warpgroup c takes chunk c of every stage, its warp i rows 16 i .. of the 64: per K step one wgmma
    // m64 n(8 MT), A from registers, B the chunk's activation box by descriptor (K-major, 128B swizzle);
    // the stage's wgmmas complete before it is released.
    const int chunk = warp >> 2, i = warp & 3;
    float d[4 * MT];
#pragma unroll
    for (int j = 0; j < 4 * MT; ++j) d[j] = 0.0f;
    const uint64_t db0 = desc::sm90_smem_desc(sbase + KW * P::kWBox + chunk * P::kXChunk, 16, 1024,
                                              desc::Sm90Swizzle::k128B);
    for (int kt = 0; kt < nk; ++kt) {
      const int s = kt % ST;
      ptx::mbarrier_wait(&full[s], (kt / ST) & 1);
      const uint32_t wb = sbase + s * P::kStageBytes + chunk * P::kWBox;
      if constexpr (kMix) {  // 32-K block j: two k16 steps, activation box j / 2, 32 bytes each
        uint32_t af[4][2][4];
#pragma unroll
        for (int j = 0; j < 4; ++j) a_frag_mix(af[j], wb, j, i);
        ptx::wgmma_fence();
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h)
            wg_step<kX, kX, 8 * MT>(d, af[j][h], desc::sm90_desc_advance(db0, s * P::kStageBytes + (j >> 1) * P::kXBox +
                                                                                    32 * (2 * (j & 1) + h)));
      } else {
        uint32_t af[4][4];
#pragma unroll
        for (int j = 0; j < 4; ++j) a_frag(af[j], wb, j, i);
        ptx::wgmma_fence();
#pragma unroll
        for (int j = 0; j < 4; ++j)
          wg_step<kW, kX, 8 * MT>(d, af[j], desc::sm90_desc_advance(db0, s * P::kStageBytes + 32 * j));
      }
      ptx::wgmma_commit();
      ptx::wgmma_wait<0>();
      ptx::fence_operands(d);
      ptx::fence_proxy_async_shared();  // (as below: generic reads of the slot, then its release)
      ptx::mbarrier_arrive(&empty[s]);
    }
    // The warpgroups' sums, added in warpgroup order (w4::sum_warps, 4 groups of rows): wgmma's D of warp
    // i, register j = 4 t + c, lane (g, q) is mma row g + 8 (c >> 1) of block i, token 8 t + 2 q + (c & 1),
    // mma.sync's acc[t][c].
    sync();  // every warp is done with the ring
    w4::sum_warps<MT, 1, KW, 4, CK>(reinterpret_cast<float*>(smem), reinterpret_cast<const float(&)[1][MT][4]>(d),
                                     sync, emit, split);
    return;
  } else if constexpr (kWMN) {
    // KS warps share a chunk: warp w takes the kJN mma steps from j0 of chunk w / KS.
    constexpr int kJN = 4 / KS;
    const int chunk = warp / KS, j0 = (warp % KS) * kJN;
    for (int kt = 0; kt < nk; ++kt) {
      const int s = kt % ST;
      ptx::mbarrier_wait(&full[s], (kt / ST) & 1);
      const uint32_t wb = sbase + s * P::kStageBytes + chunk * P::kWBox;
      const uint32_t xb = sbase + s * P::kStageBytes + KW * P::kWBox + chunk * P::kXChunk;
      if constexpr (kMix) {  // 32-K block j: two k16 steps; its activations: box j / 2, pieces 4 (j & 1) + mt
        uint32_t af[kJN][R][2][4], xf[kJN][MT][4];
#pragma unroll
        for (int jj = 0; jj < kJN; ++jj) {
#pragma unroll
          for (int i = 0; i < R; ++i) a_frag_mix(af[jj][i], wb, j0 + jj, i);
          const int j = j0 + jj;
#pragma unroll
          for (int t = 0; t < MT; ++t) {
            const int row = 8 * t + r8;
            ptx::ldmatrix_x4<false>(xb + (j >> 1) * P::kXBox + row * 128 + (((4 * (j & 1) + mt) ^ (row & 7)) << 4),
                                    xf[jj][t]);
          }
        }
        ptx::fence_proxy_async_shared();
        ptx::mbarrier_arrive(&empty[s]);
#pragma unroll
        for (int jj = 0; jj < kJN; ++jj)
#pragma unroll
          for (int i = 0; i < R; ++i)
#pragma unroll
            for (int t = 0; t < MT; ++t)
#pragma unroll
              for (int h = 0; h < 2; ++h)
                mma_step<kX, kX>(acc[i][t], af[jj][i][h], xf[jj][t][2 * h], xf[jj][t][2 * h + 1]);
      } else {
        uint32_t af[kJN][R][4], xf[MT][(kJN + 1) / 2][4];
#pragma unroll
        for (int jj = 0; jj < kJN; ++jj)
#pragma unroll
          for (int i = 0; i < R; ++i) a_frag(af[jj][i], wb, j0 + jj, i);
#pragma unroll
        for (int t = 0; t < MT; ++t)
#pragma unroll
          for (int hh = 0; hh < (kJN + 1) / 2; ++hh) {
            const int row = 8 * t + r8, h = (j0 >> 1) + hh;
            ptx::ldmatrix_x4<false>(xb + row * 128 + (((4 * h + mt) ^ (row & 7)) << 4), xf[t][hh]);
          }
        ptx::fence_proxy_async_shared();  // (as below: generic reads of the slot, then its release)
        ptx::mbarrier_arrive(&empty[s]);
#pragma unroll
        for (int jj = 0; jj < kJN; ++jj)
#pragma unroll
          for (int i = 0; i < R; ++i)
#pragma unroll
            for (int t = 0; t < MT; ++t) {
              // step j = j0 + jj takes pieces 2 j, 2 j + 1: block jj / 2 (j0 is even unless kJN == 1), pair j & 1
              const int odd = kJN == 1 ? (j0 & 1) : (jj & 1);
              const uint32_t(&x4)[4] = xf[t][jj >> 1];
              const uint32_t b0 = odd ? x4[2] : x4[0], b1 = odd ? x4[3] : x4[1];
              mma_step<kW, kX>(acc[i][t], af[jj][i], b0, b1);
            }
      }
    }
  } else
  for (int kt = 0; kt < nk; ++kt) {
    const int s = kt % ST;
    ptx::mbarrier_wait(&full[s], (kt / ST) & 1);
    const uint32_t st = sbase + s * P::kStageBytes;
    uint4 wv[R][2][2], xv[MT][2 * kXR];  // [tile][row g / g + 8][chunk], [token tile][chunk]
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t a = st + w_off + (16 * i + 8 * h) * 128;
        wv[i][h][0] = ptx::lds_v4(a + c0);
        wv[i][h][1] = ptx::lds_v4(a + c1);
      }
#pragma unroll
    for (int t = 0; t < MT; ++t) {
      const uint32_t a = st + x_off + t * 8 * 128;
      if (8 * t + g < x_rows) {
        if constexpr (kMix) {  // elements 32 q .. 32 q + 31 of the chunk: box q / 2, pieces 4 (q & 1) ..
#pragma unroll
          for (int u = 0; u < 4; ++u) xv[t][u] = ptx::lds_v4(a + (q >> 1) * P::kXBox + (((4 * (q & 1) + u) ^ g) << 4));
        } else {
          xv[t][0] = ptx::lds_v4(a + c0);
          xv[t][1] = ptx::lds_v4(a + c1);
        }
      } else {
#pragma unroll
        for (int u = 0; u < 2 * kXR; ++u) xv[t][u] = make_uint4(0, 0, 0, 0);
      }
    }
    // Released after this thread's loads, ordered before the producer's next TMA write into the slot
    // (an async-proxy write after generic-proxy reads: fence.proxy.async, as in w4_tma.cuh).
    ptx::fence_proxy_async_shared();
    ptx::mbarrier_arrive(&empty[s]);
    if constexpr (kMix) {
      // fp8 word j of a row (its elements 4 j .. 4 j + 3) widened: one k16 step with activation words 2 j, 2 j + 1
      const auto u32 = [](const uint4& u, int c) { return c == 0 ? u.x : c == 1 ? u.y : c == 2 ? u.z : u.w; };
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int i = 0; i < R; ++i) {
          const uint32_t w0 = u32(wv[i][0][j >> 2], j & 3), w1 = u32(wv[i][1][j >> 2], j & 3);
          const uint32_t a[4] = {fp8x2_widen<kW, kX>(w0), fp8x2_widen<kW, kX>(w1), fp8x2_widen<kW, kX>(w0 >> 16),
                                 fp8x2_widen<kW, kX>(w1 >> 16)};
#pragma unroll
          for (int t = 0; t < MT; ++t)
            mma_step<kX, kX>(acc[i][t], a, u32(xv[t][j >> 1], (2 * j) & 3), u32(xv[t][j >> 1], (2 * j + 1) & 3));
        }
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const auto word = [j](const uint4 (&v)[2], int e) {  // the thread's 32-bit word 2 j + e of 8
          const uint4& u = v[j >> 1];
          return (j & 1) == 0 ? (e == 0 ? u.x : u.y) : (e == 0 ? u.z : u.w);
        };
#pragma unroll
        for (int i = 0; i < R; ++i) {
          const uint32_t a[4] = {word(wv[i][0], 0), word(wv[i][1], 0), word(wv[i][0], 1), word(wv[i][1], 1)};
#pragma unroll
          for (int t = 0; t < MT; ++t) mma_step<kW, kX>(acc[i][t], a, word(xv[t], 0), word(xv[t], 1));
        }
      }
    }
  }

  // Every stage was consumed, so the ring is free for the partial sums (the producer warp has returned:
  // named barrier 1 over the consumer warps), added in warp order (w4::sum_warps); each output element
  // is then finished once (emit).
  if constexpr (!kWG) {
    sync();
    w4::sum_warps<MT, R, kCW, 1, CK>(reinterpret_cast<float*>(smem), acc, sync, emit, split);
  }
}

}  // namespace jax_tmem::dd
