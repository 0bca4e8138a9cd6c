// jax_tmem: the fused block-scale quantize kernels (issue 14): bf16 / f16 / f32 -> block-scaled data and
// scales along the quantized axis, in one read of x from memory. Plain CUDA (any arch). Formats (QFmt):
//   MXFP8: e4m3 or e5m2 data, UE8M0 scale per 32;   MXFP4: e2m1 data (packed two per byte, element 2i
//   in the low nibble: XLA's E(4) layout), UE8M0 per 32;   NVFP4: e2m1 data, UE4M3 scale per 16, x first
//   divided by the float32 global scale (when one is given).
//   rowwise: x (batch, rows, K), blocks along K (the last axis): one thread per block (blocks are
//            contiguous, 16-byte loads);
//   colwise: x (batch, K, cols), blocks along K (the second-to-last axis: the backward pass's layout):
//            a CTA per block of rows x 32 * kVec columns, x held in registers between the amax (combined
//            across the CTA's warps in shared memory) and the conversion: one read of x;
// scales plain (the quantized axis in place: (batch, rows, K / V) or (batch, K / V, cols)) or in the
// 128x4 tiles of jax_tmem.swizzle_scales with the non-quantized axis as rows (GemmProblem::sf_index;
// the launcher zeroes the padding first). The arithmetic follows JAX's quantizer step by step
// (jax._src.cudnn.scaled_matmul_stablehlo.quantize; jax_tmem/ops/block_scale.py), each result rounded
// to the type XLA computes it in, as XLA's compiled program does:
//   MX (x's type T):
//   q     = amax(|x|) * r, r = 1 / max(data type) rounded to T (NaN if the block holds a NaN):
//           XLA's algebraic simplifier turns the quantizer's division by the constant max into this
//           multiplication (seen in the H200's compiled HLO, 2026-11-23: bf16 `multiply(amax, 0.002228)`),
//           and for bf16 / f16 the two differ in a few hundred amax values (tests/test_block_scale.py
//           plants them)
//   e     = the UE8M0 byte of q rounded UP to a power of two (an all-ones exponent wraps to 0, as JAX's
//           uint8 cast does)
//   s     = 2^(e - 127) as T (0 read as the smallest positive: 2^-127, f16 2^-15)
//   data  = convert(clip(x / s, -max, max)) with round-to-nearest-even; NaN stays NaN (fp8).
//   NVFP4 (float32: dividing by the float32 global scale promotes x). XLA's GPU programs divide float32
//   with div.full.f32 (<= 2 ulp, not IEEE: ptx::div_full_f32) and its simplifier rewrites (x / g) / s
//   into x / (g * s) (seen in the H200's optimized HLO, 2026-11-23); so does this kernel:
//   y     = x / g (no division without a global scale)
//   s     = e4m3(clip(amax(|y|) * (1 / 6 rounded to f32), 0, 448)) (round to nearest even)
//   data  = e2m1(clip(x / (g * s), -6, 6)) (an all-zero block's 0 / 0 is NaN)
//   e2m1 rounds to nearest even; a NaN becomes 0x8 (-0), as XLA's and ml_dtypes' conversions do.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "jax_tmem/ptx/common.cuh"

