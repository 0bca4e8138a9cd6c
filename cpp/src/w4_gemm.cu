// jax_tmem: host launch of the weight-only 4-bit GEMM (kernels/w4_gemm.cuh), for every built arch: a
// bfloat16 lhs (K-major) times float4_e2m1fn weights (K-major, packed) with block scales on the weights
// only (MXFP4: UE8M0 per 32; NVFP4: UE4M3 per 16) and an optional float32 global scale.
#include <cuda_runtime.h>

#include <atomic>
#include <string>

#include "jax_tmem/kernels/w4_gemm.cuh"
#include "jax_tmem/kernels/w4_tma.cuh"
#include "jax_tmem/kernels/w4_wgmma.cuh"
#include "jax_tmem/kernels/w4_wide.cuh"
#include "jax_tmem/launch.h"
#include "jax_tmem/tma_desc.h"

namespace jax_tmem {
namespace {

// A configuration: R (16-row weight tiles per warp: each activation fragment is used R times), NB (K
// chunks per pipeline step), KW (warps splitting K: the shared-memory reduction stays <= 32 KB).
template <class OutT, int MT, int V, int R, int NB>
std::string launch(const GemmLaunch& L, const w4::Params& prm) {
  constexpr int KW = 32768 / (R * MT * 512) >= 8 ? 8 : 32768 / (R * MT * 512);
  const GemmProblem& p = L.p;
  const dim3 grid(static_cast<unsigned>((p.n + 16 * R - 1) / (16 * R)), static_cast<unsigned>((p.m + 8 * MT - 1) / (8 * MT)),
                  static_cast<unsigned>(p.batch));
  (void)launch_kernel(launch_config(grid, dim3(KW * 32), 0, L.stream), w4::w4_gemm_kernel<OutT, MT, R, KW, V, NB>, prm);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string("weight-only 4-bit kernel launch failed: ") + cudaGetErrorString(e);
}

// TMA reads the scales' rows as they are: K / V bytes each must be a multiple of 16.
bool tma_fits(const GemmProblem& p) { return (p.k / p.sf_vec) % 16 == 0; }

// The maps of the TMA-fed kernels: the packed weights as bytes {K / 2, N, batch} in 128B-swizzled boxes
// {128, rows}, the scales {K / V, N, batch} in boxes {sb, rows}, the activations {K, M, batch} in boxes
// {x_cols, x_rows} (a batch stride of 0: one operand for every batch, coordinate 0).
std::string encode_maps(const GemmLaunch& L, const w4::Params& prm, int v, int rows, int sb, int x_cols, int x_rows,
                        CUtensorMapSwizzle x_swizzle, CUtensorMap (&maps)[3]) {
  const GemmProblem& p = L.p;
  const bool batched = p.stride_b != 0;
  // The weights and their scales are read once (tma::kStreamed), the activations by every CTA.
  std::string err = tma::encode_operand(&maps[0], prm.w, DType::kE2M1, p.k, p.n, batched ? p.batch : 1, p.ldb,
                                        p.stride_b, 256, rows, CU_TENSOR_MAP_SWIZZLE_128B, tma::kStreamed);
  if (err.empty())
    err = tma::encode_operand(&maps[1], prm.s, DType::kU8, p.k / v, p.n, batched ? p.batch : 1, p.k / v, prm.stride_s,
                              sb, rows, CU_TENSOR_MAP_SWIZZLE_NONE, tma::kStreamed);
  if (err.empty())
    err = tma::encode_operand(&maps[2], prm.x, DType::kBF16, p.k, p.m, p.stride_a != 0 ? p.batch : 1, p.lda, p.stride_a,
                              x_cols, x_rows, x_swizzle);
  return err;
}

// The TMA-fed kernel (kernels/w4_tma.cuh): boxes of 16 R rows (weights: x 128 bytes; scales: x KW * 128 / V
// bytes) and of 8 MT tokens x 256 activations, then the launch.
template <class OutT, int MT, int V, int R, int KW, int ST>
std::string launch_tma(const GemmLaunch& L, const w4::Params& prm) {
  using Plan = w4::TmaPlan<R, KW, V, ST, MT>;
  const GemmProblem& p = L.p;
  CUtensorMap maps[3];
  std::string err = encode_maps(L, prm, V, Plan::kRows, Plan::kSB, 256, 8 * MT, CU_TENSOR_MAP_SWIZZLE_NONE, maps);
  if (!err.empty()) return "weight-only 4-bit (TMA): " + err;
  auto kernel = w4::w4_tma_kernel<OutT, MT, R, KW, V, ST>;
  static std::atomic<int> ready[kMaxDevices];  // per instantiation and device (launch.h)
  err = raise_smem_limit(kernel, Plan::kSmemBytes, L.device, ready);
  if (!err.empty()) return err;
  const dim3 grid(static_cast<unsigned>((p.n + Plan::kRows - 1) / Plan::kRows),
                  static_cast<unsigned>((p.m + 8 * MT - 1) / (8 * MT)), static_cast<unsigned>(p.batch));
  (void)launch_kernel(launch_config(grid, dim3((KW + 1) * 32), Plan::kSmemBytes, L.stream), kernel, maps[0], maps[1],
                     maps[2], prm);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string("weight-only 4-bit (TMA) kernel launch failed: ") + cudaGetErrorString(e);
}

// The many-token kernels (kernels/w4_wide.cuh, w4_wgmma.cuh): 128-row CTAs, a ring of ST stages of 256 K
// (Plan), K split over clusters of CS CTAs; the activations in 128B-swizzled boxes of 64 K x 8 MT tokens.
template <class Plan, int MT, int V, int CS, class Kernel>
std::string launch_ring(const GemmLaunch& L, const w4::Params& prm, Kernel kernel, int threads,
                        std::atomic<int> (&ready)[kMaxDevices]) {
  const GemmProblem& p = L.p;
  CUtensorMap maps[3];
  std::string err = encode_maps(L, prm, V, Plan::kRows, Plan::kSB, 64, 8 * MT, CU_TENSOR_MAP_SWIZZLE_128B, maps);
  if (!err.empty()) return "weight-only 4-bit (many tokens): " + err;
  err = raise_smem_limit(kernel, Plan::kSmemBytes, L.device, ready);
  if (!err.empty()) return err;
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  cfg.gridDim = dim3(static_cast<unsigned>((p.n + Plan::kRows - 1) / Plan::kRows * CS),
                     static_cast<unsigned>((p.m + 8 * MT - 1) / (8 * MT)), static_cast<unsigned>(p.batch));
  cfg.blockDim = dim3(threads, 1, 1);
  cfg.dynamicSmemBytes = Plan::kSmemBytes;
  cfg.stream = L.stream;
  if constexpr (CS > 1) set_cluster_x(cfg, attr, CS);
  const cudaError_t e = launch_kernel(cfg, kernel, maps[0], maps[1], maps[2], prm);
  return e == cudaSuccess ? "" : std::string("weight-only 4-bit (many tokens) kernel launch failed: ") + cudaGetErrorString(e);
}

// mma.sync (every arch): 4 groups of 32 rows, each stage's K halved between two warps.
template <class OutT, int MT, int V, int CS>
std::string launch_wide(const GemmLaunch& L, const w4::Params& prm) {
  constexpr int R = 2, WR = 4, WK = 2, ST = MT == 8 ? 4 : 6;
  static std::atomic<int> ready[kMaxDevices];  // per instantiation and device (launch.h)
  return launch_ring<w4::WidePlan<R, WR, WK, V, ST, MT>, MT, V, CS>(
      L, prm, w4::w4_wide_kernel<OutT, MT, R, WR, WK, V, ST, CS>, (WR * WK + 1) * 32, ready);
}

// wgmma (sm_90a): 2 warpgroups of 64 rows; per instantiation, its per-device state (launch.h).
template <class OutT, int MT, int V, int CS>
struct Wgmma {
  static constexpr int kStages = MT == 8 ? 4 : MT == 4 ? 6 : 8;
  using Plan = w4::WidePlan<1, 8, 1, V, kStages, MT>;
  static constexpr auto kernel = w4::w4_wgmma_kernel<OutT, MT, V, kStages, CS>;
  static inline DeviceSlots slots;
};

template <class OutT, int MT, int V, int CS>
std::string launch_wgmma(const GemmLaunch& L, const w4::Params& prm) {
  using W = Wgmma<OutT, MT, V, CS>;
  return launch_ring<typename W::Plan, MT, V, CS>(L, prm, W::kernel, 9 * 32, W::slots.ready);
}

// How many clusters of W's CS CTAs the device holds at once (launch.h; 0 when it cannot tell): 39 of 3 and
// 30 of 4 on an H200, so 32 clusters of 4 (4096^2) run as two waves.
template <class W, int CS>
int resident_clusters_of(const GemmLaunch& L) {
  if (L.num_sms <= 0 || !raise_smem_limit(W::kernel, W::Plan::kSmemBytes, L.device, W::slots.ready).empty()) return 0;
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  cfg.blockDim = dim3(9 * 32, 1, 1);
  cfg.dynamicSmemBytes = W::Plan::kSmemBytes;
  set_cluster_x(cfg, attr, CS);
  int n = 0;
  if (!resident_clusters(W::kernel, cfg, CS, L.num_sms, L.device, W::slots.clusters, n).empty()) {
    (void)cudaGetLastError();  // a failed query is not a launch error: the heuristic takes another kernel
    return 0;
  }
  return n;
}

template <class OutT, int V, int CS>
std::string many_tokens(const GemmLaunch& L, const w4::Params& prm, bool wgmma) {
  const int64_t m = L.p.m;
  if (wgmma) {
    if (m <= 16) return launch_wgmma<OutT, 2, V, CS>(L, prm);
    return m <= 32 ? launch_wgmma<OutT, 4, V, CS>(L, prm) : launch_wgmma<OutT, 8, V, CS>(L, prm);
  }
  return m <= 32 ? launch_wide<OutT, 4, V, CS>(L, prm) : launch_wide<OutT, 8, V, CS>(L, prm);
}

// Config 10: the heuristic's many-token kernel (wgmma on sm_90 above 32 tokens, else mma.sync) and K split
// (the most CTAs of 1, 2 or 4 per cluster that fit one wave, each with >= 8 stages of 256 K);
// 11-13: mma.sync with 1, 2, 4 CTAs per cluster; 14-16: wgmma (sm_90 only) with 1, 2, 4; 17, 18: mma.sync,
// wgmma with 3. Token tiles of 16 (wgmma), 32 or 64 (beyond 64: more tiles over grid.y).
template <class OutT, int V>
std::string wide(const GemmLaunch& L, const w4::Params& prm, int config) {
  const GemmProblem& p = L.p;
  if (!tma_fits(p))
    return "weight-only 4-bit config " + std::to_string(config) + " (TMA) needs K / block a multiple of 16";
  const bool sm90 = L.cc == 90;
  const bool wgmma = config == 10 ? sm90 && p.m > 32 : (config >= 14 && config <= 16) || config == 18;
  if (wgmma && !sm90) return "weight-only 4-bit config " + std::to_string(config) + " (wgmma) runs on sm_90 only";
  int cs = config == 10 ? 0 : config >= 17 ? 3 : 1 << ((config - 11) % 3);
  if (cs == 0) {
    const int64_t sms = L.num_sms > 0 ? L.num_sms : 132, stages = (p.k + 255) / 256;
    const int64_t ctas = (p.n + 127) / 128 * ((p.m + 63) / 64) * p.batch;
    cs = 1;
    while (cs < 4 && ctas * cs * 2 <= sms && stages >= 16 * cs) cs *= 2;
  }
  switch (cs) {
    case 1: return many_tokens<OutT, V, 1>(L, prm, wgmma);
    case 2: return many_tokens<OutT, V, 2>(L, prm, wgmma);
    case 3: return many_tokens<OutT, V, 3>(L, prm, wgmma);
    default: return many_tokens<OutT, V, 4>(L, prm, wgmma);
  }
}

// The private `config` attribute (benchmarks): 0: R = 1 (2 for > 16 tokens), one chunk per step; 1: R = 2;
// 2: two chunks per step; 3: both; 4-9: the TMA-fed kernel (<= 16 tokens, K / block a multiple of 16):
// 4: R = 1, 8 consumer warps, 4 stages; 5: R = 2, 8 warps, 4 stages; 6: R = 4, 8 warps, 3 stages; 7: R = 2,
// 4 warps, 6 stages; 8: R = 3 (2 at 16 tokens), 12 warps, 3 stages; 9: R = 2 (1), 16 warps (12), 3 stages;
// 10-18: the many-token kernels (`wide` above). -1: the heuristic.
constexpr int kW4Configs = 19;

template <class OutT, int MT, int V>
std::string by_config(const GemmLaunch& L, const w4::Params& prm, int config) {
  constexpr int R0 = MT <= 2 ? 1 : 2, R1 = 2;  // 32 tokens x 4 tiles spill registers: R stays 2 there
  switch (config) {
    case 0: return launch<OutT, MT, V, R0, 1>(L, prm);
    case 1: return launch<OutT, MT, V, R1, 1>(L, prm);
    case 2: return launch<OutT, MT, V, R0, 2>(L, prm);
    case 3: return launch<OutT, MT, V, R1, 2>(L, prm);
  }
  if constexpr (MT > 2) {
    if (config >= 4 && config < 10)
      return "weight-only 4-bit config " + std::to_string(config) + " (TMA) takes at most 16 tokens";
  } else {
    if (config >= 4 && config < 10 && !tma_fits(L.p))
      return "weight-only 4-bit config " + std::to_string(config) + " (TMA) needs K / block a multiple of 16";
    switch (config) {
      case 4: return launch_tma<OutT, MT, V, 1, 8, 4>(L, prm);
      case 5: return launch_tma<OutT, MT, V, 2, 8, 4>(L, prm);
      case 6: return launch_tma<OutT, MT, V, 4, 8, 3>(L, prm);
      case 7: return launch_tma<OutT, MT, V, 2, 4, 6>(L, prm);
      case 8: return launch_tma<OutT, MT, V, MT == 1 ? 3 : 2, 12, 3>(L, prm);  // (R - 1 at 16 tokens: spills)
      case 9: return launch_tma<OutT, MT, V, MT == 1 ? 2 : 1, MT == 1 ? 16 : 12, 3>(L, prm);
    }
  }
  return "weight-only 4-bit config " + std::to_string(config) + " outside [-1, " + std::to_string(kW4Configs) + ")";
}

template <class OutT, int V>
std::string by_tokens(const GemmLaunch& L, const w4::Params& prm) {
  const int64_t m = L.p.m;
  // The heuristic (H200, benchmarks/bench_w4.py, docs/PERF.md). Up to 16 tokens the TMA-fed kernel where
  // TMA can map the scales (2026-11-24 22:29): 64-row CTAs (config 6) when they fill >= 90 % of the SMs
  // in one wave (8192^2 MXFP4: 17.3 vs 20.4 us at M = 1, 19.1 vs 23.7 at M = 16), else 32-row ones
  // (config 5; 4096^2: 7.4 vs 7.8 us at M = 1). Otherwise the plain-load kernel (2026-11-23): up to 8 tokens config 0; 9-16 tokens
  // R = 2 (x fragments used twice: 8192^2 24.9 vs 40.6 us), two chunks per step for small weights (4096^2:
  // 8.5 vs 9.6 us); beyond, tiles of 32 tokens (all configurations within 2 %).
  int config = L.p.config;
  if (config < 0 && m <= 16 && tma_fits(L.p)) {
    const int64_t sms = L.num_sms > 0 ? L.num_sms : 132;
    config = (L.p.n + 63) / 64 * 10 >= sms * 9 ? 6 : 5;
  }
  // 17-64 tokens (2026-11-25): the many-token kernels where their 128-row CTAs alone fill >= 1/4 of the
  // SMs (8192^2 MXFP4, M = 64: 31.6 us (wgmma) / 33.5 (mma.sync) against 71 for the plain-load kernel; M =
  // 32: 24.5 (mma.sync) / 27.7 / 37.5); 4096^2 stays on the plain-load kernel (M = 32: 11.2 against 14.5).
  if (config < 0 && m > 16 && tma_fits(L.p) && (L.p.n + 127) / 128 * 4 >= (L.num_sms > 0 ? L.num_sms : 132)) config = 10;
  // 33 tokens and more on sm_90 where fewer 128-row CTAs than that fill at least half the SMs with K split in
  // three (4096^2: 32 row tiles, 96 CTAs), K >= 3072: the wgmma kernel over clusters of 3 when every cluster
  // fits one wave (H200, 2026-11-26, bench_w4.py: 4096^2 M = 64 16.6 / 16.8 us (MXFP4 / NVFP4) against 20.5 /
  // 21.2 for the plain-load kernel and 19.5 in clusters of 2; M = 48 16.5 / 16.6 against 18.9 / 19.7; 5120^2's
  // 40 clusters of 3 exceed the 39 resident and ran 1.5x slower than clusters of 2, which it keeps).
  if (config < 0 && m > 32 && L.cc == 90 && tma_fits(L.p) && L.p.k >= 3072) {
    const int64_t sms = L.num_sms > 0 ? L.num_sms : 132;
    const int64_t clusters = (L.p.n + 127) / 128 * ((m + 63) / 64) * L.p.batch;
    if (clusters * 3 * 2 >= sms && (L.p.n + 127) / 128 * 4 < sms &&
        clusters <= resident_clusters_of<Wgmma<OutT, 8, V, 3>, 3>(L))
      config = 18;
  }
  if (config >= 10 && config < kW4Configs) return wide<OutT, V>(L, prm, config);
  if (config < 0) config = m <= 8 ? 0 : m <= 16 ? (L.p.n * L.p.k <= (int64_t(1) << 24) ? 3 : 1) : 2;
  if (m <= 8) return by_config<OutT, 1, V>(L, prm, config);
  if (m <= 16) return by_config<OutT, 2, V>(L, prm, config);
  return by_config<OutT, 4, V>(L, prm, config);  // tiles of 32 tokens over grid.y beyond (64 spill registers)
}

template <int V>
std::string by_output(const GemmLaunch& L, const w4::Params& prm) {
  switch (L.p.out_type) {
    case DType::kBF16: return by_tokens<__nv_bfloat16, V>(L, prm);
    case DType::kF16: return by_tokens<__half, V>(L, prm);
    case DType::kF32: return by_tokens<float, V>(L, prm);
    default: return std::string("the weight-only 4-bit GEMM writes bfloat16, float16 or float32, not ") + dtype_name(L.p.out_type);
  }
}

}  // namespace

std::string w4_gemm_launch(const GemmLaunch& L) {
  const GemmProblem& p = L.p;
  if (p.a_type != DType::kBF16 || p.b_type != DType::kE2M1)
    return std::string("the weight-only 4-bit GEMM takes a bfloat16 lhs and float4_e2m1fn weights, got ") +
           dtype_name(p.a_type) + " x " + dtype_name(p.b_type);
  if (p.a_mn_major || p.b_mn_major) return "the weight-only 4-bit GEMM takes K-major operands ((M, K) and (N, K))";
  if (p.sf_layout != 0) return "the weight-only 4-bit GEMM reads plain (N, K / block) scales (sf_layout 0)";
  if (p.k % 32) return "the weight-only 4-bit GEMM needs K a multiple of 32, got " + std::to_string(p.k);
  if (p.has(Role::kBias) || p.has(Role::kC) || p.activation != Activation::kNone || p.alpha != 1.0f)
    return "the weight-only 4-bit GEMM has no fused epilogue (bias, c, activation, alpha)";
  // 16-byte loads: x rows of lda bf16 and weight rows of ldb nibbles must start 16-byte aligned.
  if (p.lda % 8 || p.stride_a % 8 || p.ldb % 32 || p.stride_b % 32)
    return "the weight-only 4-bit GEMM needs lda and the lhs batch stride multiples of 8 and ldb and the "
           "weight batch stride multiples of 32 elements (16-byte rows)";
  if (p.m > (int64_t(1) << 30) || p.n > (int64_t(1) << 30) || p.k > (int64_t(1) << 30) || p.batch > 65535)
    return "the weight-only 4-bit GEMM takes m, n, k < 2^30 and batch <= 65535";
  w4::Params prm;
  prm.x = static_cast<const __nv_bfloat16*>(L.in(Role::kA));
  prm.w = static_cast<const uint8_t*>(L.in(Role::kB));
  prm.s = static_cast<const uint8_t*>(L.in(Role::kSFB));
  prm.alpha = static_cast<const float*>(L.in(Role::kScale));
  prm.out = L.out;
  prm.m = static_cast<int>(p.m);
  prm.n = static_cast<int>(p.n);
  prm.k = static_cast<int>(p.k);
  prm.lda = p.lda;
  prm.ldb = p.ldb;
  prm.stride_x = p.stride_a;
  prm.stride_w = p.stride_b;
  prm.stride_s = p.stride_b != 0 ? p.sf_per_batch(p.n) : 0;
  if (p.sf_vec == 32) return by_output<32>(L, prm);
  if (p.sf_vec == 16) return by_output<16>(L, prm);
  return "the weight-only 4-bit GEMM takes sf_vec 32 (MXFP4) or 16 (NVFP4), got " + std::to_string(p.sf_vec);
}

}  // namespace jax_tmem
