// jax_tmem: the fused block-scale quantize kernel along the second-to-last axis ("colwise", the backward
// pass's layout; issue 14): x (batch, K, cols) -> data and scales with blocks down K. The formats, the scale
// arithmetic and the e2m1 / fp8 encoders are those of kernels/mx_quantize.cuh (shared with the rowwise
// kernel).
#pragma once

#include "jax_tmem/kernels/mx_quantize.cuh"

namespace jax_tmem::quant {

// max |x| per element position of 16-byte words of x (the columns of the colwise kernel), NaN where any is:
// as AbsMax, two positions per instruction for the 16-bit types.
template <class T>
struct ColumnAbsMax {
  using V2 = typename AbsMax<T>::V2;
  static constexpr int kVec = 16 / sizeof(T);
  V2 m2[4];
  float m[4];
  __device__ __forceinline__ ColumnAbsMax() {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      if constexpr (std::is_same_v<T, float>) m[q] = 0.0f;
      else m2[q] = __habs2(V2{});  // +0
    }
  }
  __device__ __forceinline__ void add(const uint4& u) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      if constexpr (std::is_same_v<T, float>) m[q] = ptx::max_nan_f32(m[q], fabsf(reinterpret_cast<const float*>(&u)[q]));
      else m2[q] = __hmax2_nan(m2[q], __habs2(reinterpret_cast<const V2*>(&u)[q]));
    }
  }
  __device__ __forceinline__ float value(int j) const {
    if constexpr (std::is_same_v<T, float>) return m[j];
    else return to_float<T>(j % 2 ? m2[j / 2].y : m2[j / 2].x);
  }
};

// Colwise: x (batch, k, rows) with rows a multiple of kVec. A CTA of 256 threads takes 32 rows (one MX
// block of rows, two NVFP4 blocks: kb0, kb0 + 1) of one batch and 32 * kVec columns: lane l the columns
// [c0 + l * kVec, + kVec), warp w the rows [4 w, 4 w + 4). Each thread keeps its 4 rows x 16 bytes in
// registers (NVFP4 took 2 rows per thread, one block per CTA, until 2026-11-26: 54-61 % of copy);
// the per-column amax (and NaN flag) of each block's warps are combined through shared memory, each column's
// scale by one thread (every warp took all of its lanes' columns until 2026-11-26: 64 shared loads and kVec
// scales per thread for kRows * kVec elements; the 4-bit forms ran at 39-55 % of the copy bandwidth); the
// conversion reads the registers, so x is read once (the two-pass version re-read it, and at 8192^2 the re-read
// missed L2: 24 % hit rate, 314 MB of DRAM traffic for 194 MB of data, Nsight Compute 2026-11-24).
// The max over the rows does not depend on their order, so the scales are the two-pass version's.
// e2m1 data is packed along the rows axis (the last, contiguous one): kVec / 2 bytes per row.
// CTAs of 256 per SM the colwise kernel is compiled for: 5 (<= 48 registers); 4 (<= 64) for float16 -> e5m2,
// which would spill at 5 (ptxas, CUDA 13.0, sm_90a / sm_100a). (16-bit x to e2m1 takes the column-pair kernel
// below since 2026-11-26.)
template <class T, QFmt F>
inline constexpr int kColMinCtas = std::is_same_v<T, __half> && F == QFmt::kE5M2 ? 4 : 5;