namespace jax_tmem::quant {

template <class T>
__device__ __forceinline__ float to_float(T v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(v);
  else return __half2float(v);
}

// v rounded to T (round to nearest even), as a float: XLA's elementwise ops on T compute in f32 and round.
template <class T>
__device__ __forceinline__ float round_to(float v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(__float2bfloat16_rn(v));
  else return __half2float(__float2half_rn(v));
}

// The output formats. V: elements per scale; kMax: the data type's largest finite value.
enum class QFmt : int { kE4M3 = 0, kE5M2 = 1, kMXFP4 = 2, kNVFP4 = 3 };
template <QFmt F>
struct QTraits {
  static constexpr bool kFp4 = F == QFmt::kMXFP4 || F == QFmt::kNVFP4;
  static constexpr bool kNv = F == QFmt::kNVFP4;
  static constexpr int V = kNv ? 16 : 32;
  static constexpr float kMax = F == QFmt::kE5M2 ? 57344.0f : F == QFmt::kE4M3 ? 448.0f : 6.0f;
};

struct Block {   // one block's scale: its byte and what x is multiplied (MX) or divided (NVFP4: g * s) by
  uint8_t byte;
  float f;
};

// The block's scale from amax (JAX's compiled quantizer, above); T is x's type, g NVFP4's global scale
// (1 and unused without one).
template <class T, QFmt F>
__device__ __forceinline__ Block block_scale(float amax, bool nan, bool has_g = false, float g = 1.0f) {
  using Tr = QTraits<F>;
  if constexpr (Tr::kNv) {
    float q = nan ? __uint_as_float(0x7fc00000u) : amax * (1.0f / 6.0f);
    q = q > 448.0f ? 448.0f : q;  // (clip at 0 is a no-op; NaN compares false and stays NaN)
    const __nv_fp8_storage_t b = __nv_cvt_float_to_fp8(q, __NV_SATFINITE, __NV_E4M3);
    const float sv = __half2float(__half(__nv_cvt_fp8_to_halfraw(b, __NV_E4M3)));
    return {static_cast<uint8_t>(b), has_g ? __fmul_rn(g, sv) : sv};
  } else {
    const float tiny = std::is_same_v<T, __half> ? 3.0517578125e-05f : 5.877471754111438e-39f;  // 2^-15, 2^-127
    const float q = nan ? __uint_as_float(0x7fc00000u) : round_to<T>(amax * round_to<T>(1.0f / Tr::kMax));
    const uint32_t bits = __float_as_uint(q), ex = bits >> 23, man = bits & 0x7fffffu;
    const bool up = man > 0 && ex != 0xfeu && !(ex == 0 && man <= 0x400000u);
    const uint8_t e8 = static_cast<uint8_t>(up ? ex + 1 : ex);
    float sv = __uint_as_float(static_cast<uint32_t>(e8) << 23);
    sv = round_to<T>(sv == 0.0f ? tiny : sv);
    // sv is a power of two (or 0 / inf for f16): x * (1 / sv) rounds exactly as x / sv.
    return {e8, __frcp_rn(sv)};
  }
}

// e2m1 of v (|v| <= 6 or NaN), round to nearest even, from the magnitude a, without branches: below 1
// the codes 0, 1, 2 are 0, 0.5, 1.0, i.e. rint(2a) (ties to even: 0.25 -> 0, 0.75 -> 1.0), which is the
// low mantissa bits of a + 2^22 (the add's own round to nearest even at an ulp of 0.5; no float-to-int
// conversion, a quarter-rate op); from 1 on e2m1 is a float with one mantissa bit, so rounding a's bits
// to one mantissa bit (add 0x1fffff + the kept bit: ties to even) leaves (exponent, bit) = code + 252 in
// bits 22 and up (1.25 -> 1.0, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4, 6 -> 7). The sign bit from v's (so
// -0 and small negatives are 0x8); NaN -> 0x8. (Checked against ml_dtypes' conversion on 2.1M values incl.
// every tie and its neighbours, 2026-11-23; this branch-free form against the earlier one, which
// converted 2a to an integer, over all 2^32 floats, 2026-11-25.)
template <bool kNaN = true>  // false: v is known to be a number (numeric_block)
__device__ __forceinline__ uint32_t to_e2m1(float v) {
  const float a = fminf(fabsf(v), 6.0f);  // the clip to [-6, 6] (the sign comes from v; NaN gives 6 here)
  const uint32_t b = __float_as_uint(a);
  const uint32_t lo = __float_as_uint(__fadd_rn(a, 4194304.0f)) - 0x4a800000u;  // rint(2a), for a < 1
  const uint32_t hi = ((b + 0x1fffffu + ((b >> 22) & 1u)) >> 22) - 252u;
  const uint32_t code = (a < 1.0f ? lo : hi) | ((__float_as_uint(v) >> 28) & 0x8u);
  if constexpr (kNaN) return v != v ? 0x8u : code;
  else return code;
}

// Whether a block takes the fast path (numeric_multiplier, to_e2m1<false>): every x / s is a number,
// i.e. the block's max |x| is finite (not NaN, no infinity) and its MX multiplier is finite and not 0
// (otherwise x NaN, or inf * 0: an infinity makes the MX scale infinite, its inverse 0); NVFP4's divisor
// d = g * s within 2^-126 <= |d| <= 2^126 (so div.full.f32 is x times its reciprocal, ptx::rcp_approx_ftz,
// and 0 / 0 of an all-zero block, NaN, cannot occur). Other blocks take the general path. Conservative.
template <QFmt F>
__device__ __forceinline__ bool numeric_block(float max_abs_x, const Block& blk) {
  const float d = fabsf(blk.f);
  if constexpr (QTraits<F>::kNv) return max_abs_x < INFINITY && d >= 0x1p-126f && d <= 0x1p126f;
  else return max_abs_x < INFINITY && d < INFINITY && d != 0.0f;
}

// The block in the form of the fast path: what x is multiplied by (MX: 1 / s as is; NVFP4: the
// reciprocal of g * s that div.full.f32 multiplies by in that range).
template <QFmt F>
__device__ __forceinline__ Block numeric_multiplier(const Block& blk) {
  if constexpr (QTraits<F>::kNv) return {blk.byte, ptx::rcp_approx_ftz(blk.f)};
  else return blk;
}

// Whether rounding x * (1 / s) to T can change the code it converts to. MX scales are powers of two, so
// the product of a T value is exact in T unless it leaves T's normal range, and beyond it the code is the
// clip's or +-0 either way, except for float16 subnormals against e5m2 (its smallest tie, 2^-17, lies
// among them). Checked over every finite bf16 / f16 value times every power of two 2^-149..2^127 for
// e2m1, e4m3 and e5m2 (ml_dtypes, 2026-11-25): no code differs but 488 of f16 -> e5m2.
template <class T, QFmt F>
inline constexpr bool kRoundScaled = std::is_same_v<T, __half> && F == QFmt::kE5M2;

// x / s (MX: x * (1 / s), rounded to T where that can change the code; NVFP4: div.full by g * s): the
// value that is converted.
template <class T, QFmt F>
__device__ __forceinline__ float scaled(float v, const Block& blk) {
  if constexpr (QTraits<F>::kNv) return ptx::div_full_f32(v, blk.f);
  else if constexpr (kRoundScaled<T, F>) return round_to<T>(v * blk.f);
  else return v * blk.f;
}

// One e2m1 code (4 bits) from x: to_e2m1 clips at +-6.
template <class T, QFmt F>
__device__ __forceinline__ uint32_t encode_e2m1(float v, const Block& blk) {
  return to_e2m1(scaled<T, F>(v, blk));
}

// The same for a block of numeric_block, with m = numeric_multiplier(blk): bit for bit the code above.
template <class T, QFmt F>
__device__ __forceinline__ uint32_t encode_e2m1_numeric(float v, const Block& m) {
  const float y = v * m.f;
  return to_e2m1<false>(kRoundScaled<T, F> ? round_to<T>(y) : y);
}

// Four fp8 codes in one word (element 0 in the low byte), two conversions of two values each. The
// satfinite conversion is the clip to [-max, max] (an infinity becomes max, NaN stays NaN), so none is
// done before it.
template <class T, QFmt F>
__device__ __forceinline__ uint32_t encode4_fp8(const float* v, const Block* blk) {
  constexpr __nv_fp8_interpretation_t kind = F == QFmt::kE5M2 ? __NV_E5M2 : __NV_E4M3;
  const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(scaled<T, F>(v[0], blk[0]), scaled<T, F>(v[1], blk[1])),
                                               __NV_SATFINITE, kind);
  const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(scaled<T, F>(v[2], blk[2]), scaled<T, F>(v[3], blk[3])),
                                               __NV_SATFINITE, kind);
  return lo | hi << 16;
}

