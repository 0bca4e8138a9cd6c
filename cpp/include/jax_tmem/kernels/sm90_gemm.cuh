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

#include <cuda.h>

#include <cstdint>

#include "jax_tmem/desc_sm90.h"
#include "jax_tmem/epilogue.cuh"
#include "jax_tmem/epilogue_tma.cuh"
#include "jax_tmem/kernels/sm90_act_grad.cuh"
#include "jax_tmem/kernels/sm90_config.cuh"
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
#include "jax_tmem/tail_boxes.h"

// JT_TIMELINE (scripts/stream_probe.cu only, never the package): %globaltimer stamps per CTA into
// jt_timeline[blockIdx.x * 16 + i] where `cond` holds (where a decode GEMM's time goes: start, first data, last
// data, MMAs retired, K splits summed in the cluster, epilogue done).
#ifdef JT_TIMELINE
__device__ unsigned long long jt_timeline[264 * 16];
#define JT_MARK(i, cond)                                                             \
  do {                                                                               \
    if (cond) jt_timeline[blockIdx.x * 16 + (i)] = jax_tmem::ptx::globaltimer();     \
  } while (0)
#else
#define JT_MARK(i, cond) \
  do {                   \
  } while (0)
#endif

namespace jax_tmem::sm90 {


template <class C>
__global__ void __launch_bounds__(C::NUM_THREADS, 1)
    sm90_gemm_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                     const __grid_constant__ CUtensorMap tma_out, const __grid_constant__ CUtensorMap tma_a_tail,
                     const __grid_constant__ CUtensorMap tma_b_tail, const __grid_constant__ CUtensorMap tma_c,
                     const Params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace jax_tmem::ptx;
#if defined(JAX_TMEM_PIN_DESCRIPTORS) && JAX_TMEM_PIN_DESCRIPTORS
  // The shared-memory base, computed once: without the pin ptxas rebuilds it (S2UR SR_CgaCtaId / SR_SWINHI, the
  // 1024-byte alignment) at the top of every consumer k-block; derived back from a shared address, the pointer is
  // also known to be shared (STS instead of generic stores). CMake option JAX_TMEM_PIN_DESCRIPTORS, off: no
  // gain in time measured (H200, docs/PERF.md, 2026-11-28 07:37).
  uint32_t smem_s = smem_addr(aligned_dynamic_smem());
  pin(smem_s);
  uint8_t* smem = static_cast<uint8_t*>(__cvta_shared_to_generic(smem_s));
#else
  uint8_t* smem = aligned_dynamic_smem();
#endif
  uint8_t* trans = smem + C::kStages * C::STAGE_BYTES;     // kATrans only (TRANS_BYTES, 1024-aligned)
  uint8_t* out_bufs = trans + C::TRANS_BYTES;              // kTmaStore only (OUT_BYTES, 1024-aligned)
  uint64_t* full = reinterpret_cast<uint64_t*>(out_bufs + C::OUT_BYTES);
  uint64_t* empty = full + C::kStages;
  uint64_t* order = empty + C::kStages;  // ping-pong only: order[w] = "warpgroup w may run its mainloop"
  uint64_t* c_landed = order + 2;        // kActGrad: the derivative epilogue's box barriers, two per warpgroup
  float* epi_stage = reinterpret_cast<float*>(c_landed + (C::kActGrad ? 4 : 0));  // kSmemEpilogue only (EPI_BYTES)

  const int warpgroup = threadIdx.x / 128;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;