template <class T, QFmt F>
__global__ void __launch_bounds__(256, kColMinCtas<T, F>) mx_quantize_colwise_kernel(const T* __restrict__ x, uint8_t* __restrict__ data,
                                                                  uint8_t* __restrict__ scales, QuantArgs a) {
  using Tr = QTraits<F>;
  constexpr int V = Tr::V, kVec = 16 / sizeof(T), kRows = 4, kCols = 32 * kVec;  // columns per CTA
  constexpr int kWarpsPerBlock = V / kRows, kBlocks = 8 / kWarpsPerBlock;         // blocks of rows per CTA
  __shared__ __align__(16) float s_amax[8][kCols];         // [warp][column]: NaN where its rows hold one
  __shared__ __align__(16) float s_mul[kBlocks][kCols];    // the fast path's multiplier (numeric_multiplier)
  __shared__ __align__(16) float s_div[kBlocks][kCols];    // Block::f (the general path's)
  __shared__ __align__(16) uint8_t s_num[kBlocks][kCols];  // numeric_block
  const GScale gs = global_scale<F>(a);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, sb = warp / kWarpsPerBlock;  // sb: its block
  const int64_t groups = a.rows / kVec, spans = (groups + 31) / 32, kb_count = a.k / V;
  // tiles (span, kb0 / kBlocks, bi) from the grid's (x, y, z), no 64-bit divisions (a division routine per
  // tile cost more instructions than the NVFP4 tile's 16 elements per thread, 2026-11-26)
  for (int64_t bi = blockIdx.z; bi < a.batch; bi += gridDim.z)
  for (int64_t kb0 = blockIdx.y * int64_t(kBlocks); kb0 < kb_count; kb0 += int64_t(gridDim.y) * kBlocks)
  for (int64_t span = blockIdx.x; span < spans; span += gridDim.x) {
    const int64_t gi = span * 32 + lane, kb = kb0 + sb;
    const bool active = gi < groups && kb < kb_count;  // (NVFP4: an odd kb_count leaves the last CTA one block)
    const int64_t base = (bi * a.k + kb0 * V + warp * kRows) * a.rows + gi * kVec;  // this thread's first row
    uint4 raw[kRows];
    ColumnAbsMax<T> am;  // per column of this thread's 16 bytes
    if (active) {
#pragma unroll
      for (int i = 0; i < kRows; ++i) raw[i] = __ldg(reinterpret_cast<const uint4*>(x + base + i * a.rows));
#pragma unroll
      for (int i = 0; i < kRows; ++i) am.add(raw[i]);
    }
#pragma unroll
    for (int q = 0; q < kVec / 4; ++q)
      reinterpret_cast<float4*>(&s_amax[warp][lane * kVec])[q] =
          make_float4(am.value(4 * q), am.value(4 * q + 1), am.value(4 * q + 2), am.value(4 * q + 3));
    __syncthreads();
    // Each (block, column)'s scale once (not by every warp), and its byte stored by one thread: consecutive
    // threads take consecutive columns.
#pragma unroll 1
    for (int c2 = threadIdx.x; c2 < kBlocks * kCols; c2 += 256) {  // (float32 MX: 128 columns, half the threads)
      const int b = c2 / kCols, c = c2 % kCols;
      float m = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarpsPerBlock; ++w) m = ptx::max_nan_f32(m, s_amax[b * kWarpsPerBlock + w][c]);
      const float max_abs_x = m;
      m = pre<F>(m, gs);  // = max |x / g| (see GScale)
      const Block blk = block_scale<T, F>(m, m != m, gs.on, gs.g);
      const bool num = numeric_block<F>(max_abs_x, blk);
      s_mul[b][c] = num ? numeric_multiplier<F>(blk).f : 0.0f;
      s_div[b][c] = blk.f;
      s_num[b][c] = num;
      const int64_t col = span * kCols + c, kbc = kb0 + b;
      if (col < a.rows && kbc < kb_count)
        scales[bi * a.sf_batch + (a.sw_cols ? scale_index(col, kbc, kb_count, a.sw_cols) : kbc * a.rows + col)] =
            blk.byte;
    }
    __syncthreads();  // (the next tile rewrites s_amax only after its first barrier, s_mul after its second)
    if (!active) continue;
    // every block of this thread's columns converts as numbers (all kVec flags set): then the blocks'
    // multipliers, else their Block::f for the general path (MX: the same values)
    bool numeric;
    if constexpr (kVec == 8) {
      const uint2 u = *reinterpret_cast<const uint2*>(&s_num[sb][lane * kVec]);
      numeric = (u.x & u.y) == 0x01010101u;
    } else {
      numeric = *reinterpret_cast<const uint32_t*>(&s_num[sb][lane * kVec]) == 0x01010101u;
    }
    Block blk[kVec];
    const float* sf = numeric ? s_mul[sb] : s_div[sb];
#pragma unroll
    for (int q = 0; q < kVec / 4; ++q) {
      // ([[maybe_unused]]: nvcc 13.0's front end warned 177-D, "never referenced"; the SASS is the same)
      [[maybe_unused]] const float4 f4 = reinterpret_cast<const float4*>(&sf[lane * kVec])[q];
      blk[4 * q] = {0, f4.x};
      blk[4 * q + 1] = {0, f4.y};
      blk[4 * q + 2] = {0, f4.z};
      blk[4 * q + 3] = {0, f4.w};
    }
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const T* e = reinterpret_cast<const T*>(&raw[i]);
      float f[kVec];
#pragma unroll
      for (int j = 0; j < kVec; ++j) f[j] = to_float(e[j]);
      if constexpr (Tr::kFp4) {  // kVec / 2 bytes: element 2i in the low nibble
        uint32_t word = 0;
        if (numeric) {  // blk holds the multipliers
#pragma unroll
          for (int j = 0; j < kVec; ++j) word |= encode_e2m1_numeric<T, F>(f[j], blk[j]) << (4 * j);
        } else {
#pragma unroll
          for (int j = 0; j < kVec; ++j) word |= encode_e2m1<T, F>(f[j], blk[j]) << (4 * j);
        }
        uint8_t* dst = data + (base + i * a.rows) / 2;
        if constexpr (kVec == 8) *reinterpret_cast<uint32_t*>(dst) = word;
        else *reinterpret_cast<uint16_t*>(dst) = static_cast<uint16_t>(word);
      } else {  // (MX: the multiplier is Block::f either way)
        uint32_t w[kVec / 4];
#pragma unroll
        for (int q = 0; q < kVec / 4; ++q) w[q] = encode4_fp8<T, F>(f + 4 * q, blk + 4 * q);
        uint8_t* dst = data + base + i * a.rows;
        if constexpr (kVec == 8) *reinterpret_cast<uint2*>(dst) = make_uint2(w[0], w[1]);
        else *reinterpret_cast<uint32_t*>(dst) = w[0];
      }
    }
  }
}

