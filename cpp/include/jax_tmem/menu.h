// jax_tmem: the kernel menus and the tile heuristics, per arch (host code, no CUDA). Which compiled
// instantiation a problem runs is decided here, once: the CUDA dispatchers (sm90_gemm.cu,
// sm100_gemm.cu) launch what these functions return, and the extension exposes the same functions to
// Python so the JAX_TMEM_LOG line and the report name the menu entry (and CI tests the heuristic).
#pragma once

#include <algorithm>
#include <cstdint>

#include "jax_tmem/gemm_problem.h"
#include "jax_tmem/kernel_config.h"
#include "jax_tmem/last_wave.h"
#include "jax_tmem/menu_decode.h"

namespace jax_tmem::menu {

// Tiles of 128 rows x block_n columns over the problem's batch x M x N output.
inline int64_t tiles_128(const GemmProblem& p, int block_n) {
  return p.batch * ((p.m + 127) / 128) * ((p.n + block_n - 1) / block_n);
}

// The widest BLOCK_N of `widths` (widest first) whose 128-row tiles give every SM at least one tile (wider tiles load
// fewer bytes per FLOP); if none does (small M and N, e.g. decode), the narrowest, which gives the most CTAs and so the
// most memory parallelism. Deterministic.
inline int widest_filling_tile_n(const GemmProblem& p, int num_sms, const int* widths, int count) {
  for (int i = 0; i < count; ++i) {
    if (tiles_128(p, widths[i]) >= num_sms) return widths[i];
  }
  return widths[count - 1];
}

// sm_90a: the widest BLOCK_N of `widths` (widest first) whose 128-row tiles keep >= 90 % of the SMs busy over whole
// waves (tiles / (waves x SMs)): wider tiles load fewer bytes per FLOP, but a last wave a quarter full idles the GPU
// for it. None: the one with the fullest waves (the widest among equals). (H200, 2026-11-24 19:31, sweep_configs.py,
// bf16 M = 256 of the 8B / 70B layer GEMMs: the old rule's choices 0.67-0.98 x XLA; 128x128 at 128 tiles 1.02 / 1.06 x,
// at 896 tiles 0.93 against 128x256's 0.81.) A 64-wide tile counts 0.85 of its fill (it loads its 128 A rows for half
// the columns of a 128-wide one): it wins only where the wider tiles' waves are emptier by more than that (H200,
// sweep_configs.py, x XLA: 57344 x 8192 at M = 128 (fills 0.85 / 0.85 / 0.97), 2026-11-25 04:36: 128x64 0.81 (e4m3
// 0.89) against 128x256 0.90 (0.96), 128x128 0.89 (0.93); 28672 x 4096 at M = 256, 2026-11-24 19:31: 128x64 0.84,
// 128x128 0.89, 128x256 0.87).
inline int widest_even_tile_n(const GemmProblem& p, int num_sms, const int* widths, int count) {
  int best = widths[count - 1];
  double best_fill = -1.0;
  for (int i = 0; i < count; ++i) {
    const int64_t tiles = tiles_128(p, widths[i]);
    const int64_t waves = (tiles + num_sms - 1) / num_sms;
    const double fill = static_cast<double>(tiles) / static_cast<double>(waves * num_sms) * (widths[i] == 64 ? 0.85 : 1.0);
    if (fill >= 0.9) return widths[i];
    if (fill > best_fill + 1e-9) best = widths[i], best_fill = fill;
  }
  return best;
}

// The TMA-store epilogue writes the output through a tensor map: its rows (and so its batch stride)
// must be a multiple of 16 bytes. Otherwise the heuristic takes the register epilogue.
inline bool out_tma_ok(const GemmProblem& p) { return (p.n * dtype_bytes(p.out_type)) % 16 == 0; }

// sm_90a: wgmma reads 8-bit operands from shared memory K-major only, so an 8-bit family with an MN-major operand is
// run by the decode entries alone: swap-AB (their A, the problem's weight, transposed in shared memory: Config::kATrans
// in kernels/sm90_gemm.cuh; family (weight, activation, MN, K)) and the Split::kDecode ones (the weight's fragments
// built in registers: kernels/dense_decode.cuh; family (activation, weight, K, MN)); the launcher refuses the other
// entries for it and Python reads the same rule (kernel_families' 5th field) to route only decode problems there.
inline constexpr bool sm90_swap_only_family(DType a, bool amn, bool bmn) { return dtype_bytes(a) == 1 && (amn || bmn); }
// The families that run decode problems only (kernel_families' 5th field): those, and a mixed_decode_pair
// (menu_decode.h), whose only kernels are the Split::kDecode entries.
inline constexpr bool sm90_decode_only_family(DType a, DType b, bool amn, bool bmn) {
  return sm90_swap_only_family(a, amn, bmn) || mixed_decode_pair(a, b);
}

// The sm100 kernel families (the JT_SM100_INSTANCE lines of cpp/src/instances.def) are compiled for sm_100a and sm_103a, but
// kind::i8 exists on sm_100a only (ptxas rejects it for sm_103a): the int8 families run on cc 100 only.
inline bool sm100_family_runs(int cc, DType a_type) { return a_type != DType::kS8 || cc == 100; }

// CTA-pair 256x256 tiles when there are enough of them to give every pair of SMs one, else the widest 1-CTA tile that
// fills the GPU. kind::i8 has no pair kernel: its pair choice is the 128x256 1-CTA kernel. The TMA-store entries are
// not chosen here (sm100_configs.def says why).
inline Sm100 sm100_choose(const GemmProblem& p, int num_sms) {
  const int64_t pair_tiles = p.batch * ((p.m + 255) / 256) * ((p.n + 255) / 256);
  if (pair_tiles >= num_sms / 2) return p.a_type == DType::kS8 ? Sm100::k128x256 : Sm100::k256x256Pair;
  static constexpr int kWidths[] = {256, 128};
  return widest_filling_tile_n(p, num_sms, kWidths, 2) == 256 ? Sm100::k128x256 : Sm100::k128x128;
}

// ---- split-K and swap-AB (the entries whose split is not kNone) --------------------------------------
// swap-AB, for decode (M <= 64, K-major A): the kernel computes out^T = B A^T: the weight fills the 128-row side and
// the M activation rows a narrow N of 16 / 32 / 64, so no shared memory or L2 traffic goes to zero rows. split-K:
// 128x128 tiles, for few tiles and a long K. Both write f32 partial sums to a workspace (the custom call's second
// output) and finish in the reduce pass (kernels/splitk_reduce.cuh), in a fixed order.

// What the dispatcher runs: the menu entry, the number of K splits, and the f32 workspace it needs (0 for entries that
// finish in their own epilogue). Python asks for the same plan at trace time and allocates the workspace as a second
// output of the custom call.
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

// K splits summed inside the kernel (no workspace, no reduce pass): a plan's `splits` < 0 means -splits K splits of an
// sm_90a split-K / swap-AB entry, each tile's splits launched as one thread-block cluster (split = rank), one unit per
// CTA, all resident at once; the splits' f32 sums meet in distributed shared memory and each CTA finishes the rows of
// its share of the consumer warps, adding the splits in order 0, 1, ... (the reduce pass's order: the same bits;
// kernels/sm90_epilogue.cuh split_fixup). At most kMaxClusterSplits (the portable cluster size). Forced with config
// (entry, -splits); where the clusters do not all fit at once the launcher refuses it. A swap-AB entry's last wave
// shared out (swap_tail, last_wave.h) is one K split.
inline int k_splits(int splits) { return swap_tail(splits) ? 1 : splits < 0 ? -splits : splits; }
inline bool splits_in_kernel(int splits) { return splits < -1 && !swap_tail(splits); }
constexpr int kMaxClusterSplits = 8;
// The tiles whose K splits can be summed in the kernel (the sm_90a Config's kSplitsInKernel): up to 192 wide, and 256
// wide for 16-bit and tf32 operands; the 8-bit 256-wide entry keeps its promotion registers beside the 128 accumulators
// per thread, and adding the splits there spilled.
constexpr int kMaxClusterSplitBlockN = 192;
constexpr bool cluster_splits_fit(int block_n, int elem_bytes) {
  return block_n <= kMaxClusterSplitBlockN || (block_n <= 256 && elem_bytes >= 2);
}

// A weight-multicast pair entry's K splits summed in the kernel (cluster_m -2; kernels/sm90_epilogue.cuh pair_fixup):
// the workspace holds one BLOCK_M x BLOCK_N slot of f32 sums per CTA of each split after the first, then a ready flag
// (a 32-bit word) each. `cluster_tiles`: the pairs' tiles (two token tiles each).
inline int64_t pair_split_ws_floats(int64_t cluster_tiles, int64_t splits, int ctas, int64_t tile_floats) {
  const int64_t slots = cluster_tiles * (splits - 1) * ctas;
  return splits > 1 ? slots * tile_floats + slots : 0;
}
inline int64_t pair_split_ws_floats(const GemmProblem& p, const KernelConfig& c, int64_t splits) {
  const int64_t rows = c.swap_ab() ? p.n : p.m, cols = c.swap_ab() ? p.m : p.n, ctas = c.cluster_ctas();
  const int64_t tiles = p.batch * ((rows + c.block_m - 1) / c.block_m) * ((cols + c.block_n * ctas - 1) / (c.block_n * ctas));
  return pair_split_ws_floats(tiles, splits, static_cast<int>(ctas), int64_t(c.block_m) * c.block_n);
}
inline bool pair_splits(const KernelConfig& c) { return c.partial() && c.cluster_m < -1; }

// Splits so that the work units (tiles x splits) fill the SMs once: at most 8, and at least 4 K blocks per split. 1
// when the tiles alone fill the GPU. At most 2 once the tiles alone occupy a quarter of the SMs: a decode GEMM streams
// its weight at full speed from ~64 busy SMs, and every extra split adds partial sums to write and reduce (H200 sweep
// of forced splits, 2026-11-23 23:32, docs/PERF.md: 32 tiles, M = 16: 2 splits 0.83 x XLA, 4 splits 0.76; M = 64: 0.99
// against 0.87).
inline int split_count(int64_t tiles, int64_t k_blocks, int num_sms) {
  if (tiles >= num_sms) return 1;
  int64_t s = num_sms / tiles;
  if (s > 8) s = 8;
  if (tiles * 4 >= num_sms && s > 2) s = 2;
  if (s > k_blocks / 4) s = k_blocks / 4;
  return s < 1 ? 1 : static_cast<int>(s);
}

// The swap-AB entries (decode): K splits only while the tiles busy fewer than half the SMs, as many as bring the work
// units to about half, and each split at least 8 KB of every weight row (64 blocks of 128 bytes). A weight streams near
// full bandwidth from ~64 SMs, and each split adds partial sums and a reduce pass (H200, 2026-11-24 15:08,
// sweep_configs.py, x XLA: M = 64, 32 tiles of 128 rows: K = 4096 1 split 1.008, 2 splits 0.997, 4 0.880; K = 14336
// 1.056 / 1.002 with 2 / 4 splits, 0.934 with 1; 48 tiles, K = 4096: 1.073 / 0.934 with 1 / 2; M = 16, 64 tiles of 64
// rows: 1 split 1.016-1.044, 2 splits 0.838-0.968). At most 8. An 8-bit weight's splits need only 2 KB of each row (16
// blocks): its 128-row entries stream 16 KB ring slots with a promotion per slot and gain from the extra CTAs (H200,
// 2026-11-24 19:24, e4m3 M = 64, 32 tiles, 1 / 2 splits: K = 4096 0.96 / 1.00, K = 14336 0.77 / 1.00).
inline int decode_split_count(int64_t tiles, int64_t k_blocks, int num_sms, int weight_bytes) {
  const int min_blocks = weight_bytes == 1 ? 16 : 64;
  int64_t s = (num_sms / 2) / (tiles < 1 ? 1 : tiles);
  if (s > 8) s = 8;
  if (s > k_blocks / min_blocks) s = k_blocks / min_blocks;
  return s < 1 ? 1 : static_cast<int>(s);
}

// Tiles of a partial entry (block_m rows, in the kernel's orientation: for swap-AB rows = N, columns = M).
inline int64_t partial_tiles(const GemmProblem& p, const KernelConfig& c) {
  const int64_t rows = c.swap_ab() ? p.n : p.m, cols = c.swap_ab() ? p.m : p.n;
  return p.batch * ((rows + c.block_m - 1) / c.block_m) * ((cols + c.block_n - 1) / c.block_n);
}

// Why a plan cannot sum its K splits inside the kernel (k_splits), or "": the sm_90a split-K / swap-AB entries whose
// tiles fit (cluster_splits_fit; `elem_bytes`: the operands' width), at most kMaxClusterSplits. Each CTA runs one unit
// and meets only the CTAs of its own cluster, so more units than the GPU holds at once run in waves (slower, still
// right). A weight-multicast pair entry's (cluster_m -2) meet through the workspace (pair_split_ws_floats), each split
// on a pair of its own.
inline std::string in_kernel_refusal(bool sm90, const KernelConfig& c, int splits, int elem_bytes) {
  if (!sm90) return "K splits summed inside the kernel (splits < 0) are sm_90a's only";
  if (!c.partial()) return std::string("entry ") + c.name + " has no K splits (splits < 0 takes a split-K entry)";
  if (c.cluster_m > 1)
    return std::string("entry ") + c.name +
           " runs in clusters of its own: its K splits go through the workspace (splits > 0)";
  if (!pair_splits(c) && !cluster_splits_fit(c.block_n, elem_bytes))
    return std::string("entry ") + c.name + " keeps " + std::to_string(c.block_n / 2) +
           " accumulators per thread beside its 8-bit promotion: K splits summed inside the kernel take 8-bit tiles "
           "at most " + std::to_string(kMaxClusterSplitBlockN) + " wide";
  if (k_splits(splits) > kMaxClusterSplits)
    return "K splits summed inside the kernel: at most " + std::to_string(kMaxClusterSplits) +
           " (one cluster of CTAs per tile), not " + std::to_string(k_splits(splits));
  return "";
}

// The entry (`config` >= 0 forces it; the caller checked it is in `table`) and its splits (p.splits > 0
// forces them, clamped to the K blocks). The heuristic, the same on both archs:
//  * M <= the policy's max_m with a K-major A (decode): swap-AB with the narrowest N that holds M;
//  * else the arch's dense choice `dense(p)` -> (entry, its tile count); if even that leaves half the
//    SMs idle (three quarters: the policy's split_k_idle) and K is long (>= 32 blocks of 128 bytes): the
//    split-K entry.
// An arch's decode (swap-AB) policy: `rows` > 0 prefers the entries of that many rows; `bandwidth_splits` takes
// decode_split_count for their K splits, else split_count. The default: the narrowest entry, split_count (sm_100a,
// unmeasured). `max_m` > 0: the largest M given to the swap-AB entries (an M wider than every
// entry runs in column tiles of the widest); 0: the widest entry's block_n. `split_k_idle`: the split-K entry replaces
// a dense plan whose tiles x split_k_idle <= SMs (2: half the SMs idle; 4: three quarters), with K >= 32 blocks.
struct DecodePolicy {
  int rows = 0;
  bool bandwidth_splits = false;
  int max_m = 0;
  int split_k_idle = 2;
};

// `partial_ok`: the dtype has partial entries (not int8). `ws_available` >= 0 caps the workspace: a
// heuristic plan that needs more falls back to one without (a forced entry is kept, and the launcher
// reports the short workspace).
template <class Dense>
inline Plan make_plan(const ConfigTable& table, const GemmProblem& p, int num_sms, int64_t ws_available,
                      bool partial_ok, DecodePolicy decode, Dense dense) {
  const bool ws_ok = ws_available != 0 && partial_ok;
  const KernelConfig* t;
  if (p.config >= 0) {
    t = table.find(p.config);
  } else if (ws_ok && !p.a_mn_major && p.m <= (decode.max_m > 0 ? decode.max_m : table.widest(Split::kSwapAB))) {
    t = decode.rows > 0 ? table.narrowest(Split::kSwapAB, p.m, decode.rows) : nullptr;
    if (t == nullptr) t = table.narrowest(Split::kSwapAB, p.m);
    if (t == nullptr) t = table.narrowest(Split::kSwapAB, table.widest(Split::kSwapAB));
  } else {
    int64_t tiles = 0;
    t = &table.at(dense(p, &tiles));
    const int64_t kb = k_blocks_128B(p);
    if (ws_ok && decode.split_k_idle * tiles <= num_sms && kb >= 32) t = table.narrowest(Split::kSplitK, 0);
  }
  Plan plan{t->id, 1, 0};
  if (t->partial()) {
    const int64_t k128 = k_blocks_128B(p), kb = (k128 + t->k_chunks - 1) / t->k_chunks;  // ring slots along K
    const int64_t tiles = partial_tiles(p, *t);
    if (p.config >= 0 && splits_in_kernel(p.splits)) {  // forced: summed inside the kernel (see k_splits)
      const int64_t s = std::min<int64_t>(-p.splits, kb);
      plan.splits = s > 1 ? -static_cast<int>(s) : 1;
      if (pair_splits(*t)) plan.ws_floats = pair_split_ws_floats(p, *t, s);  // (else no workspace)
      return plan;
    }
    int64_t s = p.splits;
    if (s <= 0)
      s = t->swap_ab() && decode.bandwidth_splits ? decode_split_count(tiles, k128, num_sms, dtype_bytes(p.b_type))
                                                  : split_count(tiles, kb, num_sms);
    if (s > kb) s = kb;
    plan.splits = static_cast<int>(s < 1 ? 1 : s);
    // One split: the kernel finishes the output itself (no partials, no workspace, no reduce pass).
    plan.ws_floats = plan.splits > 1 ? workspace_floats(p, plan.splits) : 0;
    if (p.config < 0 && ws_available >= 0 && plan.ws_floats > ws_available)
      return make_plan(table, p, num_sms, 0, partial_ok, decode, dense);
  }
  return plan;
}

// sm_90a: the widest cooperative 128-row tile that keeps the SMs busy in whole waves (widest_even_tile_n), with the
// TMA-store epilogue where the output rows allow it (H200 2026-11-21 12:08: 128x256 TMA store 1.009-1.016 x jnp.dot on
// the large bf16 shapes, 1.375 x on fp8 8192^3, against 0.88-0.94 / 1.26 for the register epilogue); at 128x256 the
// entry whose stores run under the next tile's first MMAs (20; Nsight Compute 2026-11-25 13:31: 0.2-0.9 % fewer cycles
// than 8); at 128x128 that overlap lost (0.921-0.954 x XLA against 0.950-0.966), so 9 stays; in 2x1 clusters (22) where
// sm90_cluster_pays. Decode of M <= 32 rows: the 64-row swap-AB entries (512-byte weight rows per TMA request, twice
// the CTAs), except for an MN-major 8-bit weight, which only the 128-row entries transpose; M of 33-64 keeps the
// 128-row entry for 16-bit weights (the 64-row one holds 3 ring slots at N = 64; H200 2026-11-24, x XLA, 8B layer
// GEMMs, bf16: M = 16 64-row 0.95-1.04, 128-row 0.90-0.99; M = 32 0.94-1.10 / 0.94-1.06; M = 64 0.88-1.05 / 0.96-1.07);
// a K-major 8-bit weight takes the 64-row entry up to M = 64 (2026-11-25 04:36, e4m3: better on 7 of 8 shapes). K
// splits: decode_split_count, except for the transposing (MN-major 8-bit weight) kernels, whose consumers are busy
// transposing: they keep split_count's more CTAs (8B e4m3 (K, N), 2026-11-24 15:25: 1.51 / 3.85 x XLA at M = 1 / 16
// with decode_split_count, 2.58 / 6.27 with split_count); sm_100a keeps split_count (unmeasured). M of 65-256 with an
// MN-major 8-bit weight: the 128- and 256-token swap-AB entries (18, 19), the only sm_90a kernels that read such a
// weight in place; a K-major weight keeps the dense entries above M = 64. Split-K only with three quarters of the SMs
// idle (2026-11-25 03:56, M = 128, x XLA: 4096 x 4096 bf16 128x64 0.990 against split-K over 4 0.769, e4m3 1.027 /
// 0.682; in the 8B chain, H100 2026-11-26 09:54, the 4096 x 14336 down projection split over 4 204.3 us per layer
// against 197.6 unsplit: the partial sums and the reduce pass cost more than the idle SMs). 128x256 in (2,1,1) clusters
// sharing B (22) where the heuristic's 20 shares no wave (cluster entries keep whole tiles): 16-bit operands and
// outputs, an even number of 128-row tiles, M >= 1024 and more than one wave (Nsight Compute at base clocks, cycles of
// 22 against 20: H200 2026-11-25 13:31-16:39 -0.1 to -1.8 %, H100 -1.2 to 0 % on 4096-16384 shapes; 15-25 % fewer DRAM
// bytes everywhere, less power at the cap).
inline bool sm90_cluster_pays(const GemmProblem& p, int64_t tiles, int num_sms) {
  return dtype_bytes(p.a_type) == 2 && dtype_bytes(p.out_type) == 2 && p.m >= 1024 && tiles > num_sms &&
         ((p.m + 127) / 128) % 2 == 0;
}

inline constexpr int kSm90DecodeMaxM = 64;
// A 16-bit decode GEMM whose 64-row swap-AB tiles, 2 K splits each, fit on the SMs at once: those tiles, their
// 2 splits summed in a cluster of 2 CTAs (k_splits; no workspace, no reduce pass), where that gives at least
// as many CTAs as the plan `plan` (so not where decode_split_count's reduce-pass splits give more: 4 tiles x 8)
// and each split keeps 16 K blocks of 128 bytes. Hopper's SMs come in pairs (TPCs), so every SM can hold one
// CTA of a 2-CTA cluster (where fewer are resident, the rest run in a second wave). H200, 2026-11-27 18:36,
// bench_decode.py --variants, 8B layer, bf16, 5 rounds, xla / ours: M = 64 (O and down projections, 4096 x 4096 and 14336 ->
// 4096: 64 tiles each) 0.95 -> 1.002 (the 128-row entry's 32 CTAs, and 2 splits with a reduce pass); M = 32
// 0.96 -> 0.971, M = 16 0.95 -> 0.959. The 6144-wide QKV (96 tiles) on 128-row tiles in clusters of 2 lost
// (M = 64: 0.964 against 0.994; M = 32 on 64x32: 0.955 against 0.971).
// M of 65-128 (a dense plan: 64 tiles of 128x64 on half the SMs for N = 4096): the 128-row entry's 64-token
// tiles (two per 128 tokens), 2 K splits in a cluster, under the same rule. H200, 2026-11-29 09:58,
// bench_decode.py --variants, 8B layer (O and down), M = 128, xla / it: bf16 0.93 -> 0.956; e4m3 0.92 ->
// 0.922 (not taken: 8-bit weights keep their plans).
inline constexpr int kSm90ClusterDecodeMinKBlocks = 32, kSm90ClusterDecodeMaxM = 128;
inline Plan sm90_cluster_decode(const GemmProblem& p, int num_sms, const Plan& plan) {
  const KernelConfig& c = kSm90Table.at(static_cast<Sm90>(plan.config));
  const bool dense = !c.swap_ab() && p.m > kSm90DecodeMaxM && p.m <= kSm90ClusterDecodeMaxM && !p.a_mn_major;
  if (!(c.swap_ab() || dense) || dtype_bytes(p.b_type) != 2 || k_blocks_128B(p) < kSm90ClusterDecodeMinKBlocks)
    return plan;
  const KernelConfig* t = dense ? kSm90Table.narrowest(Split::kSwapAB, kSm90DecodeMaxM, 128)
                                : kSm90Table.narrowest(Split::kSwapAB, p.m, 64);
  if (t == nullptr) return plan;
  const int64_t tiles = partial_tiles(p, *t), ctas = partial_tiles(p, c) * k_splits(plan.splits);
  if (tiles * 2 < ctas || tiles * 2 > num_sms || !in_kernel_refusal(true, *t, -2, 2).empty())
    return plan;  // (one wave: every unit on its own SM)
  return Plan{t->id, -2, 0};
}

// A swap-AB entry's last wave shared out by `share` (tail_share's ctas + waves x grid; swap_tail): where the entry
// can and the tiles leave a partial wave (tail_split_ok) and the workspace holds the pieces, else whole tiles.
inline Plan sm90_swap_tail_plan(const GemmProblem& p, const KernelConfig& c, int64_t share, int num_sms,
                                int64_t ws_available) {
  const bool transposed = sm90_swap_only_family(p.b_type, p.b_mn_major, false);
  if (!swap_tail_kernel(c.swap_ab(), c.cluster_ctas(), c.block_m, c.block_n, transposed)) return Plan{c.id, 1, 0};
  const int64_t tiles = partial_tiles(p, c), kb = (k_blocks_128B(p) + c.k_chunks - 1) / c.k_chunks;
  const int64_t ws = tail_ws_floats(tail_share(share, num_sms).ctas, int64_t(c.block_m) * c.block_n);
  if (!tail_split_ok(tiles, num_sms, share, kb) || (ws_available >= 0 && ws > ws_available)) return Plan{c.id, 1, 0};
  return Plan{c.id, swap_tail_splits(share), ws};
}

// 129-192 tokens against a weight of at least as many 128-row tiles as SMs (a gate / up projection): entry 37, the
// swap-AB tile 192 tokens wide in clusters of 4 weight tiles sharing the tokens by multicast, one K split, instead
// of the dense plans' two 128-row token tiles (256 rows computed: the 8B layer at 192 tokens took about its time at
// 256) or, for an 8-bit (K, N) weight, the 256-token entry 19. H200, 2026-11-29 15:30-15:46, bench_decode.py
// --variants, 5-7 rounds (3 for 70B), xla / ours: 8B layer (N = 28672), NK bf16 at 136 / 160 / 192 tokens 0.67 /
// 0.71 / 0.75 -> 0.735 / 0.777 / 0.822, e4m3 0.94 / 0.78 / 0.82 -> 1.001 / 0.820 / 0.843; KN bf16 at 160 / 192
// 0.68 / 0.76 -> 0.729 / 0.817, e4m3 4.87 / 4.80 -> 5.09 / 5.01; 70B layer (N = 57344) at 144 / 192, us per layer,
// bf16 722 / 744 -> 700 / 711, e4m3 384 / 393 -> 374 / 390. The same tile alone (35) or in pairs (36) gained
// 1-3 % less at 8B; 35 on the narrower weights (QKV, O, down: with K splits) lost or did not gain.
inline constexpr int kSm90WideTokensMinM = 129, kSm90WideTokensMaxM = 192;
inline bool sm90_129_192_tokens(const GemmProblem& p) {
  return p.m >= kSm90WideTokensMinM && p.m <= kSm90WideTokensMaxM && p.batch == 1 && !p.a_mn_major &&
         p.a_type != DType::kS8 && dtype_bytes(p.a_type) == dtype_bytes(p.b_type) && dtype_bytes(p.a_type) <= 2;
}
// At K >= 8192 also a weight of over half as many tiles as SMs (41's / 38's two token tiles each do not fit: the 70B
// QKV, 80 tiles; not an 8-bit (K, N) weight, unmeasured): 40's / 37's CTAs, not the dense plans / 38. H100, 2026-12-07
// (docs/PERF.md), 70B layer time: at 144 / 160 tokens bf16 -2.3 / -2.7 %, e4m3 -3.4 / -3.5 %; at 176 / 192 (beside
// the O / down on 39) bf16 -0.7 / -1.0 %, e4m3 -1.0 / -2.7 %.
inline constexpr int kSm90Tokens160MaxM = 160;
inline constexpr int64_t kSm90PairSplitsMinK = 8192;
inline bool sm90_wide_tokens(const GemmProblem& p, int num_sms) {
  const int64_t tiles = (p.n + 127) / 128;
  return sm90_129_192_tokens(p) && (tiles >= num_sms || (p.k >= kSm90PairSplitsMinK && 2 * tiles > num_sms &&
                                                          !sm90_swap_only_family(p.b_type, p.b_mn_major, false)));
}
// 129-160 tokens: both rules on token tiles of 160 / 80 (entries 40 / 41: no 192-token padding; 37 / 38 above it).
// H200, 2026-11-29 22:44, bench_decode.py --variants, the old plans forced beside the rule, 5 rounds (70B 3), xla / it
// at 160 / 144 / 136 tokens, old -> rule: 8B bf16 (N, K) 0.83 / 0.81 / 0.82 -> 0.88 / 0.86 / 0.86, (K, N) 0.81 / 0.80
// / 0.80 -> 0.87 / 0.85 / 0.85; e4m3 (N, K) 0.84 / 0.83 / 1.05 -> 0.87 / 0.85 / 1.09, (K, N) 5.29 / 5.33 / 5.45 ->
// 5.48 / 5.50 / 5.63; 70B at 144 bf16 0.74 -> 0.80, e4m3 0.78 -> 0.83. O / down kept on 38: 0-1 % less than on 41.
inline Sm90 sm90_wide_tokens_entry(const GemmProblem& p) {
  return p.m <= kSm90Tokens160MaxM ? Sm90::k128x160SwapABCluster4 : Sm90::k128x192SwapABCluster4;
}
// 161-192 tokens where the weight's tiles run as more than two waves and leave at most half a wave (the 70B gate / up:
// 448 tiles, 3 waves + 52 on 132 SMs): entry 35 (192 wide, no cluster) with its last wave shared along K by every SM
// (menu::swap_tail, last_wave.h), instead of 37. H200, 2026-11-30 08:11-08:14, bench_decode.py --variants, 70B layer,
// NK, xla / it (us per layer): bf16 at 192 tokens, 3 rounds, 37 0.92 (693.2), 35 shared 0.950 (653.7), with the wave
// before it too 0.921; 5 rounds, 37 0.91 (696.4), 35 whole 0.904 (685.2), shared 0.962 (662.0); at 168 tokens 0.81
// (678.2) / 0.780 (687.8) / 0.825 (652.3); e4m3 at 192 0.90 (381.4) / 0.888 (385.5) / 0.908 (377.7). Lost where most
// of a wave is left (8B gate / up, 224 tiles, 92 left: 35 shared 0.789-0.822 against 37's 0.83-0.87 at 176 / 192
// tokens; 13 at 64 tokens 0.937 against 0.99, bandwidth-bound: the SMs of a partial wave still read at full speed).
inline Plan sm90_wide_tokens_shared(const GemmProblem& p, int num_sms, int64_t ws_available) {
  const KernelConfig& c = kSm90Table.at(Sm90::k128x192SwapAB);
  const int64_t tiles = partial_tiles(p, c), rem = tiles % num_sms;
  if (p.m <= kSm90Tokens160MaxM || tiles <= 2 * num_sms || rem == 0 || rem * 2 > num_sms) return Plan{-1, 0, 0};
  const Plan plan = sm90_swap_tail_plan(p, c, num_sms, num_sms, ws_available);
  return swap_tail(plan.splits) ? plan : Plan{-1, 0, 0};
}
// 129-192 tokens against a narrower weight (QKV, O, down): two token tiles per weight tile, 80 wide at 129-160 tokens
// (41), 96 above (38), not the dense plans' 128-row ones nor an 8-bit (K, N) weight's entry 19: 2 K splits summed in a
// cluster where twice the tiles fit on the SMs at once, else one split where the tiles do (not for an 8-bit (K, N)
// weight, transposed per CTA). At K >= 8192 (not the 8B O) the same tiles in weight-multicast pairs, a pair per split
// (48 / 39; pair_fixup in a pool workspace, flag_pool.h): at 129-160 tokens, also where they fill the SMs twice over;
// above, only there (where 38 runs one split). Not for an 8-bit (K, N) weight. docs/PERF.md, xla / ours, old -> rule:
// H200 2026-11-29 19:12 / 22:44 (38 / 41: 8B bf16 0.74-0.82 -> 0.80-0.88, e4m3 0.81-1.01 -> 0.84-1.09); 2026-12-02
// (48, 8B down: bf16 +3-4 %, e4m3 0-1 %); H100 2026-12-07 (48, 70B O / down at 144 / 160: bf16 -13 / -14 % time, e4m3
// -9 %; 39, the same at 176 / 192: bf16 -8 / -7 %, e4m3 -3 / -1 %; 39 for the 8B down at 176 / 192, 2 x 32 tiles: bf16
// -1 / -2.5 %, e4m3 +0 / +1 %: not taken).
inline Plan sm90_token_tiles(const GemmProblem& p, int num_sms, int64_t ws_available = -1) {
  const KernelConfig& t = kSm90Table.at(p.m <= kSm90Tokens160MaxM ? Sm90::k128x80SwapAB : Sm90::k128x96SwapAB);
  const int64_t tiles = partial_tiles(p, t);
  if (!sm90_129_192_tokens(p) || tiles > num_sms) return Plan{-1, 0, 0};
  const bool splits = k_blocks_128B(p) >= kSm90ClusterDecodeMinKBlocks &&
                      in_kernel_refusal(true, t, -2, dtype_bytes(p.a_type)).empty();
  const bool two = splits && tiles * 2 <= num_sms, transposes = sm90_swap_only_family(p.b_type, p.b_mn_major, false);
  const KernelConfig& pair = kSm90Table.at(p.m <= kSm90Tokens160MaxM ? Sm90::k128x80SwapABClusterN2
                                                                      : Sm90::k128x96SwapABClusterN2);
  const int64_t ws = pair_split_ws_floats(p, pair, 2);
  if (splits && !transposes && (p.m <= kSm90Tokens160MaxM || !two) && p.k >= kSm90PairSplitsMinK &&
      (ws_available < 0 || ws <= ws_available))
    return Plan{pair.id, -2, ws};
  return !two && transposes ? Plan{-1, 0, 0} : Plan{t.id, two ? -2 : 1, 0};
}

// 65-128 tokens, 16-bit operands, K >= 8192, at most a quarter as many 128-row weight tiles as SMs (the 8B down, 32):
// 48's pairs, a pair per split, not 13's 64-token tiles, 2 splits in a cluster. H100, 2026-12-07/08 (docs/PERF.md), 8B
// layer time at 72 / 80 / 96 / 112 / 128 tokens: bf16 -9 / -6 / -8 / -7 / -6 %. Lost: e4m3 (+1-4 %), the 70B O / down
// (64 tiles), 48 / 64 tokens. At 65-80 a pair's second tile holds no token (its box wholly out of bounds; GPU-tested).
inline constexpr int kSm90PairsMinM = 65;
inline Plan sm90_pairs_128_tokens(const GemmProblem& p, int num_sms, int64_t ws_available) {
  const KernelConfig& c = kSm90Table.at(Sm90::k128x80SwapABClusterN2);
  const int64_t ws = pair_split_ws_floats(p, c, 2);
  if (p.m < kSm90PairsMinM || p.m > kSm90ClusterDecodeMaxM || p.batch != 1 || p.a_mn_major ||
      dtype_bytes(p.a_type) != 2 || dtype_bytes(p.b_type) != 2 || p.k < kSm90PairSplitsMinK ||
      4 * ((p.n + 127) / 128) > num_sms || (ws_available >= 0 && ws > ws_available))
    return Plan{-1, 0, 0};
  return Plan{c.id, -2, ws};
}

inline constexpr int kSm90TransposeMaxM = 256, kSm90SplitKIdle = 4;
inline Plan sm90_plan(const GemmProblem& p, int num_sms, int64_t ws_available = -1) {
  // The decode entries: one split, no workspace (their K split is over a CTA's warps), forced or not.
  const KernelConfig* forced = p.config >= 0 ? kSm90Table.find(p.config) : nullptr;
  if (p.config < 0 && sm90_mma_decode(p)) return Plan{static_cast<int>(sm90_mma_decode_entry(p, num_sms)), 1, 0};
  if (p.config < 0 && sm90_wg_decode(p, num_sms)) return Plan{static_cast<int>(sm90_wg_decode_entry(p)), 1, 0};
  if (forced != nullptr && forced->split == Split::kDecode) return Plan{p.config, 1, 0};
  if (forced != nullptr && forced->swap_ab() && swap_tail(p.splits))  // forced: config (entry, -(100 + share))
    return sm90_swap_tail_plan(p, *forced, swap_tail_share(p.splits), num_sms, ws_available);
  if (p.config < 0 && sm90_wide_tokens(p, num_sms)) {  // (one split, no workspace; or 35's last wave shared)
    if (const Plan shared = sm90_wide_tokens_shared(p, num_sms, ws_available); shared.config >= 0) return shared;
    return Plan{static_cast<int>(sm90_wide_tokens_entry(p)), 1, 0};
  }
  if (const Plan tt = sm90_token_tiles(p, num_sms, ws_available); p.config < 0 && tt.config >= 0) return tt;
  if (const Plan pp = sm90_pairs_128_tokens(p, num_sms, ws_available); p.config < 0 && pp.config >= 0) return pp;
  const bool transposes = sm90_swap_only_family(p.b_type, p.b_mn_major, false);
  const bool rows64 = !transposes && (p.m <= 32 || dtype_bytes(p.b_type) == 1);
  const DecodePolicy decode{rows64 ? 64 : 128, !transposes,
                            transposes ? kSm90TransposeMaxM : kSm90DecodeMaxM, kSm90SplitKIdle};
  const auto dense = [num_sms](const GemmProblem& q, int64_t* tiles) {
    static constexpr int kWidths[] = {256, 128, 64};
    const int block_n = widest_even_tile_n(q, num_sms, kWidths, 3);
    const bool tma = out_tma_ok(q);
    *tiles = tiles_128(q, block_n);
    return block_n == 256 ? (tma ? Sm90::k128x256TmaStoreOverlap : Sm90::k128x256)
         : block_n == 128 ? (tma ? Sm90::k128x128TmaStore : Sm90::k128x128) : Sm90::k128x64;
  };
  Plan plan = make_plan(kSm90Table, p, num_sms, ws_available, true, decode, dense);
  // The 256-token transposing entry transposes each weight tile once; where it needs more than 2 K
  // splits to fill the SMs (few tiles: N <= ~4096), the 128-token entry's two column tiles need half as
  // many (the same CTAs, half the partial sums, twice the K per CTA). H200, 2026-11-25, bench_decode.py,
  // e4m3 (K, N), M = 256, us per layer: 8B (N = 4096 twice with 4 splits, 6144, 28672) 232 with the
  // 128-token entry everywhere, 248 with the 256-token one; 70B (N = 8192-57344, <= 2 splits) 666 / 585.
  if (transposes && p.config < 0 && plan.config == static_cast<int>(Sm90::k128x256SwapAB) && plan.splits > 2) {
    GemmProblem q = p;
    q.config = static_cast<int>(Sm90::k128x128SwapAB);
    const Plan alt = make_plan(kSm90Table, q, num_sms, ws_available, true, decode, dense);
    if (ws_available < 0 || alt.ws_floats <= ws_available) plan = alt;
  }
  if (p.config < 0 && !transposes) plan = sm90_cluster_decode(p, num_sms, plan);
  // A dense cooperative entry's last wave shared out (see tail_share; the plan's `splits` is the number
  // of CTAs plus grid x the whole waves shared): forced by config (entry, splits), or tail_split_default;
  // the heuristic's 128x256 tiles that share nothing run in 2x1 clusters where sm90_cluster_pays.
  const KernelConfig& c = kSm90Table.at(static_cast<Sm90>(plan.config));
  if (tail_splits(c) && (p.config < 0 || p.splits > 0)) {
    const int64_t tiles = tiles_128(p, c.block_n), kb = (k_blocks_128B(p) + c.k_chunks - 1) / c.k_chunks;
    const int64_t share = p.config < 0 ? tail_split_default(p, tiles, num_sms, kb) : p.splits;
    const int64_t ws = tail_ws_floats(tail_share(share, num_sms).ctas, int64_t(c.block_m) * c.block_n);
    if (tail_split_ok(tiles, num_sms, share, kb) && (ws_available < 0 || ws <= ws_available))
      plan.splits = static_cast<int>(share), plan.ws_floats = ws;
    else if (p.config < 0 && plan.config == static_cast<int>(Sm90::k128x256TmaStoreOverlap) &&
             sm90_cluster_pays(p, tiles, num_sms))
      plan.config = static_cast<int>(Sm90::k128x256Cluster2TmaStoreOverlap);
  }
  return plan;
}

// The derivative epilogue (GemmProblem::act_grad: y = (alpha acc + bias) * act'(c)) inside the sm_90a kernel: the
// TMA-store-overlap entries with whole pairs of 128-byte chunks per tile (20, 22), bf16 operands and output, relu /
// silu / gelu_tanh (their Config::kActGrad twins, kernels/sm90_act_grad.cuh: c through TMA into the output boxes, act'
// on the packed output under the next tile's first k-blocks). Every other plan writes the product and the handler
// multiplies in a second pass (launch.h act_grad_pass: the unfused program's arithmetic and cost).
inline bool act_grad_in_kernel(const KernelConfig& c, const GemmProblem& p) {
  const bool act = p.activation == Activation::kRelu || p.activation == Activation::kSilu ||
                   p.activation == Activation::kGeluTanh;
  return p.act_grad && act && c.epilogue == Epilogue::kTmaStoreOverlap && !c.partial() && c.block_n % 128 == 0 &&
         p.sf_vec == 0 && p.out_type == DType::kBF16 && p.a_type == DType::kBF16 && p.b_type == DType::kBF16;
}

// sm_100a / sm_103a: sm100_choose's dense entry; int8 has no partial entries (its s32 accumulators
// would be summed in f32).
inline Plan sm100_plan(const GemmProblem& p, int num_sms, int64_t ws_available = -1) {
  return make_plan(kSm100Table, p, num_sms, ws_available, p.a_type != DType::kS8, DecodePolicy{},
                   [num_sms](const GemmProblem& q, int64_t* tiles) {
    const Sm100 t = sm100_choose(q, num_sms);
    const KernelConfig& c = kSm100Table.at(t);
    *tiles = q.batch * ((q.m + c.block_m - 1) / c.block_m) * ((q.n + c.block_n - 1) / c.block_n);
    return t;
  });
}
}  // namespace jax_tmem::menu