// Where the scale of (row r, block c) of one batch goes: plain row-major (rows, cols) when sw_cols == 0,
// else the 128x4 tiles (sw_cols = the column-block count ceil(cols / 4)).
__device__ __forceinline__ int64_t scale_index(int64_t r, int64_t c, int64_t cols, int64_t sw_cols) {
  if (sw_cols == 0) return r * cols + c;
  return ((r / 128) * sw_cols + c / 4) * 512 + (r % 32) * 16 + (r % 128) / 32 * 4 + c % 4;
}

struct QuantArgs {
  int64_t batch, rows, k;   // rowwise: x (batch, rows, k); colwise: x (batch, k, rows)
  int64_t sf_batch;         // scales per batch (plain rows * k / V, or the padded 128x4 tiles)
  int64_t sw_cols;          // 0: plain scales; else ceil((k / V) / 4): the 128x4 tiles
  const float* gscale;      // NVFP4: null or the float32 global scale x is divided by
};

// x / the global scale (NVFP4 with one), else x: what the block's amax is taken of. The kernels apply it
// to max |x| once per block instead of to every x: div.full.f32 is an odd function of the dividend and
// monotone in its magnitude for a fixed divisor (a product with the divisor's reciprocal, one rounding;
// checked exhaustively over all 2^31 non-negative dividends for 11 divisors on an H100, 2026-11-24:
// scripts/div_full_monotone.cu), so max |x_i / g| = |max |x_i|| / g bit for bit, NaN included.
template <QFmt F>
__device__ __forceinline__ float pre(float v, const QuantArgs& a, float g) {
  if constexpr (QTraits<F>::kNv) return a.gscale ? ptx::div_full_f32(v, g) : v;
  else return v;
}

