// jax_tmem: the second pass of split-K and swap-AB GEMMs (arch-neutral CUDA).
//
// The GEMM kernel wrote each work unit's f32 partial sums to the workspace, already in the output's
// orientation: slab [split][batch] of [rows][ws_ld] floats (see partial_store in sm90_gemm.cuh).
// Here each thread owns 8 consecutive output columns of one row: it adds the slabs in split order
// 0, 1, ..., splits - 1 (a fixed order, so the result is bitwise repeatable), then runs the same
// row-segment epilogue as the sm_100a kernels (alpha, bias, activation, accumulate into c, cast) and
// stores. No atomics, no counters, no memset: the workspace is an ordinary XLA-allocated output.
// It is launched as a programmatic dependent of the GEMM kernel (launch_splitk_reduce): its CTAs can be
// resident before the GEMM ends and start with griddepcontrol.wait, which returns once the GEMM grid has
// completed and its workspace writes are visible, so the launch gap between the two kernels is hidden.
#pragma once

#include <cstdint>

#include "jax_tmem/epilogue.cuh"
#include "jax_tmem/ptx/common.cuh"

namespace jax_tmem {

constexpr int kReduceCols = 8;  // one 16-byte store of a 16-bit output (two of f32)
constexpr int kReduceThreads = 256;

// rows = batch * M output rows; n = N output columns; ws_ld >= n, a multiple of 4. (A template so that
// every arch's translation unit can instantiate it without a duplicate host symbol.)
template <int kCols = kReduceCols>
__global__ void __launch_bounds__(kReduceThreads)
    splitk_reduce_kernel(const float* __restrict__ ws, int splits, int64_t rows, int n, int ws_ld,
                         const epilogue::Args e) {
  ptx::griddep_wait();
  const int segs = (n + kCols - 1) / kCols;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * kReduceThreads + threadIdx.x;
  if (idx >= rows * segs) return;
  const int64_t row = idx / segs;
  const int col0 = static_cast<int>(idx - row * segs) * kCols;
  float v[kCols];
#pragma unroll
  for (int j = 0; j < kCols; ++j) v[j] = 0.f;
  const int64_t slab = rows * ws_ld;
  // ws_ld is a multiple of 4 and col0 of 8: the float4 loads are aligned; columns in [n, ws_ld) hold
  // unwritten workspace but are never stored.
  const bool vec = col0 + kCols <= ws_ld;
  const float* src = ws + row * ws_ld + col0;
  for (int s = 0; s < splits; ++s, src += slab) {
    if (vec) {
#pragma unroll
      for (int q = 0; q < kCols / 4; ++q) {
        const float4 f = __ldg(reinterpret_cast<const float4*>(src) + q);
        v[4 * q] += f.x; v[4 * q + 1] += f.y; v[4 * q + 2] += f.z; v[4 * q + 3] += f.w;
      }
    } else {
#pragma unroll
      for (int j = 0; j < kCols; ++j)
        if (col0 + j < n) v[j] += src[j];
    }
  }
  epilogue::finish_row_segment<kCols>(v, e, row, col0, n);
}

}  // namespace jax_tmem
