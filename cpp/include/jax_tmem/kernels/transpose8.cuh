// jax_tmem: the batched transpose of 1-byte elements (issue 16): x (batch, rows, cols) -> y (batch, cols,
// rows), for the fp8 operands that wgmma reads K-major only (the training recipes' w^T, x^T, g^T).
// In the fp8 training step XLA fused these transposes into the fp8 conversion at ~0.5 TB/s on the H200
// (2026-11-25: 3.8 ms of 15.3); standalone, XLA's fp8 transpose ran at 1.6-2.7 TB/s and this one at 2.4-3.3
// (scripts/transpose_probe.py). It moves whole 32-bit words. Plain CUDA (any arch).
//
// A CTA of 256 threads takes a 128 x 128-byte tile. Load: warp w, lane a reads word a (bytes 4a..4a+3) of
// the four rows 4g..4g+3 (g = w + 8 j), 128 coalesced bytes per row and warp, and transposes that 4x4
// byte block in registers (four PRMTs and four more); the four words are the tile's output rows 4a..4a+3,
// word g, and go to shared memory at column g ^ a (the XOR keeps the 32 lanes on 32 banks for the
// stores, and on 32 banks when a warp reads one output row back). Store: warp w writes output rows
// 16 w..16 w+15, lane g its word g: 128 coalesced bytes per row. rows and cols must be multiples of 4
// (whole words); partial tiles are bounds-checked per word. Other shapes (a sharded program's local
// blocks can have any size) take transpose8_bytes_kernel: a byte per thread, correct but slow.
#pragma once

#include <cstdint>

namespace jax_tmem::transpose {

constexpr int kTile = 128;     // bytes per tile side
constexpr int kThreads = 256;  // 8 warps

struct Args {
  int64_t batch, rows, cols;  // rows, cols: multiples of 4
  int64_t row_tiles, col_tiles;
};

__device__ __forceinline__ uint32_t byte_perm(uint32_t a, uint32_t b, uint32_t sel) { return __byte_perm(a, b, sel); }

__global__ void __launch_bounds__(kThreads) transpose8_kernel(const uint8_t* __restrict__ x, uint8_t* __restrict__ y,
                                                              const Args p) {
  __shared__ uint32_t tile[kTile][kTile / 4];  // [output row][word, XOR-swizzled]
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int64_t t = blockIdx.x;
  const int64_t ct = t % p.col_tiles;
  t /= p.col_tiles;
  const int64_t rt = t % p.row_tiles;
  const int64_t b = t / p.row_tiles;
  const int64_t r0 = rt * kTile, c0 = ct * kTile;
  const int64_t row_words = p.cols / 4, out_words = p.rows / 4;
  const uint32_t* xw = reinterpret_cast<const uint32_t*>(x + b * p.rows * p.cols);
  uint32_t* yw = reinterpret_cast<uint32_t*>(y + b * p.rows * p.cols);

  const int a = lane;  // input word column within the tile
  const bool col_ok = c0 + 4 * a < p.cols;
  uint32_t v[4][4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int g = warp + 8 * j;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t r = r0 + 4 * g + i;
      v[j][i] = (col_ok && r < p.rows) ? __ldg(xw + r * row_words + c0 / 4 + a) : 0u;
    }
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int g = warp + 8 * j;
    // 4x4 bytes: v[j][i] holds row i's bytes 0..3; output word k holds byte k of rows 0..3.
    const uint32_t t0 = byte_perm(v[j][0], v[j][1], 0x5140), t1 = byte_perm(v[j][0], v[j][1], 0x7362);
    const uint32_t t2 = byte_perm(v[j][2], v[j][3], 0x5140), t3 = byte_perm(v[j][2], v[j][3], 0x7362);
    tile[4 * a + 0][g ^ a] = byte_perm(t0, t2, 0x5410);
    tile[4 * a + 1][g ^ a] = byte_perm(t0, t2, 0x7632);
    tile[4 * a + 2][g ^ a] = byte_perm(t1, t3, 0x5410);
    tile[4 * a + 3][g ^ a] = byte_perm(t1, t3, 0x7632);
  }
  __syncthreads();
  const int g = lane;  // output word within the tile's row: input rows r0 + 4g .. + 3
  const bool word_ok = r0 + 4 * g < p.rows;
#pragma unroll 4
  for (int i = 0; i < kTile / 8; ++i) {
    const int r = warp * (kTile / 8) + i;  // output row within the tile = input column c0 + r
    if (word_ok && c0 + r < p.cols) yw[(c0 + r) * out_words + r0 / 4 + g] = tile[r][g ^ (r / 4)];
  }
}

// Any rows, cols: output byte i of a grid-stride loop (reads scattered, writes coalesced).
__global__ void __launch_bounds__(kThreads) transpose8_bytes_kernel(const uint8_t* __restrict__ x,
                                                                    uint8_t* __restrict__ y, const Args p) {
  const int64_t total = p.batch * p.rows * p.cols;
  for (int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x; i < total; i += int64_t(gridDim.x) * kThreads) {
    const int64_t r = i % p.rows, c = (i / p.rows) % p.cols, b = i / (p.rows * p.cols);
    y[i] = x[(b * p.rows + r) * p.cols + c];
  }
}

}  // namespace jax_tmem::transpose
