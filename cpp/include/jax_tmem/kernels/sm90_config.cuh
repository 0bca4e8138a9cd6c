// jax_tmem: the sm_90a GEMM kernel's compile-time configuration (kernels/sm90_gemm.cuh): the schedules,
// epilogues and operand forms one instantiation takes, and the shared-memory and register budgets they imply.
#pragma once

#include <cstdint>

#include "jax_tmem/dtypes.h"
#include "jax_tmem/menu.h"

#ifndef JT_SWAP_TAIL
#define JT_SWAP_TAIL 1  // 0: the swap-AB entries without the shared last wave (an A/B build, scripts/ab_options.sh)
#endif
#ifndef JT_SM90_GROUP_M
#define JT_SM90_GROUP_M 0  // 0: Config::kGroupM's rule
#endif

namespace jax_tmem::sm90 {

// The MMA of a kernel is named by its operand types (A, B), f32 accumulation: bf16 x bf16, f16 x f16,
// f32 x f32 (tf32) and every e4m3/e5m2 mix (mma_step picks the wgmma).

// kPingPong = false: "cooperative" - both consumer warpgroups work on one 128-row tile (64 rows each)
//   and run the epilogue together while the tensor cores idle.
// kPingPong = true: each consumer warpgroup owns whole 128-row tiles (two m64 wgmmas per K step) and
//   the two alternate over the CTA's tiles: the ring delivers tile j+1's data as tile j's is consumed,
//   so one warpgroup's epilogue overlaps the other's MMAs.
// kSmemEpilogue: the cooperative epilogue goes registers -> shared memory (32-column chunks) -> one
//   thread per half row -> epilogue::finish_row_segment, the same row-segment epilogue and 16-byte
//   stores as the sm_100a kernels (which read TMEM one row per thread). Menu config 5.
// kClusterM = 2: cooperative tiles in (2,1,1) clusters; the two CTAs take vertically adjacent tiles
//   (same B columns) and each loads half of the B tile, multicast into both CTAs' shared memory, so
//   the L2 -> SM traffic per FLOP drops by a third at 128x256 (48 -> 32 KB per CTA per k-block).
//   A ring slot is refilled only when the consumers of BOTH CTAs have released it (the peer's
//   multicast writes into it): each empty barrier counts the consumer warps of the whole cluster.
// kTmaStore: the cooperative epilogue writes each warpgroup's 64 rows in 128-byte-wide column chunks
//   into a double-buffered, 128B-swizzled shared-memory box (stmatrix for 16-bit outputs) and one
//   thread stores it with a TMA bulk tensor store (edges clipped by TMA); the stores drain while the
//   next tile's MMAs run. Menu config 8.
// kEpiOverlap (with kTmaStore, 16-bit outputs): the tensor cores do not wait for the epilogue's stores.
//   Once a tile's MMAs retire, each consumer thread finishes its fragment (epilogue_math) and packs it
//   into 16-bit pairs (64 registers at 128x256, beside the 128 accumulators), then issues the next
//   unit's first k-block of MMAs into the accumulators and only then writes the packed tile through
//   shared memory to the TMA store, while those MMAs run. f32 outputs store as kTmaStore does.
// kPartialOut (1 split-K, 2 swap-AB with split-K): no epilogue here; each work unit (tile, K range)
//   writes its f32 accumulators to the workspace (partial_store) and a second kernel reduces them
//   in a fixed order and runs the epilogue (splitk_reduce.cuh): deterministic. Menu configs 11-19.
// kATrans (8-bit A stored MN-major: swap-AB on an fp8 weight kept (K, N), as Flax stores it): wgmma reads
//   8-bit operands K-major only, so TMA brings each 128(m) x 128(k) A tile MN-major into the ring slot,
//   and each consumer warpgroup transposes its own 64 rows into a private double-buffered K-major,
//   128B-swizzled tile (transpose_a_half: 32-bit loads, byte permutes, 16-byte stores), fences the async
//   proxy and syncs its 128 threads before its wgmma, one k-block ahead (k-block kb + 1 is transposed
//   while the MMAs of kb run): the weight is read once, never transposed in memory, and the consumers
//   (idle in a memory-bound decode GEMM) do the work.
// BLOCK_M = 64 (the decode swap-AB entries 15-17): one consumer warpgroup, and each ring slot holds
//   K_CHUNKS = 4 chunks of 128 bytes per row (4 TMA boxes, issued back to back), so the weight's rows are
//   read 512 contiguous bytes at a time. Twice the CTAs of the 128-row tiles for the same N, with no
//   K split: measured with scripts/stream_probe.cu (pure TMA streaming of a decode weight, H200,
//   2026-11-24), 512-byte rows stream at 2.9-3.4 TB/s from 32-64 CTAs where 128-byte rows reach 2.3-3.1.
template <DType kA_, DType kB_, int BLOCK_N_, int kStages_, bool kAMN_, bool kBMN_, bool kPingPong_ = false,
          bool kSmemEpilogue_ = false, int kClusterM_ = 1, bool kTmaStore_ = false, int kPartialOut_ = 0,
          int kBlockM_ = 128, bool kEpiOverlap_ = false, bool kFusedFinish_ = true, bool kActGrad_ = false>
struct Config {
  static constexpr int kPartialOut = kPartialOut_;
  // kPartialOut entries: whether the kernel can finish a fused epilogue itself (bias, activation, c, alpha:
  // epilogue::finish_element per accumulator, one split or K splits summed in the kernel). Its inlined copies
  // are most of the kernel's code, fetched cold by every decode GEMM that runs it, so the launcher (run) takes
  // the WithFusedFinish<false> twin wherever the epilogue is a plain cast or the reduce pass finishes it
  // (H200, 2026-11-27, stream_probe tl: a 64 x 4096 x 4096 GEMM on entry 13 after an L2 flush, first TMA issued
  // 2.27 -> 1.41 us after the start, epilogue done 18.1 -> 15.3 us with the 8048-instruction kernel cut to 2104).
  static constexpr bool kFusedFinish = kFusedFinish_;
  template <bool F>
  using WithFusedFinish = Config<kA_, kB_, BLOCK_N_, kStages_, kAMN_, kBMN_, kPingPong_, kSmemEpilogue_, kClusterM_,
                                 kTmaStore_, kPartialOut_, kBlockM_, kEpiOverlap_, F, kActGrad_>;
  // kActGrad: the twin of a TMA-store-overlap entry with bf16 operands and output that runs the derivative epilogue
  // (menu::act_grad_in_kernel; kernels/sm90_act_grad.cuh), the launcher's choice where the problem asks for it. A
  // twin of its own: its state beside the accumulators and the packed tile made ptxas spill in a kernel that also
  // had every other epilogue.
  static constexpr bool kActGrad = kActGrad_;
  // Which entries have that twin: the compile-time half of menu::act_grad_in_kernel (the launcher refuses a problem
  // the two disagree on, in words).
  static constexpr bool kHasActGradTwin =
      kEpiOverlap_ && BLOCK_N_ % 128 == 0 && kA_ == DType::kBF16 && kB_ == DType::kBF16;
  using WithActGrad = Config<kA_, kB_, BLOCK_N_, kStages_, kAMN_, kBMN_, kPingPong_, kSmemEpilogue_, kClusterM_,
                             kTmaStore_, kPartialOut_, kBlockM_, kEpiOverlap_, kFusedFinish_, true>;
  static constexpr DType kA = kA_, kB = kB_;
  static_assert(dtype_bytes(kA) == dtype_bytes(kB), "A and B of one wgmma have one element width");
  static constexpr bool kATrans = kAMN_ && dtype_bytes(kA_) == 1;  // 8-bit MN-major A: transposed in smem
  static constexpr bool kAMNSmem = kAMN_ && !kATrans;  // what wgmma reads: A MN-major in shared memory
  static constexpr bool kPingPong = kPingPong_;
  static constexpr bool kSmemEpilogue = kSmemEpilogue_;
  static constexpr int EPI_COLS = 32, EPI_STRIDE = 40;  // staged chunk: 64 rows x 32 f32, row pitch 160 B
  static constexpr int EPI_BYTES = kSmemEpilogue ? 2 * 64 * EPI_STRIDE * 4 : 0;  // one buffer per warpgroup
  static constexpr bool kTmaStore = kTmaStore_;
  static constexpr bool kEpiOverlap = kEpiOverlap_;
  static constexpr int OUT_BOX_ROWS = 64;  // a consumer warpgroup's rows
  static constexpr int OUT_BOX_BYTES = OUT_BOX_ROWS * 128;  // x 128 bytes, 1024-aligned (128B swizzle)
  static constexpr int OUT_BYTES = kTmaStore ? 2 * 2 * OUT_BOX_BYTES : 0;  // 2 buffers per warpgroup
  static constexpr int BLOCK_M = kBlockM_;
  static constexpr int CONSUMERS = BLOCK_M / 64;  // consumer warpgroups (64 rows each)
  static constexpr int K_CHUNKS = menu::sm90_k_chunks(BLOCK_M);  // 128-byte K chunks per ring slot
  static constexpr int BLOCK_N = BLOCK_N_;
  // kClusterM_ > 1: clusters of that many CTAs along M sharing B (multicast); < -1: clusters of -kClusterM_ CTAs
  // along N sharing A (a swap-AB tile's token tiles sharing the weight tile: menu::KernelConfig::cluster_m).
  static constexpr int CLUSTER_M = kClusterM_ > 1 ? kClusterM_ : 1, CLUSTER_N = kClusterM_ < -1 ? -kClusterM_ : 1;
  static constexpr int BOX_M = BLOCK_M / CLUSTER_N, BOX_N = BLOCK_N / CLUSTER_M;  // rows of A / B a CTA loads per tile
  static constexpr int TILE_M = BLOCK_M * CLUSTER_M, TILE_N = BLOCK_N * CLUSTER_N;  // a scheduler tile (a cluster's)
  static constexpr int CTAS_PER_TILE = CLUSTER_M * CLUSTER_N;
  static constexpr bool kAMN = kAMN_, kBMN = kBMN_;
  static constexpr int ELEM_BYTES = dtype_bytes(kA);
  static constexpr int BLOCK_K = 128 / ELEM_BYTES;     // one 128-byte swizzle row along K
  static constexpr int INSTR_K = 32 / ELEM_BYTES;      // K of one wgmma (16 for 16-bit types)
  static constexpr int STAGE_K = K_CHUNKS * BLOCK_K;   // K elements per ring slot
  static constexpr int A_CHUNK = BLOCK_M * 128, B_CHUNK = BLOCK_N * 128;  // bytes of one K chunk
  static constexpr int A_BYTES = K_CHUNKS * A_CHUNK;
  static constexpr int B_BYTES = K_CHUNKS * B_CHUNK;
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;  // kATrans: A is the MN-major tile
  static constexpr int TRANS_BYTES = kATrans ? 2 * 2 * 64 * 128 : 0;  // 2 warpgroups x 2 buffers x 64 rows
  // kATrans: as many slots as fit beside the transposed buffers (the menu's count assumes none).
  static constexpr int kStages = kATrans ? (220 * 1024 - TRANS_BYTES) / STAGE_BYTES : kStages_;
  // (kActGrad: two more barriers per consumer warpgroup, the derivative epilogue's.)
  static constexpr int SMEM_BYTES = kStages * STAGE_BYTES + TRANS_BYTES + OUT_BYTES + EPI_BYTES + 1024 +
                                    (2 * kStages + 2 + (kActGrad ? 4 : 0)) * 8;
  static constexpr bool kCMap = true;  // the kernel takes a sixth tensor map, c's (launch_persistent)
  static constexpr int NUM_THREADS = 128 * (1 + CONSUMERS);
  // Tile-rows per raster band (sched::PersistentScheduler): the CTAs of one wave should cover about as
  // many rows of A as columns of B (the fewest DRAM bytes per wave). 16-bit 128x256 tiles: 16 (a wave of
  // 132 is 16 x 8.25 tiles, 2048 x 2112); 8 before, 1024 x 4224. Nsight Compute at base clocks, H100,
  // 2026-11-25 21:27, entry 20 on 8192^3 bf16 (B (K, N) / (N, K)): DRAM throughput 34.3 / 34.9 % ->
  // 28.6 / 28.7 % of peak (18 % fewer bytes), cycles -0.4 / -0.1 %. Others keep 8: a 2x1 cluster's
  // 256x256 tile is 8 x 8.25 already, and the 8-bit entries were not measured with 16. JT_SM90_GROUP_M
  // > 0 forces one value at build time (-C cmake.define.CMAKE_CUDA_FLAGS=-DJT_SM90_GROUP_M=8), for
  // measuring the raster only.
  static constexpr int kGroupM =
      JT_SM90_GROUP_M > 0 ? JT_SM90_GROUP_M : (TILE_M == 128 && BLOCK_N >= 256 && ELEM_BYTES == 2 ? 16 : 8);
  // fp8 swap-AB (decode, K-major or transposed weight): each ring slot's MMAs accumulate into a fresh
  // register set, added into the f32 accumulator once they retire (wait<0>): Hopper's fp8 wgmma keeps
  // ~14 bits inside one accumulation chain, so an unsplit K of 14336 (a decode GEMM with one K split)
  // reached 1.02e-2 of max |ref| (2026-11-24); the chain is now one slot (128 or 512 elements of K),
  // as DeepGEMM promotes every 128.
  static constexpr bool kPromote = kPartialOut == 2 && ELEM_BYTES == 1;
  static constexpr bool kWeightA = kPartialOut == 2;  // A is a decode weight, streamed once: L2 evict-first (ptx/tma.cuh *_stream)
  // kPromote at BLOCK_N = 256 (the transposing entry for 129-256 tokens): a slot's MMAs run in two halves
  // of 128 columns, each into the 64-register set `part` and added into acc once it retires, so that 128
  // + 64 accumulators fit beside the transpose's registers (the weight tile is transposed once for all
  // 256 tokens instead of once per 128-token column tile).
  // The 192-wide transposing entry (35) likewise, in three parts of 64 (one part of 192 spilled 8 bytes beside
  // the transpose in the fused-finish twin); the 160-wide one (40) in two of 80.
  static constexpr int PART_N = kPromote && BLOCK_N == 256                 ? 128
                                : kPromote && kATrans && BLOCK_N == 192 ? 64
                                : kPromote && kATrans && BLOCK_N == 160 ? 80
                                                                        : BLOCK_N;
  // Registers per thread after setmaxnreg (producer / consumers; 128 x P + 128 x CONSUMERS x C <= 64 K):
  // 40 / 232, or 24 / 240 for that entry, whose 192 accumulators and the transpose spilled at 232.
  // (The 192-wide one in parts of 64 fits the usual 40 / 232; its producer spilled at 24.) Three consumer warpgroups
  // (192 weight rows, swap-AB): 40 / 152 (128 x 40 + 384 x 152 = 63.5 K).
  static constexpr int PRODUCER_REGS = PART_N == 128 && BLOCK_N == 256 ? 24 : 40,
                       CONSUMER_REGS = CONSUMERS == 3 ? 152 : PART_N == 128 && BLOCK_N == 256 ? 240 : 232;
  static constexpr int kTransBarrier = 8;  // kATrans: named barriers 8 + cw (one per consumer warpgroup)
  // The last wave shared out along K where planned (sched::TailSplit; menu::tail_splits: the plain cooperative schedule).
  static constexpr bool kTailSplit = kPartialOut == 0 && !kPingPong && CTAS_PER_TILE == 1;
  // The swap-AB entries' last wave shared the same way where the launcher planned it (menu::swap_tail: KernelParams
  // ws_ld < 0, its tiles; one K split, finished here), for the entry menu::swap_tail_kernel names.
  static constexpr bool kSwapTail =
      JT_SWAP_TAIL && kPartialOut == 2 && !kPingPong &&
      menu::swap_tail_kernel(true, CTAS_PER_TILE, kBlockM_, BLOCK_N_, kATrans);
  // The cooperative dense entries release a ring slot once per consumer warpgroup (and CTA of the cluster), as
  // CUTLASS's signalling threads do, instead of once per warp: 4 arrives per slot instead of 16 in a 2x1 cluster (half
  // of them remote), 2 instead of 8 without. Measured on an H200 (docs/PERF.md, 2026-11-29 07:07): the transposed-
  // operand GEMMs of a training step 0.6-4 % faster, outputs bitwise the same. The others (ping-pong; split-K /
  // swap-AB, whose transposing entries read the ring with generic loads in every warp) keep one per warp: for the
  // split-K / swap-AB entries that do not transpose, one per warpgroup gave the same bits and no change in the 8B
  // decode chain at 16-128 tokens (H200, 2026-11-29 09:58; commit 3c66df8 has it).
  static constexpr bool kReleasePerWarpgroup = kPartialOut == 0 && !kPingPong;
  static constexpr int kTailBarrier = 10;  // both consumer warpgroups: around tail_fixup's flags, split_fixup's ring reuse
  // K splits summed here, no reduce pass, where the launcher planned it (menu::k_splits; split_fixup): tiles up to
  // 192 wide, 256 wide for 16-bit / tf32 operands; not the 8-bit 256-wide entry, whose promotion registers and 128
  // accumulators per thread spilled with the splits' sums (menu::cluster_splits_fit).
  // (Not in a B-multicast cluster of its own: one cluster shape per launch.)
  static constexpr bool kSplitsInKernel =
      kPartialOut != 0 && CTAS_PER_TILE == 1 && menu::cluster_splits_fit(BLOCK_N_, ELEM_BYTES);
  // A weight-multicast pair's K splits (CLUSTER_N 2) summed here too, through the workspace (pair_fixup: each split a
  // pair of its own, clusters of 2 stay resident), as cuBLAS's 1x2 decode kernels run (docs/PERF.md 2026-12-01 10:50).
  static constexpr bool kPairSplits = kPartialOut == 2 && CLUSTER_N == 2;
  static constexpr int ACC_REGS = BLOCK_N / 2;         // f32 accumulators per consumer thread

