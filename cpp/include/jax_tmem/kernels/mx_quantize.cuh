// jax_tmem: the fused block-scale quantize kernels (issue 14): bf16 / f16 / f32 -> block-scaled data and
// scales along the quantized axis, in one read of x from memory. Plain CUDA (any arch). Formats (QFmt):
//   MXFP8: e4m3 or e5m2 data, UE8M0 scale per 32;   MXFP4: e2m1 data (packed two per byte, element 2i
//   in the low nibble: XLA's E(4) layout), UE8M0 per 32;   NVFP4: e2m1 data, UE4M3 scale per 16, x first
//   divided by the float32 global scale (when one is given).
//   rowwise: x (batch, rows, K), blocks along K (the last axis): one thread per block, NVFP4 two
//            (kRowBlocks; blocks are contiguous, 16-byte loads);
//   colwise: x (batch, K, cols), blocks along K (the second-to-last axis: the backward pass's layout):
//            16-bit x to e2m1 a thread per column pair and block, float32 x and MXFP8 a CTA per 32 rows x
//            32 * kVec columns with the amax combined across its warps in shared memory; x held in
//            registers between the amax and the conversion either way: one read of x
//            (kernels/mx_quantize_colwise.cuh);
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

#include "jax_tmem/fp8_convert.cuh"
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

// to_e2m1<false>(y) for y = x * 2^k with x a bfloat16 or float16 value (MXFP4's x / s), in fewer
// instructions: y is exact in float32 (<= 11 significant bits), and so is z = min(|y|, 6) * 2^-126 wherever
// |y| >= 2^-13 (below, y's code is 0 either way). From 1 on z is normal with y's mantissa and the exponent
// field of y minus 126, i.e. 1 (|y| in [1, 2)), 2 or 3; below 1 z is a subnormal whose bits are |y| * 2^23.
// In both, the code is z's bits rounded to nearest even at bit 22 (no select between the two ranges).
// Checked against to_e2m1<false> for every finite bf16 / f16 x times every 2^k, k in -160..127
// (scripts/e2m1_encoder_check.cc, 2026-11-26). Not for float32 x (z would round twice) nor NVFP4.
__device__ __forceinline__ uint32_t to_e2m1_scaled16(float y) {
  const uint32_t b = __float_as_uint(__fmul_rn(fminf(fabsf(y), 6.0f), 0x1p-126f));
  return ((b + 0x1fffffu + ((b >> 22) & 1u)) >> 22) | ((__float_as_uint(y) >> 28) & 0x8u);
}

// The same for a block of numeric_block, with m = numeric_multiplier(blk): bit for bit the code above.
template <class T, QFmt F>
__device__ __forceinline__ uint32_t encode_e2m1_numeric(float v, const Block& m) {
  const float y = v * m.f;
  if constexpr (!std::is_same_v<T, float> && !QTraits<F>::kNv) return to_e2m1_scaled16(y);  // MXFP4, 16-bit x
  else return to_e2m1<false>(kRoundScaled<T, F> ? round_to<T>(y) : y);
}

// The column-pair kernel's encoders (kernels/mx_quantize_colwise.cuh): the e2m1 magnitude code of one value
// in bits 0-2 with bits 3-7 zero (bits 8 and up may hold junk: only the low byte is stored), the sign put in
// by e2m1_pair_byte from x's bits. e2m1_mag is to_e2m1<false>'s magnitude: a < 1 takes the low byte of
// a + 2^22's bits (0x4a800000 + rint(2a): bits 3-22 are zero), a >= 1 its rounding to one mantissa bit with
// the exponent re-biased before the shift (b - 252 * 2^22: the same code, no subtraction after).
__device__ __forceinline__ uint32_t e2m1_mag(float y) {
  const float a = fminf(fabsf(y), 6.0f);
  const uint32_t b = __float_as_uint(a);
  const uint32_t lo = __float_as_uint(__fadd_rn(a, 4194304.0f));
  const uint32_t hi = (b + (0x1fffffu - 0x3f000000u) + ((b >> 22) & 1u)) >> 22;
  return a < 1.0f ? lo : hi;
}

