// jax_tmem: host launch of the mma.sync decode kernel (kernels/dense_decode.cuh; sm_90a menu entries 25-29,
// Split::kDecode): the problem as it is (no operand swap), a (M, K) K-major and b = the weight, (N, K) (16-bit
// or fp8) or, MN-major and 16-bit, (K, N).
#pragma once

#include <algorithm>
#include <atomic>
#include <string>

#include "jax_tmem/kernels/dense_decode.cuh"
#include "jax_tmem/launch.h"
#include "jax_tmem/tma_desc.h"

namespace jax_tmem::dd {

// The consumer warps of every entry (each takes the w-th 128-byte K chunk of a stage); 4 measured best
// against 2 and 8 (scripts/stream_probe.cu dd, H200 2026-11-26).
inline constexpr int kWarps = 4;

template <DType A, DType B, bool BMN, int MT, int R, int ST>
std::string launch(const GemmLaunch& L) {
  constexpr uint32_t kChunkK = 128 / dtype_bytes(A);  // K elements of a 128-byte box row
  using P = Plan<R, kWarps, ST, MT>;
  const GemmProblem& p = L.p;
  const int64_t row_tiles = (p.n + 16 * R - 1) / (16 * R), tok_tiles = (p.m + 8 * MT - 1) / (8 * MT);
  if (p.m >= (int64_t(1) << 31) || p.n >= (int64_t(1) << 31) || p.k >= (int64_t(1) << 31) || tok_tiles > 65535 ||
      p.batch > 65535)
    return "the decode entries take M, N, K < 2^31, at most 65535 token tiles and batch entries";
  const bool w_batched = p.batch > 1 && p.stride_b != 0, x_batched = p.batch > 1 && p.stride_a != 0;
  const int x_rows = static_cast<int>(std::min<int64_t>(p.m, 8 * MT));
  CUtensorMap wmap, xmap;
  // (K, N): boxes of 64 k-rows x 16 R weight rows, swizzled by their 32 R-byte rows
  constexpr CUtensorMapSwizzle kMNSwizzle =
      R == 1 ? CU_TENSOR_MAP_SWIZZLE_32B : R == 2 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_128B;
  static_assert(R == 1 || R == 2 || R == 4, "16, 32 or 64 weight rows per CTA");
  std::string err =
      BMN ? tma::encode_operand(&wmap, L.in(Role::kB), p.b_type, p.n, p.k, w_batched ? p.batch : 1, p.ldb, p.stride_b,
                                16 * R, 64, kMNSwizzle, tma::kStreamed)
          : tma::encode_operand(&wmap, L.in(Role::kB), p.b_type, p.k, p.n, w_batched ? p.batch : 1, p.ldb, p.stride_b,
                                kChunkK, 16 * R, CU_TENSOR_MAP_SWIZZLE_128B, tma::kStreamed);
  if (!err.empty()) return "operand b (the weight): " + err;
  err = tma::encode_operand(&xmap, L.in(Role::kA), p.a_type, p.k, p.m, x_batched ? p.batch : 1, p.lda, p.stride_a,
                            kChunkK, static_cast<uint32_t>(x_rows));
  if (!err.empty()) return "operand a: " + err;
  auto kernel = dense_decode_kernel<B, A, MT, R, kWarps, ST, BMN>;  // (the weight is mma's A)
  static std::atomic<int> ready[kMaxDevices];  // per instantiation and device (launch.h)
  err = raise_smem_limit(kernel, P::kSmemBytes, L.device, ready);
  if (!err.empty()) return err;
  const Params prm{static_cast<int>(p.m), static_cast<int>(p.n), static_cast<int>(p.k), w_batched, x_batched, x_rows,
                   epilogue::make_args(p, L.out, L.inputs)};
  const dim3 grid(static_cast<unsigned>(row_tiles), static_cast<unsigned>(tok_tiles), static_cast<unsigned>(p.batch));
  kernel<<<grid, (kWarps + 1) * 32, P::kSmemBytes, L.stream>>>(wmap, xmap, prm);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return std::string("decode kernel launch failed: ") + cudaGetErrorString(e);
  return "";
}

}  // namespace jax_tmem::dd
