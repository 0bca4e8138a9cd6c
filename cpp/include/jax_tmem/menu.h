// jax_tmem: the kernel menus and the tile heuristics, per arch (host code, no CUDA). Which compiled
// instantiation a problem runs is decided here, once: the CUDA dispatchers (sm90_gemm.cu,
// sm100_gemm.cu) launch what these functions return, and the extension exposes the same functions to
// Python so the JAX_TMEM_LOG line and the report name the menu entry (and CI tests the heuristic).
#pragma once

#include <cstdint>

#include "jax_tmem/gemm_problem.h"

namespace jax_tmem::menu {

// The widest BLOCK_N of `widths` (widest first) whose 128-row tiles give every SM at least one tile
// (wider tiles load fewer bytes per FLOP); if none does (small M and N, e.g. decode), the narrowest,
// which gives the most CTAs and so the most memory parallelism. Deterministic.
inline int widest_filling_tile_n(const GemmProblem& p, int num_sms, const int* widths, int count) {
  for (int i = 0; i < count; ++i) {
    const int64_t tiles = p.batch * ((p.m + 127) / 128) * ((p.n + widths[i] - 1) / widths[i]);
    if (tiles >= num_sms) return widths[i];
  }
  return widths[count - 1];
}

// ---- sm_90a (wgmma) ---------------------------------------------------------------------------------
// The `config` attribute numbers the entries (4 is the sm_100a CTA pair, not an sm_90a entry).
enum class Sm90 : int {
  k128x128 = 0,
  k128x256 = 1,
  k128x64 = 2,
  k128x128PingPong = 3,
  k128x256Staged = 5,
  k128x256Cluster2 = 6,
  k128x128Cluster2 = 7,
  k128x256TmaStore = 8,
  k128x128TmaStore = 9,
  k128x256Cluster2TmaStore = 10,
};

inline bool sm90_valid(int config) { return config >= -1 && config <= 10 && config != 4; }

// The TMA-store epilogue writes the output through a tensor map: its rows (and so its batch stride)
// must be a multiple of 16 bytes. Otherwise the heuristic takes the register epilogue.
inline bool out_tma_ok(const GemmProblem& p) { return (p.n * dtype_bytes(p.out_type)) % 16 == 0; }

inline const char* sm90_name(Sm90 t) {
  switch (t) {
    case Sm90::k128x128: return "128x128 cooperative";
    case Sm90::k128x256: return "128x256 cooperative";
    case Sm90::k128x64: return "128x64 cooperative";
    case Sm90::k128x128PingPong: return "128x128 ping-pong";
    case Sm90::k128x256Staged: return "128x256 cooperative, staged epilogue";
    case Sm90::k128x256Cluster2: return "128x256 cooperative, 2x1 cluster, B multicast";
    case Sm90::k128x128Cluster2: return "128x128 cooperative, 2x1 cluster, B multicast";
    case Sm90::k128x256TmaStore: return "128x256 cooperative, TMA-store epilogue";
    case Sm90::k128x128TmaStore: return "128x128 cooperative, TMA-store epilogue";
    case Sm90::k128x256Cluster2TmaStore: return "128x256 cooperative, 2x1 cluster, B multicast, TMA-store epilogue";
  }
  return "?";
}

// `config` when set (>= 0), else the heuristic over the cooperative 128-row tiles, with the TMA-store
// epilogue where the output rows allow it (measured 2026-11-21 12:08 on the H200, interleaved sweep:
// 128x256 TMA store 1.009-1.016 x jnp.dot on the large bf16 shapes and 1.375 x on fp8 8192^3, against
// 0.88-0.94 and 1.26 for the register epilogue).
inline Sm90 sm90_choose(const GemmProblem& p, int num_sms) {
  if (p.config >= 0) return static_cast<Sm90>(p.config);
  static constexpr int kWidths[] = {256, 128, 64};
  const int block_n = widest_filling_tile_n(p, num_sms, kWidths, 3);
  const bool tma = out_tma_ok(p);
  if (block_n == 256) return tma ? Sm90::k128x256TmaStore : Sm90::k128x256;
  if (block_n == 128) return tma ? Sm90::k128x128TmaStore : Sm90::k128x128;
  return Sm90::k128x64;
}

// ---- sm_100a / sm_103a (tcgen05) --------------------------------------------------------------------
enum class Sm100 : int { k128x128 = 0, k128x256 = 1, k256x256Pair = 4, k128x256TmaStore = 8 };

inline bool sm100_valid(int config) {
  return config == -1 || config == 0 || config == 1 || config == 4 || config == 8;
}

inline const char* sm100_name(Sm100 t) {
  switch (t) {
    case Sm100::k128x128: return "128x128 1-CTA";
    case Sm100::k128x256: return "128x256 1-CTA";
    case Sm100::k256x256Pair: return "256x256 CTA pair (cta_group::2)";
    case Sm100::k128x256TmaStore: return "128x256 1-CTA, TMA-store epilogue";
  }
  return "?";
}

// CTA-pair 256x256 tiles when there are enough of them to give every pair of SMs one, else the widest
// 1-CTA tile that fills the GPU; `config` forces an entry. kind::i8 has no pair kernel: its pair
// choice runs the 128x256 1-CTA kernel.
inline Sm100 sm100_choose(const GemmProblem& p, int num_sms) {
  Sm100 t;
  if (p.config >= 0) {
    t = static_cast<Sm100>(p.config);
  } else {
    const int64_t pair_tiles = p.batch * ((p.m + 255) / 256) * ((p.n + 255) / 256);
    if (pair_tiles >= num_sms / 2) {
      t = Sm100::k256x256Pair;
    } else {
      static constexpr int kWidths[] = {256, 128};
      t = widest_filling_tile_n(p, num_sms, kWidths, 2) == 256 ? Sm100::k128x256 : Sm100::k128x128;
    }
  }
  if (t == Sm100::k256x256Pair && p.a_type == DType::kS8) t = Sm100::k128x256;
  return t;
}

}  // namespace jax_tmem::menu