// Colwise, a thread per column pair (the 4-bit formats, 16-bit x): thread (g, kb, bi) takes columns 2g and
// 2g + 1 of the V rows of block kb (one 4-byte load per row: a warp reads 128 contiguous bytes of each row),
// keeps them in registers (V registers), takes both columns' max |x| itself (one bf16x2 / f16x2 max per row),
// computes its two scales once and converts: no shared memory and no barrier. The CTA-tile kernel above
// spent ~30 % of its instructions exchanging the column amax through shared memory and computing the scales
// after two barriers (Nsight Compute, NVFP4 4096^2 colwise, H100, 2026-11-26: ~32 instructions per element,
// issue slots 72 %, warps mostly "not selected" or "math pipe throttle": instruction-bound). Measured
// against it (H100, 2026-11-26, TB/s at 4096^2 / 8192^2): NVFP4 1.91 / 2.23 -> 2.12 / 2.49, MXFP4 2.18 / 2.55
// -> 2.20 / 2.78; four columns per thread (8-byte loads, 74-80 registers) 2.00 / 2.53 for NVFP4; MXFP8 stays
// on the tile kernel (2.60 / 2.91 against 2.57 / 2.88). Row addresses advance by pointer increments: (base + i
// * rows) / 2 in signed 64-bit arithmetic took ~10 instructions per row (and MXFP4 ran 8 % below the tile
// kernel with it). Since 2026-11-27 a row's two codes and their signs take the pair encoders
// (e2m1_pair_byte: the signs from x's bits by one mad.hi, no per-element sign or packing work, the numeric
// branch taken once per unit instead of once per row): NVFP4's fast path 39 -> 25 instructions per row, MXFP4
// 21 per row; and NVFP4 runs the prefetching grid below. (H100, us per 8192^2 NVFP4 kernel in CUPTI's trace:
// 67.0 with the pair encoders, 61.7 with the prefetching grid too; bench_block_scaled.py's 8192^2 NVFP4 colwise
// 2.46 before either -> 2.71-2.72 TB/s, copy 2.84-2.86.)
// A unit of the column-pair kernel: columns 2g, 2g + 1 of block kb of batch entry bi. pair_load reads its V
// rows (one 32-bit word each), pair_plan takes both columns' max |x| (one bf16x2 / f16x2 max per row) and
// scales, stores the scales and decides the path; pair_encode writes the V data bytes.
template <class T, QFmt F>
__device__ __forceinline__ void pair_load(uint32_t (&raw)[QTraits<F>::V], const T* __restrict__ x, const QuantArgs& a,
                                          int64_t bi, int64_t kb, int64_t g) {
  const T* src = x + ((bi * a.k + kb * QTraits<F>::V) * a.rows + g * 2);
#pragma unroll
  for (int i = 0; i < QTraits<F>::V; ++i, src += a.rows) raw[i] = __ldg(reinterpret_cast<const uint32_t*>(src));
}

struct PairPlan {
  Block blk[2];     // the columns' scales (the multipliers where numeric)
  bool numeric;     // both blocks numeric_block
  bool fast;        // the pair encoders apply (numeric; MXFP4 also with multipliers >= 2^-23)
  float m0, m1;     // their multipliers (MXFP4: times 2^-126, e2m1_mag_scaled16)
  uint32_t neg;     // the sign bits of negative multipliers (NVFP4 with a negative global scale)
};

