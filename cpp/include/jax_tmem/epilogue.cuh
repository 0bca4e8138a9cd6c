// jax_tmem: epilogue helpers shared by the GPU kernels: y = act(alpha * acc + bias) + c, cast, store.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "jax_tmem/epilogue_math.h"
#include "jax_tmem/gemm_problem.h"

namespace jax_tmem::epilogue {

struct Args {
  void* out;
  const void* c;       // same dtype/shape as out, or null
  const float* bias;   // [n] or null
  float alpha;
  int32_t activation;  // Activation
  int32_t out_type;    // DType: kF32, kBF16, kF16
};

__device__ __forceinline__ float load_out(const void* base, int32_t t, int64_t idx) {
  if (t == static_cast<int32_t>(DType::kF32)) return static_cast<const float*>(base)[idx];
  if (t == static_cast<int32_t>(DType::kBF16)) return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[idx]);
  return __half2float(static_cast<const __half*>(base)[idx]);
}

// Applies the activation to every accumulator register. One uniform switch per tile, each case a
// straight unrolled loop: the epilogue stays small in the instruction cache.
template <int N>
__device__ __forceinline__ void activate(float (&v)[N], int32_t activation) {
  switch (static_cast<Activation>(activation)) {
    case Activation::kRelu:
#pragma unroll
      for (int i = 0; i < N; ++i) v[i] = apply_activation(v[i], Activation::kRelu);
      break;
    case Activation::kGelu:
#pragma unroll
      for (int i = 0; i < N; ++i) v[i] = apply_activation(v[i], Activation::kGelu);
      break;
    case Activation::kGeluTanh:
#pragma unroll
      for (int i = 0; i < N; ++i) v[i] = apply_activation(v[i], Activation::kGeluTanh);
      break;
    case Activation::kSilu:
#pragma unroll
      for (int i = 0; i < N; ++i) v[i] = apply_activation(v[i], Activation::kSilu);
      break;
    default:
      break;
  }
}

// Packs two floats into the 32-bit word of two 16-bit outputs.
template <typename T>
__device__ __forceinline__ uint32_t pack2(float a, float b);
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float a, float b) {
  __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<uint32_t*>(&h);
}
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float a, float b) {
  __half2 h = __floats2half2_rn(a, b);
  return *reinterpret_cast<uint32_t*>(&h);
}

}  // namespace jax_tmem::epilogue
