// jax_tmem: host launch of the fused MX quantize kernels (kernels/mx_quantize.cuh), for every built arch.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "jax_tmem/dtypes.h"
#include "jax_tmem/kernels/mx_quantize.cuh"
#include "jax_tmem/launch.h"

namespace jax_tmem {

std::string mx_quantize_launch(const QuantizeLaunch& q, cudaStream_t stream) {
  if (q.k % 32) return "the quantized axis (" + std::to_string(q.k) + ") must be a multiple of 32";
  if (q.out != DType::kE4M3 && q.out != DType::kE5M2)
    return std::string("data must be e4m3 or e5m2, got ") + dtype_name(q.out);
  const int64_t vec = q.in == DType::kF32 ? 4 : 8;
  if (q.colwise && q.rows % vec)
    return "colwise quantization needs the last axis (" + std::to_string(q.rows) + ") a multiple of " + std::to_string(vec);
  quant::QuantArgs a{q.batch, q.rows, q.k, 0, 0};
  const int64_t cols = q.k / 32;
  if (q.swizzled) {
    a.sw_cols = (cols + 3) / 4;
    a.sf_batch = (q.rows + 127) / 128 * 128 * a.sw_cols * 4;
  } else {
    a.sf_batch = q.rows * cols;
  }
  if (a.sf_batch * q.batch != q.scale_count)
    return "scales have " + std::to_string(q.scale_count) + " elements, expected " + std::to_string(a.sf_batch * q.batch);
  const int64_t items = q.batch * cols * (q.colwise ? q.rows / vec : q.rows);
  if (items == 0) return "";
  // The 128x4 tiles' padding is zero (jax_tmem.swizzle_scales): clear the whole buffer, the kernel fills the rest.
  if (q.swizzled && cudaMemsetAsync(q.scales, 0, static_cast<size_t>(q.scale_count), stream) != cudaSuccess)
    return "clearing the swizzled scales failed";
  const unsigned ctas = static_cast<unsigned>(std::min<int64_t>((items + 255) / 256, int64_t(1) << 20));
  auto go = [&](auto tag) {
    using T = decltype(tag);
    const T* xp = static_cast<const T*>(q.x);
    auto* d = static_cast<uint8_t*>(q.data);
    auto* s = static_cast<uint8_t*>(q.scales);
    const bool e5 = q.out == DType::kE5M2;
    if (q.colwise) {
      if (e5) quant::mx_quantize_colwise_kernel<T, true><<<ctas, 256, 0, stream>>>(xp, d, s, a);
      else quant::mx_quantize_colwise_kernel<T, false><<<ctas, 256, 0, stream>>>(xp, d, s, a);
    } else {
      if (e5) quant::mx_quantize_kernel<T, true><<<ctas, 256, 0, stream>>>(xp, d, s, a);
      else quant::mx_quantize_kernel<T, false><<<ctas, 256, 0, stream>>>(xp, d, s, a);
    }
  };
  if (q.in == DType::kBF16) go(__nv_bfloat16{});
  else if (q.in == DType::kF16) go(__half{});
  else if (q.in == DType::kF32) go(float{});
  else return std::string("x must be bfloat16, float16 or float32, got ") + dtype_name(q.in);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string("quantize launch failed: ") + cudaGetErrorString(e);
}

}  // namespace jax_tmem