template <class T, QFmt F>
__device__ __forceinline__ PairPlan pair_plan(const uint32_t (&raw)[QTraits<F>::V], uint8_t* __restrict__ scales,
                                              const QuantArgs& a, const GScale& gs, int64_t bi, int64_t kb, int64_t g) {
  using V2 = typename AbsMax<T>::V2;
  constexpr int V = QTraits<F>::V;
  V2 m2 = __habs2(V2{});  // max |x| of the two columns (NaN where one is)
#pragma unroll
  for (int i = 0; i < V; ++i) m2 = __hmax2_nan(m2, __habs2(*reinterpret_cast<const V2*>(&raw[i])));
  PairPlan p;
  p.numeric = true;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const float max_abs_x = to_float<T>(j ? m2.y : m2.x);
    const float m = pre<F>(max_abs_x, gs);  // = max |x / g| (see GScale)
    p.blk[j] = block_scale<T, F>(m, m != m, gs.on, gs.g);
    p.numeric = p.numeric && numeric_block<F>(max_abs_x, p.blk[j]);
  }
  const int64_t col = g * 2, kb_count = a.k / V;
  if (a.sw_cols == 0) {  // plain (batch, K / V, cols): two consecutive bytes (rows even: aligned)
    *reinterpret_cast<uint16_t*>(scales + bi * a.sf_batch + kb * a.rows + col) =
        static_cast<uint16_t>(p.blk[0].byte | p.blk[1].byte << 8);
  } else {
#pragma unroll
    for (int j = 0; j < 2; ++j) scales[bi * a.sf_batch + scale_index(col + j, kb, kb_count, a.sw_cols)] = p.blk[j].byte;
  }
  p.m0 = p.m1 = 0.0f;
  p.neg = 0;
  if (p.numeric) {
    p.blk[0] = numeric_multiplier<F>(p.blk[0]);
    p.blk[1] = numeric_multiplier<F>(p.blk[1]);
    if constexpr (QTraits<F>::kNv) {
      p.m0 = p.blk[0].f, p.m1 = p.blk[1].f;
      p.neg = (__float_as_uint(p.m0) >> 16 & 0x8000u) | (__float_as_uint(p.m1) & 0x80000000u);
    } else {
      p.m0 = p.blk[0].f * 0x1p-126f, p.m1 = p.blk[1].f * 0x1p-126f;  // (exact where >= 2^-23)
    }
  }
  p.fast = p.numeric && (QTraits<F>::kNv || fminf(p.blk[0].f, p.blk[1].f) >= 0x1p-23f);
  return p;
}

// kFast: the pair encoders (the common case: both columns numeric), a row's two codes and signs in one byte;
// else the general path for both columns (a numeric one gets the same codes). kReload (the general path of the
// prefetching kernel): the rows are read again from x (cached: read just before) instead of `raw`, so that
// `raw` is dead there (with both register sets live its general path spilled at 80 registers).
template <class T, QFmt F, bool kFast, bool kReload = false>
__device__ __forceinline__ void pair_encode(const uint32_t (&raw)[QTraits<F>::V], const PairPlan& p,
                                            uint8_t* __restrict__ data, const QuantArgs& a, int64_t bi, int64_t kb,
                                            int64_t g, const T* __restrict__ x = nullptr) {
  constexpr int V = QTraits<F>::V;
  const int64_t half_rows = a.rows / 2;  // bytes per data row
  const int64_t base = (bi * a.k + kb * V) * a.rows + g * 2;
  uint8_t* dst = data + base / 2;  // one byte per row: column 2g in the low nibble
  [[maybe_unused]] const T* src = nullptr;
  if constexpr (kReload) src = x + base;
#pragma unroll
  for (int i = 0; i < V; ++i, dst += half_rows) {
    if constexpr (kFast) {
      float f0, f1;
      if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        f0 = __uint_as_float(raw[i] << 16), f1 = __uint_as_float(raw[i] & 0xffff0000u);
      } else {
        const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&raw[i]));
        f0 = f.x, f1 = f.y;
      }
      uint32_t c0, c1;
      if constexpr (QTraits<F>::kNv) c0 = e2m1_mag(f0 * p.m0), c1 = e2m1_mag(f1 * p.m1);
      else c0 = e2m1_mag_scaled16(f0 * p.m0), c1 = e2m1_mag_scaled16(f1 * p.m1);
      *dst = static_cast<uint8_t>(e2m1_pair_byte(c0, c1, raw[i] ^ p.neg));
    } else {
      uint32_t w;
      if constexpr (kReload) w = __ldg(reinterpret_cast<const uint32_t*>(src + i * a.rows));
      else w = raw[i];
      const T* e = reinterpret_cast<const T*>(&w);
      const float f0 = to_float(e[0]), f1 = to_float(e[1]);
      *dst = static_cast<uint8_t>(p.numeric ? encode_e2m1_numeric<T, F>(f0, p.blk[0]) | encode_e2m1_numeric<T, F>(f1, p.blk[1]) << 4
                                            : encode_e2m1<T, F>(f0, p.blk[0]) | encode_e2m1<T, F>(f1, p.blk[1]) << 4);
    }
  }
}

