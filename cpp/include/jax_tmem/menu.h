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

// ---- split-K and swap-AB: entries 11-14 of both menus, one plan ----------------------------------------
// 11-13: swap-AB for decode (M <= 64, K-major A). The kernel computes out^T = B A^T: the weight fills
//        the 128-row side and the M activation rows a narrow N of 16 / 32 / 64, so no shared memory or
//        L2 traffic goes to zero rows. 14: 128x128 tiles with split-K, for few tiles and a long K.
// All four write f32 partial sums to a workspace (the custom call's second output) and finish in the
// reduce pass (kernels/splitk_reduce.cuh), in a fixed order.
constexpr int kSwap16 = 11, kSwap32 = 12, kSwap64 = 13, kSplitK128 = 14;
inline bool is_swap_ab(int config) { return config >= kSwap16 && config <= kSwap64; }
inline bool is_partial(int config) { return config >= kSwap16 && config <= kSplitK128; }
inline int partial_block_n(int config) {
  return config == kSwap16 ? 16 : config == kSwap32 ? 32 : config == kSwap64 ? 64 : 128;
}
inline const char* partial_name(int config) {
  switch (config) {
    case kSwap16: return "swap-AB 128(N)x16(M), split-K";
    case kSwap32: return "swap-AB 128(N)x32(M), split-K";
    case kSwap64: return "swap-AB 128(N)x64(M), split-K";
    default: return "128x128, split-K";
  }
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
  k128x16SwapAB = kSwap16,  // wgmma N = 16 / 32 / 64 (see above); 9-12 ring slots of 18-24 KB
  k128x32SwapAB = kSwap32,
  k128x64SwapAB = kSwap64,
  k128x128SplitK = kSplitK128,
};

inline bool sm90_valid(int config) { return config >= -1 && config <= 14 && config != 4; }

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
    case Sm90::k128x16SwapAB: case Sm90::k128x32SwapAB: case Sm90::k128x64SwapAB:
      return partial_name(static_cast<int>(t));
    case Sm90::k128x128SplitK: return "128x128 cooperative, split-K";
  }
  return "?";
}

// ---- sm_100a / sm_103a (tcgen05) --------------------------------------------------------------------
enum class Sm100 : int {
  k128x128 = 0,
  k128x256 = 1,
  k256x256Pair = 4,
  k128x256TmaStore = 8,
  k256x256PairTmaStore = 9,
  k128x16SwapAB = kSwap16,  // 1-CTA, M = 128 tcgen05.mma with N = 16 / 32 / 64 (see above)
  k128x32SwapAB = kSwap32,
  k128x64SwapAB = kSwap64,
  k128x128SplitK = kSplitK128,
};

inline bool sm100_valid(int config) {
  return config == -1 || config == 0 || config == 1 || config == 4 || config == 8 || config == 9 || is_partial(config);
}

inline const char* sm100_name(Sm100 t) {
  switch (t) {
    case Sm100::k128x128: return "128x128 1-CTA";
    case Sm100::k128x256: return "128x256 1-CTA";
    case Sm100::k256x256Pair: return "256x256 CTA pair (cta_group::2)";
    case Sm100::k128x256TmaStore: return "128x256 1-CTA, TMA-store epilogue";
    case Sm100::k256x256PairTmaStore: return "256x256 CTA pair (cta_group::2), TMA-store epilogue";
    case Sm100::k128x16SwapAB: case Sm100::k128x32SwapAB: case Sm100::k128x64SwapAB:
      return partial_name(static_cast<int>(t));
    case Sm100::k128x128SplitK: return "128x128 1-CTA, split-K";
  }
  return "?";
}

// The sm100 kernel families (cpp/src/sm100_instances.def) are compiled for sm_100a and sm_103a, but
// kind::i8 exists on sm_100a only (ptxas rejects it for sm_103a): the int8 families run on cc 100 only.
inline bool sm100_family_runs(int cc, DType a_type) { return a_type != DType::kS8 || cc == 100; }

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

// Tiles of a partial entry (128 rows, in the kernel's orientation: for swap-AB rows = N, columns = M).
inline int64_t partial_tiles(const GemmProblem& p, int config) {
  const bool swap = is_swap_ab(config);
  const int64_t rows = swap ? p.n : p.m, cols = swap ? p.m : p.n;
  const int bn = partial_block_n(config);
  return p.batch * ((rows + 127) / 128) * ((cols + bn - 1) / bn);
}

