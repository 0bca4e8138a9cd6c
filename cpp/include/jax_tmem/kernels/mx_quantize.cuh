// jax_tmem: the fused MX quantize kernels (issue 14): bf16 / f16 / f32 -> e4m3 or e5m2 data and UE8M0
// scales per 32 elements along the quantized axis, in one read of x from memory. Plain CUDA (any arch).
//   rowwise: x (batch, rows, K), blocks along K (the last axis): one thread per 32-element block (blocks
//            are contiguous, 16-byte loads);
//   colwise: x (batch, K, cols), blocks along K (the second-to-last axis: the backward pass's layout):
//            one thread per 32 rows x kVec columns (16 bytes per row), amax in one pass over the 32
//            rows and the conversion in a second (the re-read hits the caches);
// scales plain (the quantized axis in place: (batch, rows, K / 32) or (batch, K / 32, cols)) or in the
// 128x4 tiles of jax_tmem.swizzle_scales with the non-quantized axis as rows (GemmProblem::sf_index;
// the launcher zeroes the padding first). The arithmetic follows JAX's quantizer step by
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

struct Block {   // one 32-element block's scale: its byte and 1 / its value
  uint8_t e8;
  float inv;
};

// The block's scale from amax (XLA's compiled quantizer, above) as x's type T.
template <class T, bool kE5M2>
__device__ __forceinline__ Block block_scale(float amax, bool nan) {
  constexpr float kMax = kE5M2 ? 57344.0f : 448.0f;
  const float tiny = std::is_same_v<T, __half> ? 3.0517578125e-05f : 5.877471754111438e-39f;  // 2^-15, 2^-127
  const float q = nan ? __uint_as_float(0x7fc00000u) : round_to<T>(amax * round_to<T>(1.0f / kMax));
  const uint32_t bits = __float_as_uint(q), ex = bits >> 23, man = bits & 0x7fffffu;
  const bool up = man > 0 && ex != 0xfeu && !(ex == 0 && man <= 0x400000u);
  const uint8_t e8 = static_cast<uint8_t>(up ? ex + 1 : ex);
  float sv = __uint_as_float(static_cast<uint32_t>(e8) << 23);
  sv = round_to<T>(sv == 0.0f ? tiny : sv);
  // sv is a power of two (or 0 / inf for f16): x * (1 / sv) rounds exactly as x / sv.
  return {e8, __frcp_rn(sv)};
}

template <class T, bool kE5M2>
__device__ __forceinline__ uint32_t to_fp8(float v, float inv) {
  constexpr float kMax = kE5M2 ? 57344.0f : 448.0f;
  float s = round_to<T>(v * inv);
  s = s > kMax ? kMax : (s < -kMax ? -kMax : s);  // NaN compares false and stays NaN
  return __nv_cvt_float_to_fp8(s, __NV_SATFINITE, kE5M2 ? __NV_E5M2 : __NV_E4M3);
}

// Where the scale of (row r, block c) of one batch goes: plain row-major (rows, cols) when sw_cols == 0,
// else the 128x4 tiles (sw_cols = the column-block count ceil(cols / 4)).
__device__ __forceinline__ int64_t scale_index(int64_t r, int64_t c, int64_t cols, int64_t sw_cols) {
  if (sw_cols == 0) return r * cols + c;
  return ((r / 128) * sw_cols + c / 4) * 512 + (r % 32) * 16 + (r % 128) / 32 * 4 + c % 4;
}

struct QuantArgs {
  int64_t batch, rows, k;   // rowwise: x (batch, rows, k); colwise: x (batch, k, rows)
  int64_t sf_batch;         // scales per batch (plain rows * k / 32, or the padded 128x4 tiles)
  int64_t sw_cols;          // 0: plain scales; else ceil((k / 32) / 4): the 128x4 tiles
};

template <class T, bool kE5M2>
__global__ void __launch_bounds__(256) mx_quantize_kernel(const T* __restrict__ x, uint8_t* __restrict__ data,
                                                          uint8_t* __restrict__ scales, QuantArgs a) {
  constexpr int kVec = 16 / sizeof(T);  // elements per 16-byte load
  const int64_t cols = a.k / 32, blocks = a.batch * a.rows * cols;
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
    const Block blk = block_scale<T, kE5M2>(amax, nan);
    uint32_t w[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      uint32_t word = 0;
#pragma unroll
      for (int j = 0; j < 4; ++j) word |= to_fp8<T, kE5M2>(v[4 * i + j], blk.inv) << (8 * j);
      w[i] = word;
    }
    uint4* dst = reinterpret_cast<uint4*>(data + b * 32);
    dst[0] = make_uint4(w[0], w[1], w[2], w[3]);
    dst[1] = make_uint4(w[4], w[5], w[6], w[7]);
    const int64_t bi = b / (a.rows * cols), r = (b / cols) % a.rows, c = b % cols;
    scales[bi * a.sf_batch + scale_index(r, c, cols, a.sw_cols)] = blk.e8;
  }
}

// Colwise: x (batch, k, rows) with rows a multiple of kVec; thread = (batch, 32-row block, kVec columns).
template <class T, bool kE5M2>
__global__ void __launch_bounds__(256) mx_quantize_colwise_kernel(const T* __restrict__ x, uint8_t* __restrict__ data,
                                                                  uint8_t* __restrict__ scales, QuantArgs a) {
  constexpr int kVec = 16 / sizeof(T);
  const int64_t groups = a.rows / kVec, kb_count = a.k / 32, items = a.batch * kb_count * groups;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < items; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t g = t % groups, kb = (t / groups) % kb_count, bi = t / (groups * kb_count);
    const int64_t base = (bi * a.k + kb * 32) * a.rows + g * kVec;  // element (row kb*32, column g*kVec)
    float amax[kVec];
    bool nan[kVec];
#pragma unroll
    for (int j = 0; j < kVec; ++j) amax[j] = 0.0f, nan[j] = false;
#pragma unroll 4
    for (int i = 0; i < 32; ++i) {
      const uint4 u = __ldg(reinterpret_cast<const uint4*>(x + base + i * a.rows));
      const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const float f = to_float(e[j]);
        amax[j] = fmaxf(amax[j], fabsf(f));
        nan[j] |= f != f;
      }
    }
    Block blk[kVec];
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      blk[j] = block_scale<T, kE5M2>(amax[j], nan[j]);
      const int64_t col = g * kVec + j;
      scales[bi * a.sf_batch + (a.sw_cols ? scale_index(col, kb, kb_count, a.sw_cols) : kb * a.rows + col)] = blk[j].e8;
    }
#pragma unroll 4
    for (int i = 0; i < 32; ++i) {
      const uint4 u = __ldg(reinterpret_cast<const uint4*>(x + base + i * a.rows));
      const T* e = reinterpret_cast<const T*>(&u);
      uint32_t w[kVec / 4];
#pragma unroll
      for (int q = 0; q < kVec / 4; ++q) {
        uint32_t word = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) word |= to_fp8<T, kE5M2>(to_float(e[4 * q + j]), blk[4 * q + j].inv) << (8 * j);
        w[q] = word;
      }
      uint8_t* dst = data + base + i * a.rows;
      if constexpr (kVec == 8) *reinterpret_cast<uint2*>(dst) = make_uint2(w[0], w[1]);
      else *reinterpret_cast<uint32_t*>(dst) = w[0];
    }
  }
}

}  // namespace jax_tmem::quant