template <class T, QFmt F>
__global__ void __launch_bounds__(256) mx_quantize_kernel(const T* __restrict__ x, uint8_t* __restrict__ data,
                                                          uint8_t* __restrict__ scales, QuantArgs a) {
  using Tr = QTraits<F>;
  constexpr int V = Tr::V, kVec = 16 / sizeof(T);  // elements per 16-byte load
  constexpr int kWords = Tr::kFp4 ? V / 8 : V / 4;  // 32-bit words of output per block
  const float g = (Tr::kNv && a.gscale) ? *a.gscale : 1.0f;
  const int64_t cols = a.k / V, blocks = a.batch * a.rows * cols;
  for (int64_t b = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; b < blocks; b += int64_t(gridDim.x) * blockDim.x) {
    const uint4* src = reinterpret_cast<const uint4*>(x + b * V);
    float v[V];
#pragma unroll
    for (int i = 0; i < V / kVec; ++i) {
      const uint4 u = __ldg(src + i);
      const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
      for (int j = 0; j < kVec; ++j) v[i * kVec + j] = to_float(e[j]);
    }
    float amax = 0.0f;  // NaN if the block holds one (ptx::max_nan_f32): then block_scale ignores the value
#pragma unroll
    for (int j = 0; j < V; ++j) amax = ptx::max_nan_f32(amax, fabsf(v[j]));
    const float max_abs_x = amax;
    amax = pre<F>(amax, a, g);  // = max |x / g|: div.full is odd and monotone in x (see pre)
    const Block blk = block_scale<T, F>(amax, amax != amax, a.gscale != nullptr, g);
    uint32_t w[kWords];
    if constexpr (Tr::kFp4) {
      auto pack = [&](auto encode) {  // 8 codes per word, element 8i + j in nibble j
#pragma unroll
        for (int i = 0; i < kWords; ++i) {
          uint32_t word = 0;
#pragma unroll
          for (int j = 0; j < 8; ++j) word |= encode(v[8 * i + j]) << (4 * j);
          w[i] = word;
        }
      };
      if (numeric_block<F>(max_abs_x, blk)) {  // the common case: one uniform branch per block
        const Block m = numeric_multiplier<F>(blk);
        pack([&](float x) { return encode_e2m1_numeric<T, F>(x, m); });
      } else {
        pack([&](float x) { return encode_e2m1<T, F>(x, blk); });
      }
    } else {
      const Block b4[4] = {blk, blk, blk, blk};
#pragma unroll
      for (int i = 0; i < kWords; ++i) w[i] = encode4_fp8<T, F>(v + 4 * i, b4);
    }
    uint8_t* out = data + b * (kWords * 4);
    if constexpr (kWords == 2) {
      *reinterpret_cast<uint2*>(out) = make_uint2(w[0], w[1]);
    } else {
#pragma unroll
      for (int i = 0; i < kWords / 4; ++i)
        reinterpret_cast<uint4*>(out)[i] = make_uint4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
    }
    if (a.sw_cols == 0) {  // plain: block b's scale is scale b (no 64-bit divisions on the ALU pipe, which
      scales[b] = blk.byte;  // limited this kernel: Nsight Compute 2026-11-24)
    } else {
      const int64_t rb = b / cols, c = b - rb * cols, bi = rb / a.rows, r = rb - bi * a.rows;
      scales[bi * a.sf_batch + scale_index(r, c, cols, a.sw_cols)] = blk.byte;
    }
  }
}