  // (BLOCK_N: a wgmma N that scripts/gen_wgmma.py generates, NS; ptx/wgmma_ops.cuh's dispatch asserts it.)
  static_assert(BLOCK_N >= 64 || !kBMN, "an MN-major B is loaded in 64-element chunks: BLOCK_N >= 64");
  static_assert(kPartialOut == 0 ||
                    (!kPingPong && !kSmemEpilogue && !kTmaStore && (CTAS_PER_TILE == 1 || kPartialOut == 2)),
                "split-K partials: the plain cooperative schedule only (swap-AB: in B-multicast clusters too)");
  static_assert(!kPingPong || BLOCK_N <= 128, "ping-pong keeps 2 x BLOCK_N / 2 accumulators per thread: N <= 128");
  static_assert(!(kPingPong && kSmemEpilogue), "the staged epilogue is built for the cooperative schedule");
  static_assert(!(kTmaStore && (kPingPong || kSmemEpilogue)), "the TMA-store epilogue is cooperative-only");
  static_assert(!kEpiOverlap || (kTmaStore && kPartialOut == 0), "the overlapped epilogue is the TMA store's");
  static_assert(!kActGrad || kHasActGradTwin,
                "the derivative epilogue: bf16 TMA-store-overlap entries with whole pairs of 128-byte chunks");
  static_assert(!(kAMN || kBMN) || ELEM_BYTES == 2 || (kATrans && !kBMN && kPartialOut == 2),
                "wgmma reads MN-major operands for 16-bit types only (8-bit: an MN-major swap-AB weight, transposed in smem)");
  static_assert(SMEM_BYTES <= 232448, "shared memory per CTA exceeds 227 KB");
  static_assert(SMEM_BYTES + 1024 < (1 << 18), "descriptor stepping (sm90_desc_advance) needs addresses < 2^18");
  static_assert(CLUSTER_M == 1 || ((CLUSTER_M == 2 || CLUSTER_M == 4) && !kPingPong),
                "B multicast: (2,1,1) or (4,1,1) clusters, cooperative only");
  static_assert(CLUSTER_M == 1 || (kBMN ? (BLOCK_N / CLUSTER_M) % 64 == 0 : BOX_N % 8 == 0 && K_CHUNKS == 1),
                "each CTA multicasts whole pieces of B: 64 rows (8 KB) of an MN-major B, 8-row swizzle atoms (1 KB) "
                "of a K-major one (one K chunk per ring slot)");
  static_assert(CLUSTER_N == 1 || (CLUSTER_N == 2 && kPartialOut == 2 && !kATrans && K_CHUNKS == 1 &&
                                   (!kAMN || BOX_M % 64 == 0)),
                "A multicast: (2,1,1) clusters along N, the swap-AB entries' weight, not transposed in smem (an "
                "MN-major one in whole 64-row pieces per CTA)");
  static_assert(STAGE_BYTES % 1024 == 0 && B_CHUNK % 1024 == 0, "128B-swizzle tiles must stay 1024-byte aligned");
  static_assert(BLOCK_M == 128 || ((BLOCK_M == 64 || BLOCK_M == 192) && kPartialOut == 2 && !kATrans),
                "64- and 192-row tiles: the swap-AB entries with a K-major or 16-bit weight only");
  static_assert(BLOCK_M != 192 || ((CTAS_PER_TILE == 1 || CLUSTER_N == 2) && BLOCK_N <= 96),
                "192-row tiles: three consumer warpgroups of at most 48 accumulators each (152 registers), no cluster "
                "but a weight-multicast pair");
};

}  // namespace jax_tmem::sm90