// kPrefetch: each thread takes blocks kb, kb + gridDim.y, ... of its column pair with the next block's rows
// loaded before this one's conversion (two register sets; the grid sized to what the GPU holds at once):
// the loads of the next block are issued before this block's max |x| (issued after it, or after a general-path
// conversion, it ran 6 % slower at 8192^2, H100 2026-11-27).
// kPairPrefetch: whether the prefetching form is compiled for this arch (NVFP4 only: 3 CTAs of 256 per SM, 80
// registers, on sm_90a). On sm_100a / sm_103a ptxas (CUDA 13.0) spilled it at 80 registers and at 128 (16-40
// bytes), and nobody has timed it there: the kPrefetch instantiation runs the one-block-per-step loop (a
// grid-stride loop: any grid is correct) in the launcher's grid, which follows the occupancy API either way.
// (MXFP4's prefetching form, 2 CTAs of 128 registers, measured no faster at 4096^2 in kernel time and 5 %
// slower at 8192^2: H100 2026-11-27.)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
inline constexpr bool kPairPrefetch = false;
inline constexpr int kPairPrefetchCtas = 4;
#else
inline constexpr bool kPairPrefetch = true;
inline constexpr int kPairPrefetchCtas = 3;
#endif

template <class T, QFmt F, bool kPrefetch = false>
__global__ void __launch_bounds__(256, kPrefetch ? kPairPrefetchCtas : 4) mx_quantize_colwise_pair_kernel(
    const T* __restrict__ x, uint8_t* __restrict__ data, uint8_t* __restrict__ scales, QuantArgs a) {
  static_assert(!std::is_same_v<T, float> && QTraits<F>::kFp4, "16-bit x to e2m1 (the others take the tile kernel)");
  static_assert(!kPrefetch || QTraits<F>::kNv, "the prefetching form is NVFP4's");
  constexpr int V = QTraits<F>::V;
  const GScale gs = global_scale<F>(a);
  const int64_t pairs = a.rows / 2, kb_count = a.k / V;
  if constexpr (!(kPrefetch && kPairPrefetch)) {
    for (int64_t bi = blockIdx.z; bi < a.batch; bi += gridDim.z)
    for (int64_t kb = blockIdx.y; kb < kb_count; kb += gridDim.y)
    for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < pairs; g += int64_t(gridDim.x) * blockDim.x) {
      uint32_t raw[V];
      pair_load<T, F>(raw, x, a, bi, kb, g);
      const PairPlan p = pair_plan<T, F>(raw, scales, a, gs, bi, kb, g);
      if (p.fast) pair_encode<T, F, true>(raw, p, data, a, bi, kb, g);
      else pair_encode<T, F, false>(raw, p, data, a, bi, kb, g);
    }
  } else {
    // one step: load block kn into `nxt`, convert `cur` (block kb)
    auto step = [&](const uint32_t (&cur)[V], uint32_t (&nxt)[V], int64_t bi, int64_t kb, int64_t kn, int64_t g) {
      if (kn < kb_count) pair_load<T, F>(nxt, x, a, bi, kn, g);
      const PairPlan p = pair_plan<T, F>(cur, scales, a, gs, bi, kb, g);
      if (p.fast) pair_encode<T, F, true>(cur, p, data, a, bi, kb, g);
      else pair_encode<T, F, false, true>(cur, p, data, a, bi, kb, g, x);
    };
    for (int64_t bi = blockIdx.z; bi < a.batch; bi += gridDim.z)
    for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < pairs; g += int64_t(gridDim.x) * blockDim.x) {
      int64_t kb = blockIdx.y;
      if (kb >= kb_count) break;
      uint32_t r0[V], r1[V];
      pair_load<T, F>(r0, x, a, bi, kb, g);
      for (;;) {  // two steps per trip: the register sets swap roles without copies
        int64_t kn = kb + gridDim.y;
        step(r0, r1, bi, kb, kn, g);
        if (kn >= kb_count) break;
        kb = kn;
        kn = kb + gridDim.y;
        step(r1, r0, bi, kb, kn, g);
        if (kn >= kb_count) break;
        kb = kn;
      }
    }
  }
}

}  // namespace jax_tmem::quant