// The entry (`config` >= 0 forces it) and its splits (p.splits > 0 forces them, clamped to the K
// blocks). The heuristic, the same on both archs:
//  * M <= 64 with a K-major A (decode): swap-AB with the narrowest N that holds M;
//  * else the arch's dense choice `dense(p)` -> (entry, its tile count); if even that leaves half the
//    SMs idle and K is long (>= 32 blocks of 128 bytes): 128x128 with split-K.
// `partial_ok`: the dtype has partial entries (not int8). `ws_available` >= 0 caps the workspace: a
// heuristic plan that needs more falls back to one without (a forced entry is kept, and the launcher
// reports the short workspace).
template <class Dense>
inline Plan make_plan(const GemmProblem& p, int num_sms, int64_t ws_available, bool partial_ok, Dense dense) {
  const bool ws_ok = ws_available != 0 && partial_ok;
  int t;
  if (p.config >= 0) {
    t = p.config;
  } else if (ws_ok && !p.a_mn_major && p.m <= 64) {
    t = p.m <= 16 ? kSwap16 : p.m <= 32 ? kSwap32 : kSwap64;
  } else {
    int64_t tiles = 0;
    t = dense(p, &tiles);
    if (ws_ok && 2 * tiles <= num_sms && k_blocks_128B(p) >= 32) t = kSplitK128;
  }
  Plan plan{t, 1, 0};
  if (is_partial(t)) {
    const int64_t kb = k_blocks_128B(p);
    int64_t s = p.splits > 0 ? p.splits : split_count(partial_tiles(p, t), kb, num_sms);
    if (s > kb) s = kb;
    plan.splits = static_cast<int>(s < 1 ? 1 : s);
    plan.ws_floats = workspace_floats(p, plan.splits);
    if (p.config < 0 && ws_available >= 0 && plan.ws_floats > ws_available)
      return make_plan(p, num_sms, 0, partial_ok, dense);
  }
  return plan;
}

// sm_90a: the widest cooperative 128-row tile that fills the SMs (wider tiles load fewer bytes per
// FLOP), with the TMA-store epilogue where the output rows allow it (measured 2026-11-21 12:08 on the
// H200, interleaved sweep: 128x256 TMA store 1.009-1.016 x jnp.dot on the large bf16 shapes and 1.375 x
// on fp8 8192^3, against 0.88-0.94 and 1.26 for the register epilogue).
inline Plan sm90_plan(const GemmProblem& p, int num_sms, int64_t ws_available = -1) {
  return make_plan(p, num_sms, ws_available, true, [num_sms](const GemmProblem& q, int64_t* tiles) {
    static constexpr int kWidths[] = {256, 128, 64};
    const int block_n = widest_filling_tile_n(q, num_sms, kWidths, 3);
    const bool tma = out_tma_ok(q);
    *tiles = q.batch * ((q.m + 127) / 128) * ((q.n + block_n - 1) / block_n);
    const Sm90 t = block_n == 256 ? (tma ? Sm90::k128x256TmaStore : Sm90::k128x256)
                 : block_n == 128 ? (tma ? Sm90::k128x128TmaStore : Sm90::k128x128) : Sm90::k128x64;
    return static_cast<int>(t);
  });
}

// sm_100a / sm_103a: sm100_choose's dense entry; int8 has no partial entries (its s32 accumulators
// would be summed in f32).
inline Plan sm100_plan(const GemmProblem& p, int num_sms, int64_t ws_available = -1) {
  return make_plan(p, num_sms, ws_available, p.a_type != DType::kS8, [num_sms](const GemmProblem& q, int64_t* tiles) {
    const Sm100 t = sm100_choose(q, num_sms);
    const int tm = (t == Sm100::k256x256Pair || t == Sm100::k256x256PairTmaStore) ? 256 : 128;
    const int bn = t == Sm100::k128x128 ? 128 : 256;
    *tiles = q.batch * ((q.m + tm - 1) / tm) * ((q.n + bn - 1) / bn);
    return static_cast<int>(t);
  });
}

}  // namespace jax_tmem::menu
