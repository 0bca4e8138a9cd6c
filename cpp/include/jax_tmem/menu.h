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
  // Decode (M <= 64): swap-AB. The kernel computes out^T = B A^T: the weight fills the 128-row side and
  // the M activation rows a narrow wgmma N of 16 / 32 / 64, so no shared memory or L2 traffic is spent
  // on zero rows and a ring slot holds 16 KB of weight (11-12 slots in flight per SM).
  k128x16SwapAB = 11,
  k128x32SwapAB = 12,
  k128x64SwapAB = 13,
  // Few tiles and a long K: 128x128 tiles with split-K.
  k128x128SplitK = 14,
};

inline bool sm90_valid(int config) { return config >= -1 && config <= 14 && config != 4; }

inline bool sm90_swap_ab(Sm90 t) {
  return t == Sm90::k128x16SwapAB || t == Sm90::k128x32SwapAB || t == Sm90::k128x64SwapAB;
}

// Entries that write f32 partials to the workspace and finish in the reduce pass (splitk_reduce.cuh).
inline bool sm90_partial(Sm90 t) { return sm90_swap_ab(t) || t == Sm90::k128x128SplitK; }

// Tile shape of an entry in the kernel's orientation (for swap-AB: rows = N, columns = M).
inline int sm90_block_n(Sm90 t) {
  switch (t) {
    case Sm90::k128x256: case Sm90::k128x256Staged: case Sm90::k128x256Cluster2: case Sm90::k128x256TmaStore:
    case Sm90::k128x256Cluster2TmaStore: return 256;
    case Sm90::k128x64: case Sm90::k128x64SwapAB: return 64;
    case Sm90::k128x16SwapAB: return 16;
    case Sm90::k128x32SwapAB: return 32;
    default: return 128;
  }
}
inline int sm90_tile_m(Sm90 t) {
  return (t == Sm90::k128x256Cluster2 || t == Sm90::k128x128Cluster2 || t == Sm90::k128x256Cluster2TmaStore) ? 256 : 128;
}

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
    case Sm90::k128x16SwapAB: return "swap-AB 128(N)x16(M), split-K";
    case Sm90::k128x32SwapAB: return "swap-AB 128(N)x32(M), split-K";
    case Sm90::k128x64SwapAB: return "swap-AB 128(N)x64(M), split-K";
    case Sm90::k128x128SplitK: return "128x128 cooperative, split-K";
  }
  return "?";
}

// What the dispatcher runs: the menu entry, the number of K splits, and the f32 workspace it needs
// (0 for entries that finish in their own epilogue). Python asks for the same plan at trace time and
// allocates the workspace as a second output of the custom call.
struct Plan {
  int config;
  int splits;
  int64_t ws_floats;
};

// K blocks of 128 bytes of the A operand's element type (the kernels' BLOCK_K).
inline int64_t k_blocks_128B(const GemmProblem& p) {
  const int64_t es = dtype_bytes(p.a_type) > 0 ? dtype_bytes(p.a_type) : 2;
  return (p.k * es + 127) / 128;
}

// Workspace of a split-K / swap-AB plan: splits x batch x M x ws_ld floats, ws_ld = N rounded up to 4
// (the output's orientation, whatever the kernel's).
inline int64_t workspace_ld(int64_t n) { return (n + 3) / 4 * 4; }
inline int64_t workspace_floats(const GemmProblem& p, int splits) {
  return static_cast<int64_t>(splits) * p.batch * p.m * workspace_ld(p.n);
}

// Splits so that the work units (tiles x splits) fill the SMs once: at most 8, and at least 4 K blocks
// per split. 1 when the tiles alone fill the GPU.
inline int split_count(int64_t tiles, int64_t k_blocks, int num_sms) {
  if (tiles >= num_sms) return 1;
  int64_t s = num_sms / tiles;
  if (s > 8) s = 8;
  if (s > k_blocks / 4) s = k_blocks / 4;
  return s < 1 ? 1 : static_cast<int>(s);
}

inline int64_t sm90_tiles(const GemmProblem& p, Sm90 t) {
  const int64_t rows = sm90_swap_ab(t) ? p.n : p.m, cols = sm90_swap_ab(t) ? p.m : p.n;
  const int tm = sm90_tile_m(t), bn = sm90_block_n(t);
  return p.batch * ((rows + tm - 1) / tm) * ((cols + bn - 1) / bn);
}

