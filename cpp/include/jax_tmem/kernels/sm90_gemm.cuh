// jax_tmem: the sm_90a GEMM kernel. Persistent and warp-specialised:
//   warpgroup 0      : producer. One thread issues TMA loads of A and B tiles into a kStages-deep
//                      shared-memory ring (full/empty mbarriers); setmaxnreg gives its registers away.
//   warpgroups 1, 2  : consumers. Each issues wgmma.mma_async for 64 of the tile's 128 rows with the
//                      f32 accumulator in registers, releases ring slots as soon as the MMAs that read
//                      them retire (wait_group 1), then runs the fused epilogue and stores the tile
//                      while the producer is already loading the next tile's slots.
// Operands: 128B-swizzled tiles whose rows are 128 bytes (BLOCK_K = 128 / element size along K for a
// K-major operand; 64-element chunks along M/N for an MN-major 16-bit operand, read with wgmma's
// transpose bit). Tails: TMA zero-fills out-of-bounds elements; the epilogue masks its stores.
#pragma once

#ifndef JT_SM90_GROUP_M
#define JT_SM90_GROUP_M 0  // 0: Config::kGroupM's rule
#endif

#include <cuda.h>

#include <cstdint>

#include "jax_tmem/desc_sm90.h"
#include "jax_tmem/epilogue.cuh"
#include "jax_tmem/epilogue_tma.cuh"
#include "jax_tmem/kernels/sm90_epilogue.cuh"
#include "jax_tmem/kernels/sm90_mma.cuh"
#include "jax_tmem/kernels/sm90_transpose.cuh"
#include "jax_tmem/kernel_config.h"
#include "jax_tmem/pipeline.cuh"
#include "jax_tmem/ptx/cluster.cuh"
#include "jax_tmem/ptx/mbarrier.cuh"
#include "jax_tmem/ptx/tma.cuh"
#include "jax_tmem/ptx/wgmma.cuh"
#include "jax_tmem/scheduler.cuh"

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
          int kBlockM_ = 128, bool kEpiOverlap_ = false>
struct Config {
  static constexpr int kPartialOut = kPartialOut_;
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
  static constexpr int CLUSTER_M = kClusterM_;
  static constexpr int BOX_M = BLOCK_M, BOX_N = BLOCK_N / CLUSTER_M;  // rows of A / B one CTA loads per tile
  static constexpr int TILE_M = BLOCK_M * CLUSTER_M;  // rows of one scheduler tile (one per cluster)
  static constexpr int CTAS_PER_TILE = CLUSTER_M;
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
  static constexpr int SMEM_BYTES =
      kStages * STAGE_BYTES + TRANS_BYTES + OUT_BYTES + EPI_BYTES + 1024 + (2 * kStages + 2) * 8;
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
  // kPromote at BLOCK_N = 256 (the transposing entry for 129-256 tokens): a slot's MMAs run in two halves
  // of 128 columns, each into the 64-register set `part` and added into acc once it retires, so that 128
  // + 64 accumulators fit beside the transpose's registers (the weight tile is transposed once for all
  // 256 tokens instead of once per 128-token column tile).
  static constexpr int PART_N = kPromote && BLOCK_N == 256 ? 128 : BLOCK_N;
  // Registers per thread after setmaxnreg (producer / consumers; 128 x P + 128 x CONSUMERS x C <= 64 K):
  // 40 / 232, or 24 / 240 for that entry, whose 192 accumulators and the transpose spilled at 232.
  static constexpr int PRODUCER_REGS = PART_N < BLOCK_N ? 24 : 40, CONSUMER_REGS = PART_N < BLOCK_N ? 240 : 232;
  static constexpr int kTransBarrier = 8;  // kATrans: named barriers 8 + cw (one per consumer warpgroup)
  // The last wave shared out along K where planned (sched::TailSplit; menu::tail_splits: the plain cooperative schedule).
  static constexpr bool kTailSplit = kPartialOut == 0 && !kPingPong && kClusterM_ == 1;
  static constexpr int kTailBarrier = 10;  // both consumer warpgroups, around the partial sums' flags
  // K splits summed here, no reduce pass, where the launcher planned it (menu::k_splits; split_fixup).
  static constexpr bool kSplitsInKernel = kPartialOut != 0;
  static constexpr int ACC_REGS = BLOCK_N / 2;         // f32 accumulators per consumer thread