// to_e2m1_scaled16's magnitude for yt = x * m * 2^-126 (m = numeric_multiplier's power of two, m >= 2^-23
// so that m * 2^-126 is exact): one multiply instead of two (min(|y|, 6) * 2^-126 = min(|yt|, 6 * 2^-126),
// both exact for a 16-bit x). Bits 3 and up are zero.
__device__ __forceinline__ uint32_t e2m1_mag_scaled16(float yt) {
  const uint32_t b = __float_as_uint(fminf(fabsf(yt), 0x1.8p-124f));
  return (b + 0x1fffffu + ((b >> 22) & 1u)) >> 22;
}

// The byte of two e2m1 codes, element 0 in the low nibble, from their magnitude codes (e2m1_mag) and the
// signs in bits 15 and 31 of s (the two 16-bit x values' sign bits, flipped where the multiplier is
// negative): the high half of (s & 0x80008000) * (2^8 + 2^20) holds bit 15 at bit 3 and bit 31 at bits 7 and
// 19, and mad.hi adds the codes (no bit overlaps in the low byte). Bits 8 and up: junk.
__device__ __forceinline__ uint32_t e2m1_pair_byte(uint32_t c0, uint32_t c1, uint32_t s) {
  return __umulhi(s & 0x80008000u, 0x00100100u) + (c0 + (c1 << 4));
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

// NVFP4's global scale g as the kernels apply it to a block's max |x| (x / g is what the amax is taken of):
// div.full.f32 is an odd function of the dividend and monotone in its magnitude for a fixed divisor (a
// product with the divisor's reciprocal, one rounding; checked exhaustively over all 2^31 non-negative
// dividends for 11 divisors on an H100, 2026-11-24: scripts/div_full_monotone.cu), so max |x_i / g| =
// |max |x_i| / g| bit for bit, NaN included (for either sign of g); and for 2^-126 <= |g| <= 2^126 div.full.f32(v, g) is v *
// MUFU.RCP(g) for every v (its SASS, CUDA 13.0: ptx::rcp_approx_ftz), so the reciprocal is taken once
// per thread, not once per block.
struct GScale {
  float g = 1.0f, r = 1.0f;  // g and, where rcp, its reciprocal
  bool on = false, rcp = false;
};

template <QFmt F>
__device__ __forceinline__ GScale global_scale(const QuantArgs& a) {
  GScale s;
  if constexpr (QTraits<F>::kNv) {
    if (a.gscale) {
      s.on = true;
      s.g = *a.gscale;
      const float d = fabsf(s.g);
      s.rcp = d >= 0x1p-126f && d <= 0x1p126f;
      s.r = ptx::rcp_approx_ftz(s.g);
    }
  }
  return s;
}

// max |x / g| = |max |x| / g| (NVFP4 with a global scale), else max |x|. (The magnitude: a negative g made
// every kernel's NVFP4 scales negative, where JAX's are of |x / g|, until 2026-11-27.)
template <QFmt F>
__device__ __forceinline__ float pre(float v, const GScale& s) {
  if constexpr (QTraits<F>::kNv) return !s.on ? v : fabsf(s.rcp ? v * s.r : ptx::div_full_f32(v, s.g));
  else return v;
}

// max |x| over 16-byte words of x, NaN if any is: 16-bit types two at a time (bf16x2 / f16x2 max.NaN; |x|
// and the max are exact, so this is the float32 max of the converted values), float32 one at a time.
template <class T>
struct AbsMax {
  using V2 = std::conditional_t<std::is_same_v<T, __nv_bfloat16>, __nv_bfloat162, __half2>;
  V2 m2;
  float m = 0.0f;
  __device__ __forceinline__ AbsMax() {
    if constexpr (!std::is_same_v<T, float>) m2 = __habs2(V2{});  // +0
  }
  __device__ __forceinline__ void add(const uint4& u) {
    if constexpr (std::is_same_v<T, float>) {
      const float* e = reinterpret_cast<const float*>(&u);
#pragma unroll
      for (int j = 0; j < 4; ++j) m = ptx::max_nan_f32(m, fabsf(e[j]));
    } else {
      const V2* e = reinterpret_cast<const V2*>(&u);
#pragma unroll
      for (int j = 0; j < 4; ++j) m2 = __hmax2_nan(m2, __habs2(e[j]));
    }
  }
  __device__ __forceinline__ float value() const {
    if constexpr (std::is_same_v<T, float>) return m;
    else return ptx::max_nan_f32(to_float<T>(m2.x), to_float<T>(m2.y));
  }
};

// Rowwise blocks per thread: NVFP4's 16-element blocks two at a time (both blocks' loads in flight before
// either is converted, and the per-thread work of the loop shared; one block per thread ran at 75 % of the
// copy bandwidth at 4096^2 against MXFP4's 81 % with 32 elements per thread, 2026-11-26), else one.
template <QFmt F>
inline constexpr int kRowBlocks = QTraits<F>::kNv ? 2 : 1;

// kDq (MXFP8, rowwise): the quantize-dequantize: `data` receives dequantize(quantize(x)) as bf16 (x's shape:
// each block's fp8 codes times its scale, fp8x2_scaled_to_bf16x2, what XLA's dequantize to bf16 computes),
// the scales as without it. The bf16 GEMM of two such operands is the MXFP8 product on a GPU whose tensor
// cores take no MX operands (sm_90a), with one pass over x instead of a quantize and a dequantize pass.
template <class T, QFmt F, bool kDq = false>
__global__ void __launch_bounds__(256) mx_quantize_kernel(const T* __restrict__ x, uint8_t* __restrict__ data,
                                                          uint8_t* __restrict__ scales, QuantArgs a) {
  using Tr = QTraits<F>;
  static_assert(!kDq || !Tr::kFp4, "the quantize-dequantize is MXFP8's");
  constexpr int V = Tr::V, kVec = 16 / sizeof(T);  // elements per 16-byte load
  constexpr int kWords = Tr::kFp4 ? V / 8 : V / 4;  // 32-bit words of output per block
  constexpr int P = kRowBlocks<F>, kLoads = V / kVec;
  const GScale gs = global_scale<F>(a);
  const int64_t cols = a.k / V, blocks = a.batch * a.rows * cols, groups = (blocks + P - 1) / P;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < groups; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b0 = t * P;
    const bool whole = b0 + P <= blocks;  // all P blocks exist (only the last thread may lack some)
    const uint4* src = reinterpret_cast<const uint4*>(x + b0 * V);
    uint4 raw[P][kLoads];
#pragma unroll
    for (int p = 0; p < P; ++p)
#pragma unroll
      for (int i = 0; i < kLoads; ++i)
        if (p == 0 || whole) raw[p][i] = __ldg(src + p * kLoads + i);
    uint32_t w[P][kWords];
    uint8_t sbyte[P];
#pragma unroll
    for (int p = 0; p < P; ++p) {
      if (p > 0 && !whole) break;
      float v[V];
      AbsMax<T> am;  // NaN if the block holds one: then block_scale ignores the value
#pragma unroll
      for (int i = 0; i < kLoads; ++i) {
        am.add(raw[p][i]);
        const T* e = reinterpret_cast<const T*>(&raw[p][i]);
#pragma unroll
        for (int j = 0; j < kVec; ++j) v[i * kVec + j] = to_float(e[j]);
      }
      const float max_abs_x = am.value();
      const float amax = pre<F>(max_abs_x, gs);  // = max |x / g| (see GScale)
      const Block blk = block_scale<T, F>(amax, amax != amax, gs.on, gs.g);
      sbyte[p] = blk.byte;
      if constexpr (Tr::kFp4) {
        auto pack = [&](auto encode) {  // 8 codes per word, element 8i + j in nibble j
#pragma unroll
          for (int i = 0; i < kWords; ++i) {
            uint32_t word = 0;
#pragma unroll
            for (int j = 0; j < 8; ++j) word |= encode(v[8 * i + j]) << (4 * j);
            w[p][i] = word;
          }
        };
        const bool numeric = numeric_block<F>(max_abs_x, blk);
        const Block m = numeric ? numeric_multiplier<F>(blk) : blk;
        if (!std::is_same_v<T, float> && numeric && (Tr::kNv || m.f >= 0x1p-23f)) {
          // 16-bit x (the common case): the column-pair kernel's encoders, two codes and their signs per
          // 32-bit word of x (e2m1_pair_byte), four such bytes per word of output (byte permutes). MXFP4's
          // multiplier takes 2^-126 in (e2m1_mag_scaled16: exact for m >= 2^-23, i.e. max |x| below ~6 * 2^22).
          const float mm = Tr::kNv ? m.f : m.f * 0x1p-126f;
          const uint32_t neg = m.f < 0.0f ? 0x80008000u : 0u;  // (NVFP4 with a negative global scale)
#pragma unroll
          for (int i = 0; i < kWords; ++i) {  // word i: the 8 elements of raw[p][i]
            const uint32_t* rw = reinterpret_cast<const uint32_t*>(&raw[p][i]);
            uint32_t b[4];
#pragma unroll
            for (int q = 0; q < 4; ++q) {
              const float f0 = v[8 * i + 2 * q], f1 = v[8 * i + 2 * q + 1];
              const uint32_t c0 = Tr::kNv ? e2m1_mag(f0 * mm) : e2m1_mag_scaled16(f0 * mm);
              const uint32_t c1 = Tr::kNv ? e2m1_mag(f1 * mm) : e2m1_mag_scaled16(f1 * mm);
              b[q] = e2m1_pair_byte(c0, c1, rw[q] ^ neg);
            }
            w[p][i] = __byte_perm(__byte_perm(b[0], b[1], 0x0040), __byte_perm(b[2], b[3], 0x0040), 0x5410);
          }
        } else if (numeric) {  // float32 x, or MXFP4 blocks of a huge max |x|
          pack([&](float x) { return encode_e2m1_numeric<T, F>(x, m); });
        } else {
          pack([&](float x) { return encode_e2m1<T, F>(x, blk); });
        }
      } else {
        const Block b4[4] = {blk, blk, blk, blk};
#pragma unroll
        for (int i = 0; i < kWords; ++i) w[p][i] = encode4_fp8<T, F>(v + 4 * i, b4);
      }
    }
    uint8_t* out = data + b0 * (kWords * 4);
    if constexpr (kDq) {  // 32 bf16 values (64 bytes) per block instead of its 32 codes
      static_assert(P == 1 && kWords % 2 == 0, "");
      constexpr DType D = F == QFmt::kE5M2 ? DType::kE5M2 : DType::kE4M3;
      const float s = ue8m0_to_float(sbyte[0]);
      uint32_t o[2 * kWords];
#pragma unroll
      for (int i = 0; i < kWords; ++i) {
        o[2 * i] = fp8x2_scaled_to_bf16x2<D>(w[0][i], s);
        o[2 * i + 1] = fp8x2_scaled_to_bf16x2<D>(w[0][i] >> 16, s);
      }
      uint4* dq = reinterpret_cast<uint4*>(data + b0 * V * 2);
#pragma unroll
      for (int i = 0; i < kWords / 2; ++i) dq[i] = make_uint4(o[4 * i], o[4 * i + 1], o[4 * i + 2], o[4 * i + 3]);
    } else if constexpr (P * kWords == 2) {
      *reinterpret_cast<uint2*>(out) = make_uint2(w[0][0], w[0][1]);
    } else if constexpr (P == 2 && kWords == 2) {  // NVFP4: 16 bytes for two blocks, 8 for a lone last one
      if (whole) *reinterpret_cast<uint4*>(out) = make_uint4(w[0][0], w[0][1], w[1][0], w[1][1]);
      else *reinterpret_cast<uint2*>(out) = make_uint2(w[0][0], w[0][1]);
    } else {
      static_assert(P == 1, "");
#pragma unroll
      for (int i = 0; i < kWords / 4; ++i)
        reinterpret_cast<uint4*>(out)[i] = make_uint4(w[0][4 * i], w[0][4 * i + 1], w[0][4 * i + 2], w[0][4 * i + 3]);
    }
#pragma unroll
    for (int p = 0; p < P; ++p) {
      if (p > 0 && !whole) break;
      const int64_t b = b0 + p;
      if (a.sw_cols == 0) {  // plain: block b's scale is scale b (no 64-bit divisions on the ALU pipe, which
        scales[b] = sbyte[p];  // limited this kernel: Nsight Compute 2026-11-24)
      } else {
        const int64_t rb = b / cols, c = b - rb * cols, bi = rb / a.rows, r = rb - bi * a.rows;
        scales[bi * a.sf_batch + scale_index(r, c, cols, a.sw_cols)] = sbyte[p];
      }
    }
  }
}

}  // namespace jax_tmem::quant
