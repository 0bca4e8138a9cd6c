// jax_tmem: host launch of the fused block-scale quantize kernels (MXFP8, MXFP4, NVFP4) (kernels/mx_quantize.cuh,
// mx_quantize_colwise.cuh), for every built arch.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <type_traits>

#include "jax_tmem/dtypes.h"
#include "jax_tmem/kernels/mx_quantize.cuh"
#include "jax_tmem/kernels/mx_quantize_colwise.cuh"
#include "jax_tmem/launch.h"

namespace jax_tmem {
namespace {

// Per-device occupancy of the prefetching column-pair kernel (resident_ctas), one cache per instantiation.
template <class T, quant::QFmt F>
struct PairPrefetchSlots {
  static inline std::atomic<int> ctas[kMaxDevices];
};

}  // namespace

std::string mx_quantize_launch(const QuantizeLaunch& q, cudaStream_t stream) {
  // The format from the data and scale types: MXFP8 (e4m3 / e5m2, UE8M0), MXFP4 (e2m1, UE8M0), NVFP4 (e2m1, UE4M3).
  quant::QFmt fmt;
  if (q.out == DType::kE4M3 && q.scale_type == DType::kE8M0) fmt = quant::QFmt::kE4M3;
  else if (q.out == DType::kE5M2 && q.scale_type == DType::kE8M0) fmt = quant::QFmt::kE5M2;
  else if (q.out == DType::kE2M1 && q.scale_type == DType::kE8M0) fmt = quant::QFmt::kMXFP4;
  else if (q.out == DType::kE2M1 && q.scale_type == DType::kE4M3) fmt = quant::QFmt::kNVFP4;
  else
    return std::string("data and scales must be e4m3 / e5m2 with float8_e8m0fnu (MXFP8), float4_e2m1fn with "
                       "float8_e8m0fnu (MXFP4) or float4_e2m1fn with float8_e4m3fn (NVFP4), got ") +
           dtype_name(q.out) + " with " + dtype_name(q.scale_type);
  const int64_t v = fmt == quant::QFmt::kNVFP4 ? 16 : 32;
  if (q.k % v) return "the quantized axis (" + std::to_string(q.k) + ") must be a multiple of " + std::to_string(v);
  if (q.gscale && fmt != quant::QFmt::kNVFP4) return "a global scale is for NVFP4 only";
  if (q.dequant && (q.colwise || (fmt != quant::QFmt::kE4M3 && fmt != quant::QFmt::kE5M2)))
    return "the quantize-dequantize is rowwise MXFP8 only";
  const int64_t vec = q.in == DType::kF32 ? 4 : 8;
  if (q.colwise && q.rows % vec)
    return "colwise quantization needs the last axis (" + std::to_string(q.rows) + ") a multiple of " + std::to_string(vec);
  quant::QuantArgs a{q.batch, q.rows, q.k, 0, 0, q.gscale};
  const int64_t cols = q.k / v;
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
  if (q.swizzled && zero_async(q.scales, static_cast<size_t>(q.scale_count), stream) != cudaSuccess)
    return "clearing the swizzled scales failed";
  auto go = [&](auto tag) {
    using T = decltype(tag);
    const T* xp = static_cast<const T*>(q.x);
    auto* d = static_cast<uint8_t*>(q.data);
    auto* s = static_cast<uint8_t*>(q.scales);
    auto run = [&](auto f) {
      constexpr quant::QFmt F = decltype(f)::value;
      // colwise: 16-bit x to e2m1 a thread per (column pair, block of rows, batch), grid x (256 threads), y, z;
      // else a CTA per (32 * vec columns, block of rows, batch) (kernels/mx_quantize_colwise.cuh)
      constexpr bool kPairs = !std::is_same_v<T, float> && quant::QTraits<F>::kFp4;
      if (q.colwise) {
        if constexpr (kPairs) {
          const int64_t gx = std::min<int64_t>((q.rows / 2 + 255) / 256, int64_t(1) << 20);
          const int64_t gz = std::min<int64_t>(q.batch, 65535);
          // NVFP4: the prefetching grid (each thread several blocks of its pair, the next one's rows loaded
          // before this one's conversion; sized to what the GPU holds at once). Measured on an H100, 2026-11-27,
          // us per kernel at 4096^2 / 8192^2 (in a chain, interleaved): 23.1-24.2 / 69.2-70.2 -> 21.6-23.2 /
          // 65.9-66.9.
          if constexpr (quant::QTraits<F>::kNv) {
            int per_sm = 0;  // (a failed query keeps the one-block grid: the same results)
            if (q.num_sms > 0 && resident_ctas(quant::mx_quantize_colwise_pair_kernel<T, F, true>, 256, q.device,
                                               PairPrefetchSlots<T, F>::ctas, per_sm).empty()) {
              // blocks per thread so that the grid is what the GPU holds at once, then as few CTAs as take them
              const int64_t y0 = std::max<int64_t>(1, int64_t(q.num_sms) * per_sm / (gx * gz));
              const int64_t per = (cols + y0 - 1) / y0;
              const dim3 grid(static_cast<unsigned>(gx),
                              static_cast<unsigned>(std::min<int64_t>((cols + per - 1) / per, 65535)),
                              static_cast<unsigned>(gz));
              (void)launch_kernel(launch_config(grid, dim3(256), 0, stream), quant::mx_quantize_colwise_pair_kernel<T, F, true>,
                                 xp, d, s, a);
              return;
            }
          }
          const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(std::min<int64_t>(cols, 65535)),
                          static_cast<unsigned>(gz));
          (void)launch_kernel(launch_config(grid, dim3(256), 0, stream), quant::mx_quantize_colwise_pair_kernel<T, F>, xp, d,
                             s, a);
        } else {
          const int64_t row_groups = (cols * v + 31) / 32;  // 32 rows: one MX block of rows, two NVFP4 ones
          const dim3 grid(static_cast<unsigned>(std::min<int64_t>((q.rows / vec + 31) / 32, int64_t(1) << 20)),
                          static_cast<unsigned>(std::min<int64_t>(row_groups, 65535)),
                          static_cast<unsigned>(std::min<int64_t>(q.batch, 65535)));
          (void)launch_kernel(launch_config(grid, dim3(256), 0, stream), quant::mx_quantize_colwise_kernel<T, F>, xp, d, s, a);
        }
      } else {  // a thread per kRowBlocks blocks
        constexpr int64_t per = quant::kRowBlocks<F>;
        const unsigned ctas = static_cast<unsigned>(std::min<int64_t>(((items + per - 1) / per + 255) / 256, int64_t(1) << 20));
        if constexpr (F == quant::QFmt::kE4M3 || F == quant::QFmt::kE5M2) {
          if (q.dequant) {  // d: bf16 values of x's shape
            (void)launch_kernel(launch_config(dim3(ctas), dim3(256), 0, stream), quant::mx_quantize_kernel<T, F, true>, xp, d,
                               s, a);
            return;
          }
        }
        (void)launch_kernel(launch_config(dim3(ctas), dim3(256), 0, stream), quant::mx_quantize_kernel<T, F>, xp, d, s, a);
      }
    };
    using Q = quant::QFmt;
    switch (fmt) {
      case Q::kE4M3: run(std::integral_constant<Q, Q::kE4M3>{}); break;
      case Q::kE5M2: run(std::integral_constant<Q, Q::kE5M2>{}); break;
      case Q::kMXFP4: run(std::integral_constant<Q, Q::kMXFP4>{}); break;
      case Q::kNVFP4: run(std::integral_constant<Q, Q::kNVFP4>{}); break;
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
