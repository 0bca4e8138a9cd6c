// jax_tmem: the fused MX quantize kernel (issue 14): x (rows, K) in bf16 / f16 / f32 -> data (rows, K) in
// e4m3 or e5m2 and UE8M0 scales (rows, K / 32), plain layout, in one read of x. Plain CUDA (any arch).
//
// One thread per 32-element block (blocks are contiguous in a row-major (rows, K) array, so block b is
// elements [32 b, 32 b + 32) and its scale is scales[b]). The arithmetic follows JAX's quantizer step by
// step, each result rounded to x's type as XLA rounds its elementwise ops (jax_tmem/ops/block_scale.py):
//   q     = amax(|x|) * r, r = 1 / max(data type) rounded to x's type (NaN if the block holds a NaN):
//           XLA's algebraic simplifier turns the quantizer's division by the constant max into this
//           multiplication (seen in the H200's compiled HLO, 2026-11-23: bf16 `multiply(amax, 0.002228)`),
//           and for bf16 / f16 the two differ in a few hundred amax values (tests/test_block_scale.py
//           plants them)
//   e     = the UE8M0 byte of q rounded UP to a power of two (an all-ones exponent wraps to 0, as JAX's
//           uint8 cast does)
//   s     = 2^(e - 127) as x's type (0 read as the smallest positive: 2^-127, f16 2^-15)
//   data  = convert(clip(x / s, -max, max)) with round-to-nearest-even; NaN stays NaN.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

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

template <class T, bool kE5M2>
__global__ void __launch_bounds__(256) mx_quantize_kernel(const T* __restrict__ x, uint8_t* __restrict__ data,
                                                          uint8_t* __restrict__ scales, int64_t blocks) {
  constexpr float kMax = kE5M2 ? 57344.0f : 448.0f;
  constexpr int kVec = 16 / sizeof(T);  // elements per 16-byte load
  const float tiny = std::is_same_v<T, __half> ? 3.0517578125e-05f : 5.877471754111438e-39f;  // 2^-15, 2^-127
  for (int64_t b = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; b < blocks; b += int64_t(gridDim.x) * blockDim.x) {
    const uint4* src = reinterpret_cast<const uint4*>(x + b * 32);
    float v[32];
#pragma unroll
    for (int i = 0; i < 32 / kVec; ++i) {
      const uint4 u = __ldg(src + i);
      const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
      for (int j = 0; j < kVec; ++j) v[i * kVec + j] = to_float(e[j]);
    }
    float amax = 0.0f;
    bool nan = false;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      amax = fmaxf(amax, fabsf(v[j]));
      nan |= v[j] != v[j];
    }
    const float q = nan ? __uint_as_float(0x7fc00000u) : round_to<T>(amax * round_to<T>(1.0f / kMax));
    const uint32_t bits = __float_as_uint(q), ex = bits >> 23, man = bits & 0x7fffffu;
    const bool up = man > 0 && ex != 0xfeu && !(ex == 0 && man <= 0x400000u);
    const uint8_t e8 = static_cast<uint8_t>(up ? ex + 1 : ex);
    float sv = __uint_as_float(static_cast<uint32_t>(e8) << 23);
    sv = round_to<T>(sv == 0.0f ? tiny : sv);
    // sv is a power of two (or 0 / inf for f16): x * (1 / sv) rounds exactly as x / sv.
    const float inv = __frcp_rn(sv);
    uint32_t w[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      uint32_t word = 0;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float s = round_to<T>(v[4 * i + j] * inv);
        s = s > kMax ? kMax : (s < -kMax ? -kMax : s);  // NaN compares false and stays NaN
        const __nv_fp8_storage_t f8 = __nv_cvt_float_to_fp8(s, __NV_SATFINITE, kE5M2 ? __NV_E5M2 : __NV_E4M3);
        word |= static_cast<uint32_t>(f8) << (8 * j);
      }
      w[i] = word;
    }
    uint4* dst = reinterpret_cast<uint4*>(data + b * 32);
    dst[0] = make_uint4(w[0], w[1], w[2], w[3]);
    dst[1] = make_uint4(w[4], w[5], w[6], w[7]);
    scales[b] = e8;
  }
}

}  // namespace jax_tmem::quant