  JT_MARK(12, threadIdx.x == 0);
  // Initialise barriers: full[s] completes on one arrive + the TMA bytes; empty[s] on one arrive from each consumer
  // warpgroup that reads the slot, per CTA of the cluster (kReleasePerWarpgroup: the cooperative dense entries), else
  // from each consumer warp that reads it (4 ping-pong; 4 per consumer warpgroup split-K / swap-AB).
  if (threadIdx.x == 0) {
    for (int s = 0; s < C::kStages; ++s) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], C::kPingPong ? 4 : C::kReleasePerWarpgroup ? C::CONSUMERS * C::CTAS_PER_TILE
                                                                             : 4 * C::CONSUMERS * C::CTAS_PER_TILE);
    }
    mbarrier_init(&order[0], 4);  // one arrive per warp of the other consumer warpgroup
    mbarrier_init(&order[1], 4);
    if constexpr (C::kActGrad)
      for (int b = 0; b < 4; ++b) mbarrier_init(&c_landed[b], 1);
    fence_barrier_init();
    JT_MARK(13, true);
  }
  // NOTE: with a cluster, the peer's barriers must be initialised before our multicast reaches them.
  if constexpr (C::CTAS_PER_TILE > 1) cluster_sync();
  else __syncthreads();
  JT_MARK(0, threadIdx.x == 0);
  // Split-K: the reduce pass may be launched now (its CTAs wait for this grid to complete).
  if constexpr (C::kPartialOut != 0) griddep_launch_dependents();

  const sched::PersistentScheduler<C::kGroupM> scheduler{(p.m + C::TILE_M - 1) / C::TILE_M,
                                                         (p.n + C::TILE_N - 1) / C::TILE_N, p.batch};
  const int num_tiles = scheduler.num_tiles();
  const int k_blocks = (p.k + C::STAGE_K - 1) / C::STAGE_K;  // ring slots per tile
  // Every role of a CTA walks the same units: its tiles and K splits (sched::WorkUnits, shared with the
  // sm_100a kernels); kTailSplit: its whole tiles, then its pieces of the last wave (sched::TailSplit).
  // kSwapTail: a swap-AB entry's last wave shared where the launcher planned it (ws_ld < 0: minus its tiles).
  const bool tail_on = C::kTailSplit || (C::kSwapTail && p.ws_ld < 0);
  const sched::WorkUnits work(num_tiles, k_blocks, C::kPartialOut && !tail_on ? p.splits : 1);
  const int splits = work.splits, num_units = work.num_units;
  const sched::TailSplit tail(num_tiles, tail_on ? (p.ws_ld < 0 ? -p.ws_ld : p.ws_ld) : 0, tail_on ? p.splits : 0,
                              k_blocks, gridDim.x);
  const int first_tile = blockIdx.x / C::CTAS_PER_TILE, tile_step = gridDim.x / C::CTAS_PER_TILE;
  const int my_units = tail_on ? tail.count(blockIdx.x)
                               : (num_units > first_tile ? (num_units - first_tile + tile_step - 1) / tile_step : 0);
  const auto unit_of = [&](int i, int& t, int& split, int& kb0, int& kb1) {
    if (tail_on) {
      tail.unit(blockIdx.x, i, t, kb0, kb1), split = 0;  // (K splits are the partial entries')
    } else {
      const int u = first_tile + i * tile_step;
      t = u / splits, split = u - t * splits;
      work.k_range(split, kb0, kb1);
    }
  };
  // Every CTA of a cluster walks the same tiles (the cluster's tile); CTA `rank` owns rows
  // [rank * BLOCK_M, rank * BLOCK_M + BLOCK_M) of it (CLUSTER_M > 1), or columns [rank * BLOCK_N, ...) (CLUSTER_N > 1).
  // Rows / columns past M / N are not stored (in shared memory they hold zeros, or stale data under a tail box).
  const uint32_t rank = C::CTAS_PER_TILE > 1 ? cluster_ctarank() : 0u;
  const uint32_t rank_m = C::CLUSTER_M > 1 ? rank : 0u, rank_n = C::CLUSTER_N > 1 ? rank : 0u;

  if (warpgroup == 0) {
    // ---------------- producer ----------------
    setmaxnreg_dec<C::PRODUCER_REGS>();
    JT_MARK(7, threadIdx.x == 0);
    if (threadIdx.x == 0) {
      prefetch_tensormap(&tma_a);
      prefetch_tensormap(&tma_b);
      // The last row block of a K-major A / B (past M / N: a decode step's tokens, a weight's last rows) is
      // loaded through a tail map whose box holds just its rows, rounded up to 8 (launch_persistent; TailBoxes):
      // boxes mostly out of bounds cost the TMA unit time per row (H200, 2026-11-29: the 8B layer's
      // GEMMs at 72-96 tokens 1.2-1.6x their time at 128). The slot's rows past the box keep stale data, which
      // reaches only accumulator rows / columns past M / N: those are never stored.
      const TailBoxes<C> tails(p);
      if (tails.a_rows) prefetch_tensormap(&tma_a_tail);
      if (tails.b_rows) prefetch_tensormap(&tma_b_tail);
      PipelineState<C::kStages> st;
      for (int i = 0; i < my_units; ++i) {
        int t, split, kb0, kb1;
        unit_of(i, t, split, kb0, kb1);
        const sched::TileCoord tc = scheduler.coord(t);
        const int m0 = tc.m_blk * C::TILE_M + rank_m * C::BLOCK_M, n0 = tc.n_blk * C::TILE_N + rank_n * C::BLOCK_N;
        const int ab = p.a_batched ? tc.batch : 0, bb = p.b_batched ? tc.batch : 0;
        const bool a_tail = tails.a_rows && m0 + C::BLOCK_M > p.m, b_tail = tails.b_rows && n0 + C::BLOCK_N > p.n;
        const CUtensorMap* map_a = a_tail ? &tma_a_tail : &tma_a;
        const CUtensorMap* map_b = b_tail ? &tma_b_tail : &tma_b;
        const uint32_t stage_bytes = C::STAGE_BYTES - (a_tail ? (C::BLOCK_M - tails.a_rows) * 128 * C::K_CHUNKS : 0) -
                                     (b_tail ? (C::BLOCK_N - tails.b_rows) * 128 * C::K_CHUNKS : 0);
        JT_MARK(8, i == 0);
        for (int kb = kb0; kb < kb1; ++kb) {
          mbarrier_wait(&empty[st.stage], st.phase ^ 1u);
          JT_MARK(9, i == 0 && kb == kb0);
          uint8_t* sa = smem + st.stage * C::STAGE_BYTES;
          uint8_t* sb = sa + C::A_BYTES;
          const int k0 = kb * C::STAGE_K;
          mbarrier_arrive_expect_tx(&full[st.stage], stage_bytes);
          JT_MARK(10, i == 0 && kb == kb0);
#pragma unroll
          for (int c = 0; c < C::K_CHUNKS; ++c) {  // chunk c of A (BLOCK_M rows x 128 bytes) at c * A_CHUNK
            const int kc = k0 + c * C::BLOCK_K;
            if constexpr (C::kATrans) {  // one 128(m) x 128(k) box of 8-bit elements, MN-major
              tma_load_3d_stream<C::kWeightA>(sa, &tma_a, &full[st.stage], m0, kc, ab);
            } else if constexpr (C::CLUSTER_N > 1) {  // our share of A (BOX_M rows), into every CTA of the cluster
              constexpr uint16_t kMask = (1u << C::CLUSTER_N) - 1;
              if constexpr (C::kAMN) {  // 64-element pieces along M
#pragma unroll
                for (int i = 0; i < C::BOX_M / 64; ++i) {
                  const int j = rank * (C::BOX_M / 64) + i;
                  tma_load_3d_multicast_stream<C::kWeightA>(sa + c * C::A_CHUNK + j * 8192, &tma_a, &full[st.stage],
                                                            kMask, m0 + 64 * j, kc, ab);
                }
              } else {
                tma_load_3d_multicast_stream<C::kWeightA>(sa + c * C::A_CHUNK + rank * C::BOX_M * 128, &tma_a,
                                                          &full[st.stage], kMask, kc, m0 + rank * C::BOX_M, ab);
              }
            } else if constexpr (C::kAMN) {
#pragma unroll
              for (int j = 0; j < C::BLOCK_M / 64; ++j)
                tma_load_3d_stream<C::kWeightA>(sa + c * C::A_CHUNK + j * 8192, &tma_a, &full[st.stage], m0 + 64 * j,
                                                kc, ab);
            } else {
              tma_load_3d_stream<C::kWeightA>(sa + c * C::A_CHUNK, map_a, &full[st.stage], kc, m0, ab);
            }
          }
          JT_MARK(11, i == 0 && kb == kb0);
          if constexpr (C::CLUSTER_M > 1) {  // our share of B (BOX_N rows), into every CTA of the cluster
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
              tma_load_3d(sb + c * C::B_CHUNK, map_b, &full[st.stage], k0 + c * C::BLOCK_K, n0, bb);
          }
          JT_MARK(1, i == 0 && kb == kb0);
          st.advance();
        }
      }
      JT_MARK(6, true);
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
    uint64_t desc_a0 = desc::sm90_smem_desc(C::kATrans ? smem_addr(trans) + cw * 16384 : smem_addr(smem) + cw * 8192,
                                            A_LBO, 1024, desc::Sm90Swizzle::k128B);
    uint64_t desc_b0 = desc::sm90_smem_desc(smem_addr(smem) + C::A_BYTES, B_LBO, 1024, desc::Sm90Swizzle::k128B);
#if defined(JAX_TMEM_PIN_DESCRIPTORS) && JAX_TMEM_PIN_DESCRIPTORS
    pin(desc_a0);  // built once, not in every k-block (see smem_s above)
    pin(desc_b0);
#endif
    // Releases ring slot `s` to the producer(s): with a cluster, lane r arrives on CTA r's barrier. Per warp, or
    // (kReleasePerWarpgroup) from the warpgroup's first warp only, as CUTLASS does: wgmma is warpgroup-wide
    // (.sync.aligned), so once that warp's wait_group passed, the warpgroup's MMAs that read the slot retired.
    const auto release = [&](int s) {
      if constexpr (C::kReleasePerWarpgroup)
        if (warp % 4 != 0) return;
      if constexpr (C::CTAS_PER_TILE > 1) {
        if (lane < C::CTAS_PER_TILE) mbarrier_arrive_cluster_cta_scope(mapa_shared(smem_addr(&empty[s]), lane));
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
    // kActGrad: the derivative epilogue (menu::act_grad_in_kernel): c through the output boxes (sm90_act_grad.cuh).
    ActGradPipe<C> ag;
    for (int i = 0; i < my_units; ++i) {
      int t, split, kb0, kb1;
      unit_of(i, t, split, kb0, kb1);
      const sched::TileCoord tc = scheduler.coord(t);
      const int cta_row0 = tc.m_blk * C::TILE_M + rank_m * C::BLOCK_M;
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
        JT_MARK(2, threadIdx.x == 128 && i == 0 && kb == kb0);
        JT_MARK(3, threadIdx.x == 128 && kb == kb1 - 1);
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
          // (A piece of a shared last-wave tile not starting at k-block 0 stores nothing: tail_fixup.)
          if constexpr (C::kActGrad)
            ag.step(kb - kb0, kb1 - kb0, !((C::kTailSplit || C::kSwapTail) && tail.split_tile(t) && kb0 != 0),
                    pending_out, p, &tma_out, &tma_c, ring, c_landed + 2 * cw, cw, pending_batch, pending_row0,
                    pending_col0, tc.batch, cta_row0 + cw * 64, tc.n_blk * C::TILE_N + rank_n * C::BLOCK_N);
          else if (kb == kb0) store_pending();  // the previous tile's stores, under these MMAs
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
      JT_MARK(4, threadIdx.x == 128);
      if (prev_stage >= 0) release(prev_stage);
#ifdef JT_CODE_PAD
      // scripts/stream_probe.cu only (JT_CODE_PAD FMAs, never executed: K is never -7): does code that a GEMM never
      // executes, between its mainloop and its epilogue, cost it time (docs/PERF.md, 2026-12-01 04:00, Next steps 2)?
      if (p.k == -7) {
        float x = acc[0];
#pragma unroll
        for (int r = 0; r < JT_CODE_PAD; ++r) x = x * 1.0001f + float(r);
        p.ws[threadIdx.x] = x;
      }
#endif
      // A piece of a last-wave tile: its owner adds the other pieces' partial sums; they store theirs.
      bool synced = false;  // every consumer warp's MMAs of this unit retired (a fixup's barrier)
      if constexpr (C::kTailSplit || C::kSwapTail)
        if (tail.split_tile(t) && !(synced = tail_fixup<C>(acc, p, tail, t, kb0))) continue;
      if constexpr (C::kPairSplits)
        if (p.splits > 1 && p.ws_ld == 0) {
          const bool mine = pair_fixup<C>(acc, p, num_tiles, t, split, rank);
          JT_MARK(14, threadIdx.x == 128);
          if (!mine) continue;
          synced = true;
        }
      if constexpr (C::kSplitsInKernel)
        if (p.splits > 1 && p.ws_ld == 0) {
          const bool mine = split_fixup<C>(acc, smem, split, p.splits);
          JT_MARK(14, threadIdx.x == 128);
          if (!mine) continue;
          synced = true;
        }

      // ---------------- epilogue: registers -> global ----------------
      const int cta_col0 = tc.n_blk * C::TILE_N + rank_n * C::BLOCK_N;
      // wgmma D fragment: acc[i] holds row 16*w + lane/4 + 8*((i/2)%2), col 8*(i/4) + 2*(lane%4) + i%2.
      if constexpr (C::kPartialOut) {
        // swap-AB, the CTA's last unit: the 16-bit tile through the idle ring (staged_swap_store), once every consumer
        // warp's MMAs retired (no more loads land there: every slot was consumed, the peers' multicasts too)
        if (C::kPartialOut == 2 && i == my_units - 1 && staged_swap_store_ok(p)) {
          if (!synced) named_barrier_sync(C::kTailBarrier, 128 * C::CONSUMERS);
          staged_swap_store<C>(acc, p, tc.batch, cta_row0 + cw * 64 + 16 * (warp % 4), cta_col0,
                               smem_addr(smem) + (warp - 4) * 32 * C::BLOCK_N);
          continue;
        }
        partial_store<C>(acc, p, tc.batch, split, cta_row0 + cw * 64 + 16 * (warp % 4) + lane / 4,
                         cta_col0 + 2 * (lane % 4));
        continue;
      }
      if constexpr (C::kSmemEpilogue) {
        epilogue_store_staged<C>(acc, p, tc, cta_row0, cw, epi_stage + cw * 64 * C::EPI_STRIDE);
        continue;
      }
      if constexpr (C::kTmaStore) {
        const int wg_row0 = cta_row0 + cw * 64, col0 = cta_col0;
        if (C::kActGrad || (C::kEpiOverlap && p.epi.out_type != static_cast<int32_t>(DType::kF32))) {
          epilogue_pack<C>(acc, p, tc.batch, wg_row0, col0, pending_out);
          if constexpr (C::kActGrad) ag.after_pack();
          pending_batch = tc.batch, pending_row0 = wg_row0, pending_col0 = col0;
        } else {
          epilogue_store_tma<C>(acc, p, tc.batch, wg_row0, col0, &tma_out, ring, cw);
        }
        continue;
      }
      const int row0 = cta_row0 + cw * 64 + 16 * (warp % 4) + lane / 4;
      const int col0 = cta_col0 + 2 * (lane % 4);
      epilogue_store<C>(acc, p, tc.batch, row0, col0);
    }
    if constexpr (C::kActGrad)
      ag.flush(pending_out, p, &tma_out, &tma_c, ring, c_landed + 2 * cw, cw, pending_batch, pending_row0, pending_col0);
    else store_pending();  // kEpiOverlap: the last tile's
    JT_MARK(5, threadIdx.x == 128);
    // The output is complete only once the bulk stores have been performed.
    if constexpr (C::kTmaStore) ring.drain(threadIdx.x % 128 == 0);
  }
  if (warpgroup == 0) cluster_split_barriers<C>(p);  // K splits summed in a cluster: the producer's barriers
  // NOTE: a CTA may not exit while its peer can still multicast into its shared memory or arrive on
  // its barriers: the whole cluster leaves together.
  if constexpr (C::CTAS_PER_TILE > 1) {
    __syncwarp();
    cluster_sync();
  }
#endif
}

}  // namespace jax_tmem::sm90
