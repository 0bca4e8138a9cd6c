// jax_tmem: the last wave of a persistent sm_90a GEMM shared out along K (stream-K over the last wave; the
// kernels' sched::TailSplit, kernels/sm90_epilogue.cuh tail_fixup): the plan math the heuristic (menu.h) and the
// launcher (launch_common.cuh) share. Host code, no CUDA.
#pragma once

#include <algorithm>
#include <cstdint>

#include "jax_tmem/gemm_problem.h"
#include "jax_tmem/kernel_config.h"

namespace jax_tmem::menu {

// A dense cooperative entry's last wave (sched::TailSplit, stream-K over the last wave): where the tiles
// fill the grid over whole waves and `rem` = tiles % grid remain, those rem tiles' k-blocks can be dealt
// evenly to `ctas` CTAs (rem < ctas <= grid, at least one k-block each), so that the last wave takes
// rem / ctas of a tile instead of a whole one. Forced with config (entry, ctas) (tests and sweeps); the
// heuristic shares it (tail_split_default) only where it measured faster (H200, 2026-11-25 10:49-10:53,
// sweep_configs.py, 9 rounds, x XLA, whole tiles / shared last wave with the rule "all SMs, at most 4
// per tile"): bf16 8192 x 16384 x 4096 (4 tiles left, 16 CTAs) 0.958 / 0.956, 8192 x 12288 x 4096 (36
// left) 0.946 / 0.964, 4096 x 16384 x 8192 (68) 1.004 / 1.017, 8192 x 4096 x 16384 (100) 1.009 / 0.938,
// e4m3 the last two 1.791 / 1.739 and 1.475 / 1.384; Nsight Compute at base clocks (13:34, cycles, the
// 20 entry): 8192^3 (68 left, 132 CTAs) -2.1 %, 8192 x 16384 x 4096 (4 left) +3.5 % with 132 CTAs, +0.1 %
// with 40, 8192 x 4096 x 16384 (100 left, 132) +1.6 %. Few tiles left: the CTAs do not reach the last
// wave together (it is not the critical path it looks like), and an owner waits for the latest of its
// pieces; most of a wave left: each tile splits in under 2, and the pieces read A and B out of the order
// that kept them in L2 (+50 % DRAM bytes at 100 left).
// Sharing more than the partial wave (waves >= 1): the last rem + waves x grid tiles dealt to the CTAs,
// each CTA's share then over a tile (stream-K's "data-parallel waves + one stream-K wave" hybrid). The plan's
// `splits` carries both numbers, ctas + waves x grid (ctas in (rem, grid]); tail_share decodes it.
struct TailShare {
  int64_t ctas, waves;
};
inline TailShare tail_share(int64_t splits, int64_t grid) {
  const int64_t waves = grid > 0 && splits > 0 ? (splits - 1) / grid : 0;
  return {splits - waves * grid, waves};
}
// The tiles whose k-blocks are dealt out (sched::TailSplit's `tail`): the partial wave, plus `waves`
// whole ones.
inline int64_t tail_tiles(int64_t tiles, int64_t grid, int64_t splits) {
  return grid > 0 ? tiles % grid + tail_share(splits, grid).waves * grid : 0;
}
// Its workspace: one tile of f32 partial sums per sharing CTA, then one ready flag (a 32-bit word) each
// (a CTA's share starts with at most one piece it does not own, whatever its length).
inline int64_t tail_ws_floats(int64_t ctas, int64_t tile_floats) { return ctas * tile_floats + ctas; }
// Whether the plan's `splits` (ctas + waves x grid) can share the last wave of `tiles` tiles on a grid of
// `grid` CTAs (the plan and the launcher ask the same): a partial last wave, more CTAs than its tiles, at
// most the grid, whole waves enough to share, at least one k-block each.
inline bool tail_split_ok(int64_t tiles, int64_t grid, int64_t splits, int64_t k_blocks) {
  const int64_t rem = grid > 0 ? tiles % grid : 0;
  const TailShare s = tail_share(splits, grid);
  const int64_t tail = rem + s.waves * grid;
  return tiles > grid && rem > 0 && s.ctas > rem && s.ctas <= grid && tail < tiles && s.ctas <= tail * k_blocks;
}
inline bool tail_splits(const KernelConfig& c) {
  return !c.partial() && c.schedule == Schedule::kCooperative && c.cluster_m == 1;
}
// The heuristic's plan for a last wave (0: whole tiles; else tail_share's splits): 16-bit operands, more
// than one wave, and between an eighth and two thirds of a wave left over: every SM, at most 4 per tile.
// Under an eighth left, short K (<= 64 k-blocks) and 8 waves or more (where it was measured): the last
// whole wave shared too, by every SM (each share just over a tile). Nsight Compute at base clocks, entry
// 20, cycles against whole tiles, 8192 x 16384 x 4096 (4 left, 64 k-blocks): -2.4 % (H100, 2026-11-25
// 16:30; the partial wave alone +2.0 %, two whole waves -2.1 %), -2.1 % (H200, 16:38). Longer K lost:
// the pieces stream different K ranges at once and L2 stops serving the wave (H100 16:30: 16384 x 4096
// x 8192, 68 left, 128 k-blocks: +7 % with a whole wave, -2.8 % without; 8192 x 4096 x 16384, 100 left:
// +35 %, +12 % without).
inline constexpr int64_t kTailWaveMaxKBlocks = 64;
inline int64_t tail_split_default(const GemmProblem& p, int64_t tiles, int64_t grid, int64_t k_blocks) {
  const int64_t rem = grid > 0 ? tiles % grid : 0;
  if (dtype_bytes(p.a_type) != 2 || tiles <= grid || rem == 0 || rem * 3 > grid * 2) return 0;
  const int64_t share = rem * 8 >= grid ? std::min<int64_t>(grid, 4 * rem)
                        : k_blocks <= kTailWaveMaxKBlocks && tiles >= 8 * grid ? 2 * grid : 0;
  return share > 0 && tail_split_ok(tiles, grid, share, k_blocks) ? share : 0;
}

// The swap-AB entries' last wave shared out the same way (a decode GEMM's weight tiles, one token tile: each
// weight byte is read once whichever CTA reads it; the dense entries' two 128-row token tiles read one weight tile
// at different K offsets once shared, and lost on decode shapes: H200, 2026-11-30 07:59, bench_decode.py --variants,
// 8B layer bf16 (N, K), the gate / up on 20 with all 132 SMs sharing its last 92 tiles, xla / it at 200 / 224 / 160
// tokens 0.712 / 0.781 / 0.698 against the default's 0.77 / 0.85 / 0.89). One K split, finished in the kernel; the
// plan's `splits` is -(kSwapTailBase + share), share as tail_share's (ctas + waves x grid), beyond any count of K
// splits summed in the kernel (kMaxClusterSplits). Where it pays: menu.h sm90_wide_tokens_shared.
inline constexpr int kSwapTailBase = 100;
inline constexpr bool swap_tail(int splits) { return splits <= -kSwapTailBase; }
inline constexpr int swap_tail_splits(int64_t share) { return -static_cast<int>(kSwapTailBase + share); }
inline constexpr int64_t swap_tail_share(int splits) { return swap_tail(splits) ? -int64_t(splits) - kSwapTailBase : 0; }
// The entries that can (the sm_90a Config's kSwapTail): the 192-token one without a cluster (35), the only one a rule
// shares (128 weight rows, two consumer warpgroups, a weight wgmma reads as it is: not an 8-bit (K, N) one, which it
// transposes in shared memory). The 32-128-wide entries shared lost on every shape measured (docs/PERF.md, 2026-11-30
// 07:55), and the code cost them cold-fetched instructions (entry 13's compact twin 2512 -> 3448, ptxas 13.0): they
// are built without it; the 256-wide, 64-row and transposing entries spilled 4-44 bytes with it.
inline constexpr int kSwapTailBlockN = 192;
inline constexpr bool swap_tail_kernel(bool swap_ab, int ctas_per_tile, int block_m, int block_n, bool weight_transposed) {
  return swap_ab && ctas_per_tile == 1 && block_m == 128 && block_n == kSwapTailBlockN && !weight_transposed;
}

}  // namespace jax_tmem::menu
