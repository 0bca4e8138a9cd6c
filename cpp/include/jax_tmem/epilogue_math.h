// jax_tmem: epilogue math shared by the CPU reference handler and the GPU kernels, so both apply
// bias, activation and accumulation in exactly the same order:
//   y = act(alpha * acc + bias) + c
#pragma once

#include <cmath>

#include "jax_tmem/gemm_problem.h"

#if defined(__CUDACC__)
#define JT_HD __host__ __device__ __forceinline__
#else
#define JT_HD inline
#endif

namespace jax_tmem {

JT_HD float apply_activation(float x, Activation act) {
  switch (act) {
    case Activation::kRelu: return x > 0.0f || x != x ? x : 0.0f;  // NaN stays NaN, as jax.nn.relu (max(x, 0))
    case Activation::kGelu: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case Activation::kGeluTanh: {
      const float kBeta = 0.79788456080286536f;  // sqrt(2 / pi)
      return 0.5f * x * (1.0f + tanhf(kBeta * (x + 0.044715f * x * x * x)));
    }
    case Activation::kSilu: return x / (1.0f + expf(-x));
    default: return x;
  }
}

}  // namespace jax_tmem
