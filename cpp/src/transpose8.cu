// jax_tmem: host launch of the batched 1-byte transpose (kernels/transpose8.cuh), for every built arch.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "jax_tmem/kernels/transpose8.cuh"
#include "jax_tmem/launch.h"

namespace jax_tmem {

std::string transpose8_launch(const void* x, void* y, int64_t batch, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (batch < 0 || rows < 0 || cols < 0) return "negative dimensions";
  transpose::Args a{batch, rows, cols, (rows + transpose::kTile - 1) / transpose::kTile,
                    (cols + transpose::kTile - 1) / transpose::kTile};
  const auto* xp = static_cast<const uint8_t*>(x);
  auto* yp = static_cast<uint8_t*>(y);
  if (rows % 4 || cols % 4) {  // not whole words: the byte-per-thread kernel
    const int64_t blocks = (batch * rows * cols + transpose::kThreads - 1) / transpose::kThreads;
    if (blocks == 0) return "";
    (void)launch_kernel(launch_config(dim3(static_cast<unsigned>(std::min<int64_t>(blocks, int64_t(1) << 20))),
                                      dim3(transpose::kThreads), 0, stream),
                        transpose::transpose8_bytes_kernel, xp, yp, a);
  } else {
    const int64_t tiles = batch * a.row_tiles * a.col_tiles;
    if (tiles == 0) return "";
    if (tiles >= (int64_t(1) << 31)) return "too many tiles (" + std::to_string(tiles) + ") for one launch";
    (void)launch_kernel(launch_config(dim3(static_cast<unsigned>(tiles)), dim3(transpose::kThreads), 0, stream),
                        transpose::transpose8_kernel, xp, yp, a);
  }
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string("transpose launch failed: ") + cudaGetErrorString(e);
}

}  // namespace jax_tmem
