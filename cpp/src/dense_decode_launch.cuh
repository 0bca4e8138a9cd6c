// jax_tmem: host launch of the decode kernel (kernels/dense_decode.cuh: mma.sync, or its wgmma form; sm_90a
// entries 25-34, 51-54, Split::kDecode): the problem as it is (no operand swap), a (M, K) K-major and b = the
// weight (16-bit or fp8), stored (N, K) or (K, N).
#pragma once

#include <algorithm>
#include <atomic>
#include <string>

#include "jax_tmem/kernels/dense_decode.cuh"
#include "jax_tmem/launch.h"
#include "jax_tmem/tma_desc.h"

namespace jax_tmem::dd {

// The K chunks of a stage (128 bytes of each weight row each); 4 measured best against 2 and 8
// (scripts/stream_probe.cu dd, H200 2026-11-26). One consumer warp a chunk, or for a weight stored (K, N) 2
// (16-bit) or 4 (fp8), each taking its share of the chunk's mma steps: the ldmatrix.trans form has more
// work per byte, and its CTAs are wide (64-128 rows), so a warp a chunk left the SMs short of warps
// (at M = 1, 2 / 4 warps a chunk, against 1: bf16 28672 x 4096 59.8 -> 58.2 us, e4m3 41.5 -> 37.9 (64 rows), 38.6
// -> 33.7 (128 rows); 4096 x 14336 e4m3 27.5 -> 16.9; H200 2026-11-26 07:40).
inline constexpr int kWarps = 4;
template <DType B, bool BMN>
inline constexpr int kWarpsPerChunk = !BMN ? 1 : dtype_bytes(B) == 1 ? 4 : 2;

// WG: the wgmma form (64-row CTAs, a warpgroup per chunk, a warp per 16 rows).
// 16-bit activations x an fp8 weight (kMix) stage two activation boxes per weight chunk: the ring keeps the
// entry's stages where they fit in shared memory, else as many as fit (the wgmma entries 33 / 34: 3 / 2).
// CK > 1 (WG, or a (K, N) weight): the K range split over clusters of CK CTAs, sums met in shared memory (51-54).
template <DType A, DType B, bool BMN, int MT, int R, int ST, bool WG = false, int CK = 1>
std::string launch(const GemmLaunch& L) {
  constexpr uint32_t kWChunkK = 128 / dtype_bytes(B), kXChunkK = 128 / dtype_bytes(A);  // K of a 128-byte box row
  constexpr int KS = WG ? 4 : kWarpsPerChunk<B, BMN>;
  constexpr int XR = dtype_bytes(A) / dtype_bytes(B);
  static_assert(!WG || R == 4, "the wgmma form: 64 weight rows per CTA");
  constexpr int kFit = (227 * 1024 - 2048) / Plan<R, kWarps, 1, MT, KS, WG, XR>::kStageBytes;
  constexpr int kST = ST < kFit ? ST : kFit;
  static_assert(kST >= 2, "a ring of two stages at least");
  using P = Plan<R, kWarps, kST, MT, KS, WG, XR>;
  const GemmProblem& p = L.p;
  const int64_t row_tiles = (p.n + 16 * R - 1) / (16 * R), tok_tiles = (p.m + 8 * MT - 1) / (8 * MT);
  if (p.m >= (int64_t(1) << 31) || p.n >= (int64_t(1) << 31) || p.k >= (int64_t(1) << 31) || tok_tiles > 65535 ||
      p.batch > 65535)
    return "the decode entries take M, N, K < 2^31, at most 65535 token tiles and batch entries";
  const bool w_batched = p.batch > 1 && p.stride_b != 0, x_batched = p.batch > 1 && p.stride_a != 0;
  const int x_rows = static_cast<int>(std::min<int64_t>(p.m, 8 * MT));
  CUtensorMap wmap, xmap;
  // (K, N): boxes of kWChunkK k-rows x 16 R weight rows, swizzled by their rows of kRowBytes
  constexpr int kRowBytes = 16 * R * dtype_bytes(B);
  static_assert(kRowBytes == 32 || kRowBytes == 64 || kRowBytes == 128 || !BMN, "32 to 128-byte k-rows of the weight");
  constexpr CUtensorMapSwizzle kMNSwizzle = kRowBytes == 32   ? CU_TENSOR_MAP_SWIZZLE_32B
                                            : kRowBytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                              : CU_TENSOR_MAP_SWIZZLE_128B;
  std::string err =
      BMN ? tma::encode_operand(&wmap, L.in(Role::kB), p.b_type, p.n, p.k, w_batched ? p.batch : 1, p.ldb, p.stride_b,
                                16 * R, kWChunkK, kMNSwizzle, tma::kStreamed)
          : tma::encode_operand(&wmap, L.in(Role::kB), p.b_type, p.k, p.n, w_batched ? p.batch : 1, p.ldb, p.stride_b,
                                kWChunkK, 16 * R, CU_TENSOR_MAP_SWIZZLE_128B, tma::kStreamed);
  if (!err.empty()) return "operand b (the weight): " + err;
  err = tma::encode_operand(&xmap, L.in(Role::kA), p.a_type, p.k, p.m, x_batched ? p.batch : 1, p.lda, p.stride_a,
                            kXChunkK, static_cast<uint32_t>(x_rows));
  if (!err.empty()) return "operand a: " + err;
  auto kernel = dense_decode_kernel<B, A, MT, R, kWarps, kST, BMN, KS, WG, CK>;  // (the weight is mma's A)
  static std::atomic<int> ready[kMaxDevices];  // per instantiation and device (launch.h)
  err = raise_smem_limit(kernel, P::kSmemBytes, L.device, ready);
  if (!err.empty()) return err;
  const Params prm{static_cast<int>(p.m), static_cast<int>(p.n), static_cast<int>(p.k), w_batched, x_batched, x_rows,
                   epilogue::make_args(p, L.out, L.inputs)};
  if (row_tiles * CK >= (int64_t(1) << 31)) return "the decode entries take at most 2^31 - 1 CTAs along N";
  const dim3 grid(static_cast<unsigned>(row_tiles * CK), static_cast<unsigned>(tok_tiles),
                  static_cast<unsigned>(p.batch));
  cudaLaunchConfig_t cfg = launch_config(grid, dim3((kWarps * KS + 1) * 32), P::kSmemBytes, L.stream);
  cudaLaunchAttribute attr[1];
  if constexpr (CK > 1) set_cluster_x(cfg, attr, CK);
  (void)launch_kernel(cfg, kernel, wmap, xmap, prm);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return std::string("decode kernel launch failed: ") + cudaGetErrorString(e);
  return "";
}

}  // namespace jax_tmem::dd