  static_assert(BLOCK_N == 16 || BLOCK_N == 32 || BLOCK_N == 64 || BLOCK_N == 128 || BLOCK_N == 192 || BLOCK_N == 256,
                "wgmma N must be 16, 32, 64, 128, 192 or 256 here");
  static_assert(BLOCK_N >= 64 || !kBMN, "an MN-major B is loaded in 64-element chunks: BLOCK_N >= 64");
  static_assert(kPartialOut == 0 || (!kPingPong && !kSmemEpilogue && !kTmaStore && kClusterM_ == 1),
                "split-K partials: the plain cooperative schedule only");
  static_assert(!kPingPong || BLOCK_N <= 128, "ping-pong keeps 2 x BLOCK_N / 2 accumulators per thread: N <= 128");
  static_assert(!(kPingPong && kSmemEpilogue), "the staged epilogue is built for the cooperative schedule");
  static_assert(!(kTmaStore && (kPingPong || kSmemEpilogue)), "the TMA-store epilogue is cooperative-only");
  static_assert(!kEpiOverlap || (kTmaStore && kPartialOut == 0), "the overlapped epilogue is the TMA store's");
  static_assert(!(kAMN || kBMN) || ELEM_BYTES == 2 || (kATrans && !kBMN && kPartialOut == 2),
                "wgmma reads MN-major operands for 16-bit types only (8-bit: an MN-major swap-AB weight, transposed in smem)");
  static_assert(SMEM_BYTES <= 232448, "shared memory per CTA exceeds 227 KB");
  static_assert(SMEM_BYTES + 1024 < (1 << 18), "descriptor stepping (sm90_desc_advance) needs addresses < 2^18");
  static_assert(CLUSTER_M == 1 || (CLUSTER_M == 2 && !kPingPong), "B multicast: (2,1,1) clusters, cooperative only");
  static_assert(CLUSTER_M == 1 || (BLOCK_N / CLUSTER_M) % 64 == 0, "each CTA multicasts whole 64-row (8 KB) pieces of B");
  static_assert(STAGE_BYTES % 1024 == 0 && B_CHUNK % 1024 == 0, "128B-swizzle tiles must stay 1024-byte aligned");
  static_assert(BLOCK_M == 128 || (BLOCK_M == 64 && kPartialOut == 2 && !kATrans),
                "64-row tiles: the swap-AB entries with a K-major or 16-bit weight only");
};

