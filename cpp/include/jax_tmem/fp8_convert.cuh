// jax_tmem: the MXFP8 dequantization on chip, shared by the kernels that produce bf16 from fp8 data and
// UE8M0 block scales (the sm_90a widened block-scaled GEMM, kernels/sm90_mx_widen.cuh; the fused
// quantize-dequantize, kernels/mx_quantize.cuh), the scale loaders of kernels/sm90_block_scaled.cuh, and the
// decode kernel's exact widening of an fp8 weight for 16-bit activations (kernels/dense_decode.cuh kMix).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "jax_tmem/dtypes.h"

namespace jax_tmem {

// UE8M0 -> f32 as the CPU reference and XLA read it (host_convert.h; ml_dtypes' float8_e8m0fnu):
// 2^(e - 127), 0 -> 2^-127 (a float32 subnormal), all-ones NaN.
__device__ __forceinline__ float ue8m0_to_float(uint32_t e) {
  return __uint_as_float(e == 0 ? 0x00400000u : e == 255 ? 0x7fc00000u : e << 23);
}

// Two fp8 values (the low 16 bits of `v`, element 0 in the low byte) as f16x2: exact (every e4m3 / e5m2 value is
// an f16 one; NaN stays NaN).
template <DType T>
__device__ __forceinline__ __half2_raw fp8x2_to_half2(uint32_t v) {
  static_assert(T == DType::kE4M3 || T == DType::kE5M2, "fp8 is e4m3 or e5m2");
  return __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(v & 0xffffu),
                                    T == DType::kE4M3 ? __NV_E4M3 : __NV_E5M2);
}

// The same two values widened to the 16-bit type OUT (bf16 / f16) x2, exactly (fp8 -> f16 -> f32 -> bf16 loses
// nothing): a 16-bit GEMM of the widened operand computes the fp8 one's product (kernels/dense_decode.cuh kMix).
template <DType T, DType OUT>
__device__ __forceinline__ uint32_t fp8x2_widen(uint32_t v) {
  const __half2_raw h = fp8x2_to_half2<T>(v);
  if constexpr (OUT == DType::kF16) {
    return uint32_t(h.x) | (uint32_t(h.y) << 16);
  } else {
    static_assert(OUT == DType::kBF16, "widened to bf16 or f16");
    const float2 f = __half22float2(__half2(h));
    const __nv_bfloat162 b = __floats2bfloat162_rn(f.x, f.y);
    return *reinterpret_cast<const uint32_t*>(&b);
  }
}

// Two fp8 values times the f32 scale `s`, rounded to bf16x2 (element 0 in the low half): fp8 -> f16 -> f32 are
// exact, then one float32 product and one round to nearest even, which is what XLA's dequantize (data as f32
// times the scale, converted to bf16) computes; for an MX block scale (a power of two) the result is exact unless
// it leaves bf16's range.
template <DType T>
__device__ __forceinline__ uint32_t fp8x2_scaled_to_bf16x2(uint32_t v, float s) {
  static_assert(T == DType::kE4M3 || T == DType::kE5M2, "MXFP8 data is e4m3 or e5m2");
  const float2 f = __half22float2(__half2(fp8x2_to_half2<T>(v)));
  const __nv_bfloat162 b = __floats2bfloat162_rn(__fmul_rn(f.x, s), __fmul_rn(f.y, s));
  return *reinterpret_cast<const uint32_t*>(&b);
}

}  // namespace jax_tmem
