// jax_tmem: the tail boxes of a TMA-fed GEMM kernel's K-major operands (shared by the kernel and its launcher).
#pragma once

#include <cstdint>

namespace jax_tmem {

// Rows of the tail boxes, 0 where there is none: a K-major A's (B's) last row block where M (N) is not a multiple of
// BLOCK_M (BLOCK_N), loaded through a second tensor map whose box holds those rows rounded up to 8
// (the producers of sm90_gemm_kernel and of the 1-CTA sm100_gemm_kernel; launch_persistent encodes the maps; C: their
// kernel Config; the sm_100a CTA pair reads whole boxes). Not for an
// MN-major operand (its rows are the contiguous dimension), an A transposed in shared memory, or an operand
// multicast to a cluster. (nvcc only: the kernels and their launchers.)
template <class C>
struct TailBoxes {
  int a_rows = 0, b_rows = 0;
  __host__ __device__ static constexpr int rows(int64_t extent, int block) {
    const int r = static_cast<int>(extent % block), r8 = (r + 7) / 8 * 8;
    return r8 < block ? r8 : 0;
  }
  __host__ __device__ constexpr TailBoxes(int64_t m, int64_t n)
      : a_rows(C::kAMN || C::kATrans || C::CLUSTER_N > 1 ? 0 : rows(m, C::BLOCK_M)),
        b_rows(C::kBMN || C::CLUSTER_M > 1 ? 0 : rows(n, C::BLOCK_N)) {}
  template <class P>
  __host__ __device__ constexpr explicit TailBoxes(const P& p) : TailBoxes(p.m, p.n) {}
};

}  // namespace jax_tmem