template <class C>
__global__ void __launch_bounds__(C::NUM_THREADS, 1)
    sm90_gemm_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                     const __grid_constant__ CUtensorMap tma_out, const Params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace jax_tmem::ptx;
  uint8_t* smem = aligned_dynamic_smem();
  uint8_t* trans = smem + C::kStages * C::STAGE_BYTES;     // kATrans only (TRANS_BYTES, 1024-aligned)
  uint8_t* out_bufs = trans + C::TRANS_BYTES;              // kTmaStore only (OUT_BYTES, 1024-aligned)
  uint64_t* full = reinterpret_cast<uint64_t*>(out_bufs + C::OUT_BYTES);
  uint64_t* empty = full + C::kStages;
  uint64_t* order = empty + C::kStages;  // ping-pong only: order[w] = "warpgroup w may run its mainloop"
  float* epi_stage = reinterpret_cast<float*>(order + 2);  // kSmemEpilogue only (EPI_BYTES)

  const int warpgroup = threadIdx.x / 128;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;

  // Initialise barriers: full[s] completes on one arrive + the TMA bytes; empty[s] on one arrive from
  // each consumer warp that reads the slot (8 cooperative, per CTA of the cluster; 4 ping-pong).
  if (threadIdx.x == 0) {
    for (int s = 0; s < C::kStages; ++s) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], C::kPingPong ? 4 : 4 * C::CONSUMERS * C::CLUSTER_M);
    }
    mbarrier_init(&order[0], 4);  // one arrive per warp of the other consumer warpgroup
    mbarrier_init(&order[1], 4);
    fence_barrier_init();
  }
  // NOTE: with a cluster, the peer's barriers must be initialised before our multicast reaches them.
  if constexpr (C::CLUSTER_M > 1) cluster_sync();
  else __syncthreads();
  // Split-K: the reduce pass may be launched now (its CTAs wait for this grid to complete).
  if constexpr (C::kPartialOut != 0) griddep_launch_dependents();

  const sched::PersistentScheduler<C::kGroupM> scheduler{(p.m + C::TILE_M - 1) / C::TILE_M,
                                                         (p.n + C::BLOCK_N - 1) / C::BLOCK_N, p.batch};
  const int num_tiles = scheduler.num_tiles();
  const int k_blocks = (p.k + C::STAGE_K - 1) / C::STAGE_K;  // ring slots per tile
  // Every role of a CTA walks the same units: its tiles and K splits (sched::WorkUnits, shared with the
  // sm_100a kernels); kTailSplit: its whole tiles, then its pieces of the last wave (sched::TailSplit).
  const sched::WorkUnits work(num_tiles, k_blocks, C::kPartialOut ? p.splits : 1);
  const int splits = work.splits, num_units = work.num_units;
  const sched::TailSplit tail(num_tiles, C::kTailSplit ? p.ws_ld : 0, C::kTailSplit ? p.splits : 0, k_blocks, gridDim.x);
  const int first_tile = blockIdx.x / C::CLUSTER_M, tile_step = gridDim.x / C::CLUSTER_M;
  const int my_units = C::kTailSplit ? tail.count(blockIdx.x)
                                     : (num_units > first_tile ? (num_units - first_tile + tile_step - 1) / tile_step : 0);
  const auto unit_of = [&](int i, int& t, int& split, int& kb0, int& kb1) {
    if constexpr (C::kTailSplit) {
      tail.unit(blockIdx.x, i, t, kb0, kb1), split = 0;  // (K splits are the partial entries')
    } else {
      const int u = first_tile + i * tile_step;
      t = u / splits, split = u - t * splits;
      work.k_range(split, kb0, kb1);
    }
  };
  // Every CTA of a cluster walks the same tiles (the cluster's tile); CTA `rank` owns rows
  // [rank * BLOCK_M, rank * BLOCK_M + BLOCK_M) of it. Rows past M are zero-filled and not stored.
  const uint32_t rank = C::CLUSTER_M > 1 ? cluster_ctarank() : 0u;

  if (warpgroup == 0) {
    // ---------------- producer ----------------
    setmaxnreg_dec<C::PRODUCER_REGS>();
    if (threadIdx.x == 0) {
      prefetch_tensormap(&tma_a);
      prefetch_tensormap(&tma_b);
      PipelineState<C::kStages> st;
      for (int i = 0; i < my_units; ++i) {
        int t, split, kb0, kb1;
        unit_of(i, t, split, kb0, kb1);
        const sched::TileCoord tc = scheduler.coord(t);
        const int m0 = tc.m_blk * C::TILE_M + rank * C::BLOCK_M, n0 = tc.n_blk * C::BLOCK_N;
        const int ab = p.a_batched ? tc.batch : 0, bb = p.b_batched ? tc.batch : 0;
        for (int kb = kb0; kb < kb1; ++kb) {
          mbarrier_wait(&empty[st.stage], st.phase ^ 1u);
          uint8_t* sa = smem + st.stage * C::STAGE_BYTES;
          uint8_t* sb = sa + C::A_BYTES;
          const int k0 = kb * C::STAGE_K;
          mbarrier_arrive_expect_tx(&full[st.stage], C::STAGE_BYTES);
#pragma unroll
          for (int c = 0; c < C::K_CHUNKS; ++c) {  // chunk c of A (BLOCK_M rows x 128 bytes) at c * A_CHUNK
            const int kc = k0 + c * C::BLOCK_K;
            if constexpr (C::kATrans) {  // one 128(m) x 128(k) box of 8-bit elements, MN-major
              tma_load_3d(sa, &tma_a, &full[st.stage], m0, kc, ab);
            } else if constexpr (C::kAMN) {
#pragma unroll
              for (int j = 0; j < C::BLOCK_M / 64; ++j)
                tma_load_3d(sa + c * C::A_CHUNK + j * 8192, &tma_a, &full[st.stage], m0 + 64 * j, kc, ab);
            } else {
              tma_load_3d(sa + c * C::A_CHUNK, &tma_a, &full[st.stage], kc, m0, ab);
            }
          }
          if constexpr (C::CLUSTER_M > 1) {  // our half of B, into both CTAs
            constexpr uint16_t kMask = (1u << C::CLUSTER_M) - 1;
            if constexpr (C::kBMN) {
              constexpr int kPieces = C::BLOCK_N / 64 / C::CLUSTER_M;
#pragma unroll
              for (int i = 0; i < kPieces; ++i) {
                const int j = rank * kPieces + i;
                tma_load_3d_multicast(sb + j * 8192, &tma_b, &full[st.stage], kMask, n0 + 64 * j, k0, bb);
              }
            } else {
              tma_load_3d_multicast(sb + rank * C::BOX_N * 128, &tma_b, &full[st.stage], kMask, k0,
                                    n0 + rank * C::BOX_N, bb);
            }
          } else if constexpr (C::kBMN) {
#pragma unroll
            for (int j = 0; j < C::BLOCK_N / 64; ++j)
              tma_load_3d(sb + j * 8192, &tma_b, &full[st.stage], n0 + 64 * j, k0, bb);
          } else {
#pragma unroll
            for (int c = 0; c < C::K_CHUNKS; ++c)
              tma_load_3d(sb + c * C::B_CHUNK, &tma_b, &full[st.stage], k0 + c * C::BLOCK_K, n0, bb);
          }
          st.advance();
        }
      }
    }
  } else if constexpr (C::kPingPong) {
    // ---------------- consumers, ping-pong: warpgroup cw takes every other tile ----------------
    setmaxnreg_inc<232>();
    const int cw = __shfl_sync(0xffffffffu, warpgroup - 1, 0);  // warp-uniform for the compiler
    float acc0[C::ACC_REGS], acc1[C::ACC_REGS];  // rows [0, 64) and [64, 128) of the tile
    PipelineState<C::kStages> st;
    constexpr uint32_t A_LBO = C::kAMN ? 8192 : 16, B_LBO = C::kBMN ? 8192 : 16;
    constexpr uint32_t K_STEP_A = C::kAMN ? C::INSTR_K * 128 : 32;
    constexpr uint32_t K_STEP_B = C::kBMN ? C::INSTR_K * 128 : 32;
    uint32_t order_phase = 0;
    const uint64_t desc_a0 = desc::sm90_smem_desc(smem_addr(smem), A_LBO, 1024, desc::Sm90Swizzle::k128B);
    const uint64_t desc_b0 = desc::sm90_smem_desc(smem_addr(smem) + C::A_BYTES, B_LBO, 1024, desc::Sm90Swizzle::k128B);
    int j = 0;
    for (int t = first_tile; t < num_tiles; t += tile_step, ++j) {
      if ((j & 1) != cw) {  // the other warpgroup's tile: skip its ring slots
        st.advance_by(k_blocks);
        continue;
      }
      // NOTE: mbarrier parity waits only tell phases apart within one lap of the ring. Skipping the
      // other warpgroup's k-blocks puts this one up to k_blocks slots ahead, so it may only wait on
      // the ring once the other warpgroup has passed every wait of the previous tile (order barrier).
      // This is also what makes the mainloops alternate: our MMAs start as the other's epilogue does.
      if (j > 0) {
        mbarrier_wait(&order[cw], order_phase);
        order_phase ^= 1u;
      }
      const sched::TileCoord tc = scheduler.coord(t);
      int prev_stage = -1;
      for (int kb = 0; kb < k_blocks; ++kb) {
        mbarrier_wait(&full[st.stage], st.phase);
        const uint32_t stage_off = st.stage * C::STAGE_BYTES;
        fence_operands(acc0);
        fence_operands(acc1);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < C::BLOCK_K / C::INSTR_K; ++ks) {
          const uint64_t db = desc::sm90_desc_advance(desc_b0, stage_off + ks * K_STEP_B);
          const uint32_t scale_d = (kb > 0 || ks > 0) ? 1u : 0u;
          // NOTE: rows 64..127 of A start 8 KB later in both layouts (64 rows x 128 B, or the second
          // 64-element MN chunk of BLOCK_K x 128 B).
          mma_step<C>(acc0, desc::sm90_desc_advance(desc_a0, stage_off + ks * K_STEP_A), db, scale_d);
          mma_step<C>(acc1, desc::sm90_desc_advance(desc_a0, stage_off + 8192 + ks * K_STEP_A), db, scale_d);
        }
        wgmma_commit();
        fence_operands(acc0);
        fence_operands(acc1);
        wgmma_wait<1>();
        fence_operands(acc0);
        fence_operands(acc1);
        if (prev_stage >= 0 && lane == 0) mbarrier_arrive(&empty[prev_stage]);
        prev_stage = st.stage;
        st.advance();
      }
      // Every full-barrier wait of this tile is behind us: the other warpgroup may start its tile.
      __syncwarp();
      if (lane == 0) mbarrier_arrive(&order[cw ^ 1]);
      wgmma_wait<0>();
      fence_operands(acc0);
      fence_operands(acc1);
      if (prev_stage >= 0 && lane == 0) mbarrier_arrive(&empty[prev_stage]);
      const int row0 = tc.m_blk * C::BLOCK_M + 16 * (warp % 4) + lane / 4;
      const int col0 = tc.n_blk * C::BLOCK_N + 2 * (lane % 4);
      epilogue_store<C>(acc0, p, tc.batch, row0, col0);
      epilogue_store<C>(acc1, p, tc.batch, row0 + 64, col0);
    }
  } else {
    // ---------------- consumers, cooperative ----------------
    setmaxnreg_inc<C::CONSUMER_REGS>();
    // rows [64 * cw, 64 * cw + 64) of the tile; broadcast from lane 0 so the compiler knows it is
    // warp-uniform and keeps the descriptors in uniform registers (no R2UR per wgmma).
    const int cw = __shfl_sync(0xffffffffu, warpgroup - 1, 0);
    float acc[C::ACC_REGS];
    float part[C::PART_N / 2];  // kPromote: one ring slot's sums of PART_N columns (unused otherwise)
    PipelineState<C::kStages> st;
    // Descriptor constants (bytes). K-major: SBO = 8 rows x 128 B. MN-major: LBO = the 8 KB between
    // 64-element chunks along M/N, SBO = 8 K-rows x 128 B.
    constexpr uint32_t A_LBO = C::kAMNSmem ? 8192 : 16, B_LBO = C::kBMN ? 8192 : 16;
    // kTmaStore: this warpgroup's two output boxes.
    epilogue::StoreRing<C::OUT_BOX_BYTES> ring{out_bufs + cw * 2 * C::OUT_BOX_BYTES, 0u};
    // kATrans: A is read from this warpgroup's transposed buffers, not from the ring.
    const uint64_t desc_a0 = desc::sm90_smem_desc(C::kATrans ? smem_addr(trans) + cw * 16384 : smem_addr(smem) + cw * 8192,
                                                  A_LBO, 1024, desc::Sm90Swizzle::k128B);
    const uint64_t desc_b0 = desc::sm90_smem_desc(smem_addr(smem) + C::A_BYTES, B_LBO, 1024, desc::Sm90Swizzle::k128B);
    // Releases ring slot `s` to the producer(s): with a cluster, lane r arrives on CTA r's barrier.
    const auto release = [&](int s) {
      if constexpr (C::CLUSTER_M > 1) {
        if (lane < C::CLUSTER_M) mbarrier_arrive_cluster_cta_scope(mapa_shared(smem_addr(&empty[s]), lane));
      } else {
        if (lane == 0) mbarrier_arrive(&empty[s]);
      }
    };
    // kEpiOverlap: the previous tile's packed output, stored after the next unit's first MMAs are issued.
    Packed<C> pending_out;
    int pending_batch = -1, pending_row0 = 0, pending_col0 = 0;  // pending_batch < 0: nothing pending
    const auto store_pending = [&]() {
      if constexpr (C::kEpiOverlap) {
        if (pending_batch >= 0)
          store_packed_tma<C>(pending_out, p, pending_batch, pending_row0, pending_col0, &tma_out, ring, cw);
        pending_batch = -1;
      }
    };
    for (int i = 0; i < my_units; ++i) {
      int t, split, kb0, kb1;
      unit_of(i, t, split, kb0, kb1);
      const sched::TileCoord tc = scheduler.coord(t);
      const int cta_row0 = tc.m_blk * C::TILE_M + rank * C::BLOCK_M;
      int prev_stage = -1;
      if constexpr (C::kPromote) {
#pragma unroll
        for (int r = 0; r < C::ACC_REGS; ++r) acc[r] = 0.f;
      }
      // kATrans: k-block kb's A goes into this warpgroup's buffer kb & 1, one k-block ahead: k-block
      // kb + 1 is transposed while the MMAs of kb run (they read the other buffer).
      const auto transpose = [&](const PipelineState<C::kStages>& s, int kb) {
        mbarrier_wait(&full[s.stage], s.phase);
        transpose_a_half(smem_addr(smem) + s.stage * C::STAGE_BYTES, smem_addr(trans) + cw * 16384 + (kb & 1) * 8192,
                         cw, warp % 4, lane);
        fence_proxy_async_shared();  // our generic-proxy stores, before wgmma (async proxy) reads them
      };
      if constexpr (C::kATrans) {
        named_barrier_sync(C::kTransBarrier + cw, 128);  // the previous unit's MMAs retired in every warp
        transpose(st, kb0);
      }
      for (int kb = kb0; kb < kb1; ++kb) {
        if constexpr (!C::kATrans) mbarrier_wait(&full[st.stage], st.phase);
        const uint32_t stage_off = st.stage * C::STAGE_BYTES;
        const uint32_t a_off = C::kATrans ? (kb & 1) * 8192 : stage_off;
        // kATrans: every warp's rows of kb are written, and every warp's MMAs of kb - 1 retired (the
        // wait<0> below), so buffer (kb + 1) & 1 is free after this barrier.
        if constexpr (C::kATrans) named_barrier_sync(C::kTransBarrier + cw, 128);
        // kATrans: the next k-block's transpose, while this one's (first) MMAs run.
        const auto transpose_next = [&]() {
          if constexpr (C::kATrans) {
            if (kb + 1 < kb1) {
              PipelineState<C::kStages> next = st;
              next.advance();
              transpose(next, kb + 1);
            }
          }
        };
        if constexpr (C::kPromote) {
          // The slot's MMAs, PART_N columns at a time, into `part` (scale-d 0 first); once they retire
          // their sums join acc in f32; then the slot goes back. (Reading the retired set of two after a
          // wait<1> made ptxas serialize every wgmma: C7514.)
#pragma unroll
          for (int h = 0; h < C::BLOCK_N / C::PART_N; ++h) {
            slot_mmas<C, C::PART_N>(part, desc_a0, desc_b0, a_off, stage_off + h * C::PART_N * 128, true);
            if (h == 0) transpose_next();
            wgmma_wait<0>();
            fence_operands(part);
#pragma unroll
            for (int r = 0; r < C::PART_N / 2; ++r) acc[h * (C::PART_N / 2) + r] += part[r];
          }
          release(st.stage);
        } else {
          // The slot's MMAs into acc; the unit's first one overwrites it (scale-d 0).
          slot_mmas<C, C::BLOCK_N>(acc, desc_a0, desc_b0, a_off, stage_off, kb == kb0);
          transpose_next();
          if (kb == kb0) store_pending();  // the previous tile's stores, under these MMAs
          // The MMAs of the previous k-block have retired once at most one group is pending:
          // hand its slot back to the producer. (Releasing each slot after a wait<0> instead measured
          // slower on the bf16 decode entries: 14.9 -> 16.2 us, 16 x 4096 x 4096, stream_probe.cu.)
          wgmma_wait<1>();
          fence_operands(acc);
          if (prev_stage >= 0) release(prev_stage);
          prev_stage = st.stage;
        }
        st.advance();
      }
      wgmma_wait<0>();
      fence_operands(acc);
      if (prev_stage >= 0) release(prev_stage);
      // A piece of a last-wave tile: its owner adds the other pieces' partial sums; they store theirs.
      if constexpr (C::kTailSplit)
        if (tail.split_tile(t) && !tail_fixup<C>(acc, p, tail, t, kb0)) continue;
      if constexpr (C::kSplitsInKernel)
        if (p.splits > 1 && p.ws_ld == 0 && !split_fixup<C>(acc, p, first_tile + i * tile_step, split, num_units))
          continue;

      // ---------------- epilogue: registers -> global ----------------
      // wgmma D fragment: acc[i] holds row 16*w + lane/4 + 8*((i/2)%2), col 8*(i/4) + 2*(lane%4) + i%2.
      if constexpr (C::kPartialOut) {
        partial_store<C>(acc, p, tc.batch, split, cta_row0 + cw * 64 + 16 * (warp % 4) + lane / 4,
                         tc.n_blk * C::BLOCK_N + 2 * (lane % 4));
        continue;
      }
      if constexpr (C::kSmemEpilogue) {
        epilogue_store_staged<C>(acc, p, tc, cta_row0, cw, epi_stage + cw * 64 * C::EPI_STRIDE);
        continue;
      }
      if constexpr (C::kTmaStore) {
        const int wg_row0 = cta_row0 + cw * 64, col0 = tc.n_blk * C::BLOCK_N;
        if (C::kEpiOverlap && p.epi.out_type != static_cast<int32_t>(DType::kF32)) {
          epilogue_pack<C>(acc, p, tc.batch, wg_row0, col0, pending_out);
          pending_batch = tc.batch, pending_row0 = wg_row0, pending_col0 = col0;
        } else {
          epilogue_store_tma<C>(acc, p, tc.batch, wg_row0, col0, &tma_out, ring, cw);
        }
        continue;
      }
      const int row0 = cta_row0 + cw * 64 + 16 * (warp % 4) + lane / 4;
      const int col0 = tc.n_blk * C::BLOCK_N + 2 * (lane % 4);
      epilogue_store<C>(acc, p, tc.batch, row0, col0);
    }
    store_pending();  // kEpiOverlap: the last tile's
    // The output is complete only once the bulk stores have been performed.
    if constexpr (C::kTmaStore) ring.drain(threadIdx.x % 128 == 0);
  }
  // NOTE: a CTA may not exit while its peer can still multicast into its shared memory or arrive on
  // its barriers: the whole cluster leaves together.
  if constexpr (C::CLUSTER_M > 1) {
    __syncwarp();
    cluster_sync();
  }
#endif
}

}  // namespace jax_tmem::sm90
