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
// CTAs of 256 per SM the colwise kernel is compiled for: 5 (<= 48 registers); 4 (<= 64) for the 16-bit
// inputs to e2m1 and for float16 -> e5m2, which would spill at 5 (ptxas, CUDA 13.0, sm_90a / sm_100a).
template <class T, QFmt F>
inline constexpr int kColMinCtas =
    (!std::is_same_v<T, float> && QTraits<F>::kFp4) || (std::is_same_v<T, __half> && F == QFmt::kE5M2) ? 4 : 5;

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

}  // namespace jax_tmem::quant
