// jax_tmem: the in-shared-memory transpose of an 8-bit MN-major A tile for sm_90a's wgmma, which reads
// 8-bit operands K-major only (Config::kATrans in kernels/sm90_gemm.cuh: an fp8 weight stored (K, N)).
#pragma once

#include <cstdint>

#include "jax_tmem/ptx/common.cuh"

namespace jax_tmem::sm90 {

// kATrans: consumer warpgroup cw turns rows [64 cw, 64 cw + 64) of the slot's MN-major A tile (128 k-rows of
// 128 m-bytes, 128B-swizzled by TMA) into `dst`, its K-major 64-row tile (64 m-rows of 128 k-bytes, same
// swizzle) that its wgmma reads. 8 slabs of 16 k-rows: warp w takes slabs 2w, 2w + 1 (one per half warp),
// lane l of a half the m-bytes 64 cw + 4 (l % 16) .. + 3: 16 32-bit loads, 4x4 byte transposes, 4 16-byte stores.
__device__ __forceinline__ void transpose4x4(uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3, uint32_t (&c)[4]) {
  using ptx::prmt;
  const uint32_t t0 = prmt(r0, r1, 0x5140), t1 = prmt(r2, r3, 0x5140);  // (r0.b0 r1.b0 r0.b1 r1.b1)
  const uint32_t t2 = prmt(r0, r1, 0x7362), t3 = prmt(r2, r3, 0x7362);  // (r0.b2 r1.b2 r0.b3 r1.b3)
  c[0] = prmt(t0, t1, 0x5410);  // byte 0 of r0..r3
  c[1] = prmt(t0, t1, 0x7632);
  c[2] = prmt(t2, t3, 0x5410);
  c[3] = prmt(t2, t3, 0x7632);
}

__device__ __forceinline__ void transpose_a_half(uint32_t src, uint32_t dst, int cw, int warp_in_group, int lane) {
  using namespace jax_tmem::ptx;
  const int half = lane >> 4, slab = 2 * warp_in_group + half;
  const int m0 = 64 * cw + 4 * (lane & 15);
  // Banks: half 1 reads its k-rows in the order i ^ 4 (its chunks differ from half 0's in bit 2: 1 wavefront
  // per load, not 2); lane l stores m-row j ^ q at step j, q = (l >> 1) & 3 (4 wavefronts per store, not 8).
  const uint32_t row0 = src + 16 * slab * 128 + (m0 & 15);
  const int q = (lane >> 1) & 3;
  const uint32_t sel = q | ((1 ^ q) << 4) | ((2 ^ q) << 8) | ((3 ^ q) << 12);  // byte b <- byte b ^ q
  uint32_t r[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const int row = i ^ (4 * half);
    r[i] = lds_u32(row0 + row * 128 + ((((m0 >> 4) ^ (row & 7))) << 4));  // k % 8 == row % 8
  }
#pragma unroll
  for (int i = 0; i < 16; ++i) r[i] = prmt(r[i], 0u, sel);
  uint32_t c[4][4];  // c[g][j]: m-row m0 + (j ^ q), k-bytes 16 slab + 4 (g ^ half) .. + 3
#pragma unroll
  for (int g = 0; g < 4; ++g) transpose4x4(r[4 * g], r[4 * g + 1], r[4 * g + 2], r[4 * g + 3], c[g]);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int m = m0 - 64 * cw + (j ^ q);  // row of dst; (m & 7) is the global row's too
    sts_v4_u32(dst + m * 128 + ((slab ^ (m & 7)) << 4), half ? c[1][j] : c[0][j], half ? c[0][j] : c[1][j],
               half ? c[3][j] : c[2][j], half ? c[2][j] : c[3][j]);
  }
}

}  // namespace jax_tmem::sm90