// The heuristic (`config` < 0) or the forced entry, and its splits (p.splits > 0 forces them, clamped
// to the K blocks). Heuristic:
//  * M <= 64 with a K-major A (decode): swap-AB with the narrowest wgmma N that holds M;
//  * else the widest cooperative 128-row tile that fills the SMs (wider tiles load fewer bytes per
//    FLOP), with the TMA-store epilogue where the output rows allow it (measured 2026-11-21 12:08 on the
//    H200, interleaved sweep: 128x256 TMA store 1.009-1.016 x jnp.dot on the large bf16 shapes and
//    1.375 x on fp8 8192^3, against 0.88-0.94 and 1.26 for the register epilogue);
//  * if even the narrowest tiles leave half the SMs idle and K is long: 128x128 with split-K.
// `ws_available` >= 0 caps the workspace: a heuristic plan that needs more falls back to one without
// (a forced entry is kept, and the launcher reports the short workspace).
inline Plan sm90_plan(const GemmProblem& p, int num_sms, int64_t ws_available = -1) {
  const bool ws_ok = ws_available != 0;
  Sm90 t;
  if (p.config >= 0) {
    t = static_cast<Sm90>(p.config);
  } else if (ws_ok && !p.a_mn_major && p.m <= 64) {
    t = p.m <= 16 ? Sm90::k128x16SwapAB : p.m <= 32 ? Sm90::k128x32SwapAB : Sm90::k128x64SwapAB;
  } else {
    static constexpr int kWidths[] = {256, 128, 64};
    const int block_n = widest_filling_tile_n(p, num_sms, kWidths, 3);
    const bool tma = out_tma_ok(p);
    t = block_n == 256 ? (tma ? Sm90::k128x256TmaStore : Sm90::k128x256)
      : block_n == 128 ? (tma ? Sm90::k128x128TmaStore : Sm90::k128x128) : Sm90::k128x64;
    if (ws_ok && 2 * sm90_tiles(p, t) <= num_sms && k_blocks_128B(p) >= 32) t = Sm90::k128x128SplitK;
  }
  Plan plan{static_cast<int>(t), 1, 0};
  if (sm90_partial(t)) {
    const int64_t kb = k_blocks_128B(p);
    int64_t s = p.splits > 0 ? p.splits : split_count(sm90_tiles(p, t), kb, num_sms);
    if (s > kb) s = kb;
    plan.splits = static_cast<int>(s < 1 ? 1 : s);
    plan.ws_floats = workspace_floats(p, plan.splits);
    if (p.config < 0 && ws_available >= 0 && plan.ws_floats > ws_available) {
      GemmProblem q = p;
      return sm90_plan(q, num_sms, 0);
    }
  }
  return plan;
}

inline Sm90 sm90_choose(const GemmProblem& p, int num_sms) { return static_cast<Sm90>(sm90_plan(p, num_sms).config); }

// ---- sm_100a / sm_103a (tcgen05) --------------------------------------------------------------------
enum class Sm100 : int { k128x128 = 0, k128x256 = 1, k256x256Pair = 4, k128x256TmaStore = 8, k256x256PairTmaStore = 9 };

inline bool sm100_valid(int config) {
  return config == -1 || config == 0 || config == 1 || config == 4 || config == 8 || config == 9;
}

inline const char* sm100_name(Sm100 t) {
  switch (t) {
    case Sm100::k128x128: return "128x128 1-CTA";
    case Sm100::k128x256: return "128x256 1-CTA";
    case Sm100::k256x256Pair: return "256x256 CTA pair (cta_group::2)";
    case Sm100::k128x256TmaStore: return "128x256 1-CTA, TMA-store epilogue";
    case Sm100::k256x256PairTmaStore: return "256x256 CTA pair (cta_group::2), TMA-store epilogue";
  }
  return "?";
}

// CTA-pair 256x256 tiles when there are enough of them to give every pair of SMs one, else the widest
// 1-CTA tile that fills the GPU; `config` forces an entry. kind::i8 has no pair kernel: its pair
// choice runs the 128x256 1-CTA kernel. The TMA-store epilogue entries (8, 9) are not chosen by the
// heuristic here: nothing has run on Blackwell, and the default keeps the direct-store epilogue until
// a B200 sweep (`benchmarks/sweep_configs.py --configs 4,9,1,8`) decides, as the H200 sweep did for
// sm_90a.
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
  if (t == Sm100::k256x256PairTmaStore && p.a_type == DType::kS8) t = Sm100::k128x256TmaStore;
  return t;
}

}  // namespace jax_tmem::menu