// Colwise: x (batch, k, rows) with rows a multiple of kVec. A CTA of 256 threads takes one block of V rows
// (kb) of one batch and 32 * kVec columns: lane l the columns [c0 + l * kVec, + kVec), warp w the rows
// [w * V / 8, (w + 1) * V / 8) of the block. Each thread keeps its V / 8 rows x 16 bytes in registers;
// the per-column amax (and NaN flag) of the 8 warps are combined through shared memory; the conversion
// reads the registers, so x is read once (the two-pass version re-read it, and at 8192^2 the re-read
// missed L2: 24 % hit rate, 314 MB of DRAM traffic for 194 MB of data, Nsight Compute 2026-11-24).
// The max over the rows does not depend on their order, so the scales are the two-pass version's.
// e2m1 data is packed along the rows axis (the last, contiguous one): kVec / 2 bytes per row.
template <class T, QFmt F>
__global__ void __launch_bounds__(256) mx_quantize_colwise_kernel(const T* __restrict__ x, uint8_t* __restrict__ data,
                                                                  uint8_t* __restrict__ scales, QuantArgs a) {
  using Tr = QTraits<F>;
  constexpr int V = Tr::V, kVec = 16 / sizeof(T), kRows = V / 8;
  __shared__ float s_amax[8][kVec][32];  // NaN where the column's rows hold one (ptx::max_nan_f32)
  const float g = (Tr::kNv && a.gscale) ? *a.gscale : 1.0f;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t groups = a.rows / kVec, spans = (groups + 31) / 32, kb_count = a.k / V;
  const int64_t tiles = a.batch * kb_count * spans;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t span = t % spans, kb = (t / spans) % kb_count, bi = t / (spans * kb_count);
    const int64_t gi = span * 32 + lane;
    const bool active = gi < groups;
    const int64_t base = (bi * a.k + kb * V + warp * kRows) * a.rows + gi * kVec;  // this thread's first row
    uint4 raw[kRows];
    float amax[kVec];
#pragma unroll
    for (int j = 0; j < kVec; ++j) amax[j] = 0.0f;
    if (active) {
#pragma unroll
      for (int i = 0; i < kRows; ++i) raw[i] = __ldg(reinterpret_cast<const uint4*>(x + base + i * a.rows));
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        const T* e = reinterpret_cast<const T*>(&raw[i]);
#pragma unroll
        for (int j = 0; j < kVec; ++j) amax[j] = ptx::max_nan_f32(amax[j], fabsf(to_float(e[j])));
      }
    }
#pragma unroll
    for (int j = 0; j < kVec; ++j) s_amax[warp][j][lane] = amax[j];
    __syncthreads();
    Block blk[kVec];
    bool numeric = true;  // every block of this thread's columns converts as numbers (numeric_block)
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      float m = 0.0f;
#pragma unroll
      for (int w = 0; w < 8; ++w) m = ptx::max_nan_f32(m, s_amax[w][j][lane]);
      const float max_abs_x = m;
      m = pre<F>(m, a, g);  // = max |x / g| (see pre)
      blk[j] = block_scale<T, F>(m, m != m, a.gscale != nullptr, g);
      numeric = numeric && numeric_block<F>(max_abs_x, blk[j]);
    }
    __syncthreads();  // the shared arrays are rewritten by the next tile
    if (!active) continue;
    if (warp == 0) {
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const int64_t col = gi * kVec + j;
        scales[bi * a.sf_batch + (a.sw_cols ? scale_index(col, kb, kb_count, a.sw_cols) : kb * a.rows + col)] =
            blk[j].byte;
      }
    }
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const T* e = reinterpret_cast<const T*>(&raw[i]);
      float f[kVec];
#pragma unroll
      for (int j = 0; j < kVec; ++j) f[j] = to_float(e[j]);
      if constexpr (Tr::kFp4) {  // kVec / 2 bytes: element 2i in the low nibble
        uint32_t word = 0;
        if (numeric) {
#pragma unroll
          for (int j = 0; j < kVec; ++j) word |= encode_e2m1_numeric<T, F>(f[j], numeric_multiplier<F>(blk[j])) << (4 * j);
        } else {
#pragma unroll
          for (int j = 0; j < kVec; ++j) word |= encode_e2m1<T, F>(f[j], blk[j]) << (4 * j);
        }
        uint8_t* dst = data + (base + i * a.rows) / 2;
        if constexpr (kVec == 8) *reinterpret_cast<uint32_t*>(dst) = word;
        else *reinterpret_cast<uint16_t*>(dst) = static_cast<uint16_t>(word);
      } else {
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
