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

// d act / dx at x, as JAX differentiates jax_tmem's activations (relu: 0 at x <= 0 and at NaN, as jax.nn.relu's
// gradient; gelu_tanh: jax.nn.gelu(approximate=True)).
JT_HD float apply_activation_grad(float x, Activation act) {
  switch (act) {
    case Activation::kRelu: return x > 0.0f ? 1.0f : 0.0f;
    case Activation::kGelu:
      return 0.5f * (1.0f + erff(x * 0.70710678118654752f)) + x * 0.39894228040143268f * expf(-0.5f * x * x);
    case Activation::kGeluTanh: {
      const float kBeta = 0.79788456080286536f, kC = 0.044715f;
      const float t = tanhf(kBeta * (x + kC * x * x * x));
      return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kBeta * (1.0f + 3.0f * kC * x * x);
    }
    case Activation::kSilu: {
      const float sg = 1.0f / (1.0f + expf(-x));
      return sg * (1.0f + x * (1.0f - sg));
    }
    default: return 1.0f;
  }
}

}  // namespace jax_tmem
