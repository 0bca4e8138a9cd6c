// jax_tmem: host launch of the fused MX quantize kernel (kernels/mx_quantize.cuh), for every built arch.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "jax_tmem/dtypes.h"
#include "jax_tmem/kernels/mx_quantize.cuh"

namespace jax_tmem {

// x: rows x k (k a multiple of 32, the buffers 16-byte aligned); "" on success, else why nothing ran.
std::string mx_quantize_launch(const void* x, DType in, void* data, DType out, void* scales, int64_t rows, int64_t k,
                               cudaStream_t stream) {
  if (k % 32) return "the quantized axis (" + std::to_string(k) + ") must be a multiple of 32";
  const int64_t blocks = rows * (k / 32);
  if (blocks == 0) return "";
  const int64_t ctas = std::min<int64_t>((blocks + 255) / 256, int64_t(1) << 20);  // grid-stride beyond
  const bool e5m2 = out == DType::kE5M2;
  if (out != DType::kE4M3 && out != DType::kE5M2) return std::string("data must be e4m3 or e5m2, got ") + dtype_name(out);
  auto go = [&](auto tag) {
    using T = decltype(tag);
    const T* xp = static_cast<const T*>(x);
    auto* d = static_cast<uint8_t*>(data);
    auto* s = static_cast<uint8_t*>(scales);
    if (e5m2) quant::mx_quantize_kernel<T, true><<<static_cast<unsigned>(ctas), 256, 0, stream>>>(xp, d, s, blocks);
    else quant::mx_quantize_kernel<T, false><<<static_cast<unsigned>(ctas), 256, 0, stream>>>(xp, d, s, blocks);
  };
  if (in == DType::kBF16) go(__nv_bfloat16{});
  else if (in == DType::kF16) go(__half{});
  else if (in == DType::kF32) go(float{});
  else return std::string("x must be bfloat16, float16 or float32, got ") + dtype_name(in);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string("quantize launch failed: ") + cudaGetErrorString(e);
}

}  // namespace jax_tmem
