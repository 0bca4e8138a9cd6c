// jax_tmem: the sm_100a / sm_103a CTA-pair GEMM (tcgen05 cta_group::2, "2-SM" UMMA). A (2,1,1) cluster
// computes 256 x BLOCK_N tiles: CTA rank r of the pair loads rows [128 r, 128 r + 128) of A and columns
// [BLOCK_N/2 r, BLOCK_N/2 (r + 1)) of B into the same shared-memory offsets; the leader (rank 0) issues
// one M=256 tcgen05.mma per K step that reads both CTAs' tiles, and each CTA's TMEM receives its own
// 128 rows x the full BLOCK_N columns (reference §12). Roles per CTA as in the 1-CTA kernel:
//   warp 0  TMA: both CTAs load their halves with the .cta_group::2 TMA form, whose bytes complete the
//           LEADER's full barrier (peer bit masked); only the leader's producer arms it (expect_tx of
//           both halves). Each producer waits its own empty barrier.
//   warp 1  MMA (leader only): waits the leader's full barrier, issues the MMAs, commits with
//           .multicast::cluster to both CTAs' empty[s] and, per tile, to both CTAs' tmem_full[a].
//   warp 2  TMEM: tcgen05.alloc/dealloc .cta_group::2, with a cluster barrier before each (pitfall 3).
//   warps 4-7 epilogue: its own 128 rows; tmem_empty lives in the leader and counts the 8 epilogue
//           warps of the pair (remote arrive from the peer). kTmaStore (menu config 9): each warp stores
//           its 32 rows through a double-buffered swizzled box and TMA (the 1-CTA kernel's
//           epilogue_tile_tma; the StoreRing protocol ran on the H200 as sm_90a config 8).
// kSfVec > 0 (the block-scaled GEMM, kinds as in the 1-CTA Config): each CTA loads the k-block's scale blocks
// it needs into its own stage (load_scale_blocks: its 128 rows of A; ALL BLOCK_N rows of B, as its TMEM holds its
// rows x the full N) on its own sf_full[s]; warp 3 of each CTA forwards that completion to the leader's full[s]
// (remote arrive: 1 + 2 arrivals a phase), and the leader's tcgen05.cp.cta_group::2 copies each CTA's blocks
// into its own TMEM columns (as DeepGEMM's 2-CTA block-scaled GEMM: each CTA's own scales, a warp of each CTA
// arriving on the leader's barrier). Rows of a last pair tile past M have no scale row block (the 128x4 layout
// pads to 128 rows): that CTA loads no A scales, and its accumulator rows are never stored.
// NOTHING IN THIS FILE HAS BEEN EXECUTED ON A BLACKWELL GPU (compiled and SASS-checked only).
#pragma once

#include "jax_tmem/kernels/sm100_gemm.cuh"
#include "jax_tmem/ptx/cluster.cuh"

namespace jax_tmem::sm100 {

template <DType kA_, DType kB_, int BLOCK_N_, int kStages_, bool kAMN_, bool kBMN_, bool kTmaStore_ = false,
          int kSfVec_ = 0>
struct Config2Cta : MmaShape<kA_, kB_, 256, BLOCK_N_, kAMN_, kBMN_, kSfVec_> {  // one M = 256 MMA per K step
  using Shape = MmaShape<kA_, kB_, 256, BLOCK_N_, kAMN_, kBMN_, kSfVec_>;
  using Shape::kA, Shape::kMma, Shape::kBlockScaled, Shape::BLOCK_K, Shape::MN_CHUNK, Shape::SF_BYTES,
      Shape::SFB_BLOCKS;
  static constexpr int BLOCK_M = 256;               // rows per pair tile (128 per CTA)
  static constexpr int BLOCK_N = BLOCK_N_;          // columns per pair tile = UMMA N
  static constexpr int kStages = kStages_;
  static constexpr int CTA_M = BLOCK_M / 2, CTA_N = BLOCK_N / 2;  // this CTA's share of A rows / B columns
  static constexpr int BOX_M = CTA_M, BOX_N = CTA_N;
  static constexpr int TILE_M = BLOCK_M, TILE_N = BLOCK_N;  // one scheduler tile (the pair's)
  static constexpr int kPartialOut = 0;   // no split-K on sm_100a yet
  static constexpr bool kTmaStore = kTmaStore_;
  static constexpr int OUT_BOX_ROWS = 32;  // an epilogue warp's TMEM lane quadrant
  static constexpr int OUT_BOX_BYTES = OUT_BOX_ROWS * 128;
  static constexpr int OUT_BYTES = kTmaStore ? 4 * 2 * OUT_BOX_BYTES : 0;  // 2 boxes per epilogue warp
  static constexpr int CTAS_PER_TILE = 2;   // launched as (2,1,1) clusters by launch_persistent
  static constexpr int A_BYTES = CTA_M * 128;
  static constexpr int B_BYTES = CTA_N * 128;
  static constexpr int TX_BYTES = A_BYTES + B_BYTES;  // one CTA's TMA bytes per stage (both land on the leader)
  static constexpr int STAGE_BYTES = TX_BYTES + SF_BYTES;  // + this CTA's scale blocks (block-scaled)
  static constexpr int kAccStages = 2;
  // Per CTA: 128 lanes x N accumulators; block-scaled: scale columns per stage (its 128 A rows, all N B rows).
  static constexpr TmemPlan kTmem =
      make_tmem_plan(BLOCK_N, kAccStages, 128, kBlockScaled ? BLOCK_K : 0, Shape::kSfVec, kBlockScaled ? kStages : 0);
  static constexpr uint32_t TMEM_COLS = kTmem.alloc_cols();
  static constexpr uint32_t ACC_STRIDE = kTmem.acc_offset(1);
  static constexpr uint32_t SFA_COL0 = kTmem.sfa_offset(0), SFA_COLS = kTmem.sfa_cols;
  static constexpr uint32_t SFB_COL0 = kTmem.sfb_offset(0), SFB_COLS = kTmem.sfb_cols;
  static constexpr int NUM_THREADS = 256;
  static constexpr int kGroupM = 4;
  static constexpr int kBarriers = 2 * kStages + 2 * kAccStages + (kBlockScaled ? kStages : 0);
  static constexpr int SMEM_BYTES = kStages * STAGE_BYTES + OUT_BYTES + 1024 + kBarriers * 8 + 16;

  static_assert(!kBlockScaled || SFB_BLOCKS == 1, "block-scaled pair: 128-wide tiles (B's scales one row block)");
  static_assert(kTmem.valid(), "TMEM plan invalid");
  static_assert(kMma != desc::MmaKind::kI8, "kind::i8 is built for the 1-CTA kernel only");
  static_assert(!kBMN_ || CTA_N % MN_CHUNK == 0, "an MN-major B half must be whole 128-byte atoms");
  static_assert(!(kA == DType::kF32 && (kAMN_ || kBMN_)), "tf32 MN-major needs the 128B/32B-atom layout");
  static_assert(SMEM_BYTES <= 232448, "shared memory per CTA exceeds 227 KB");
  static_assert(STAGE_BYTES % 1024 == 0, "128B-swizzle tiles must stay 1024-byte aligned");
};

template <class C>
__device__ __forceinline__ void issue_mma_2cta(uint32_t d_tmem, uint64_t da, uint64_t db, uint32_t accumulate) {
  using namespace jax_tmem::ptx;
  if constexpr (C::kMma == desc::MmaKind::kF16) tcgen05_mma_f16_cg2(d_tmem, da, db, C::IDESC, accumulate);
  else if constexpr (C::kMma == desc::MmaKind::kTF32) tcgen05_mma_tf32_cg2(d_tmem, da, db, C::IDESC, accumulate);
  else tcgen05_mma_f8f6f4_cg2(d_tmem, da, db, C::IDESC, accumulate);
}

inline constexpr int kSfForwardWarp = 3;  // block-scaled pair: forwards sf_full to the leader's full barrier

template <class C>
__global__ void __launch_bounds__(C::NUM_THREADS, 1)
    sm100_gemm_2cta_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                           const __grid_constant__ CUtensorMap tma_out, const Params p) {
#if defined(__CUDA_ARCH__) && (defined(__CUDA_ARCH_FEAT_SM100_ALL) || defined(__CUDA_ARCH_FEAT_SM103_ALL))
  using namespace jax_tmem::ptx;
  // NOTE: both CTAs must use identical shared-memory offsets: the leader's descriptors address the
  // peer's tiles, and the commit multicast / peer-masked TMA barrier address are offsets too.
  uint8_t* smem = aligned_dynamic_smem();
  uint8_t* out_bufs = smem + C::kStages * C::STAGE_BYTES;  // kTmaStore only (OUT_BYTES, 1024-aligned)
  uint64_t* full = reinterpret_cast<uint64_t*>(out_bufs + C::OUT_BYTES);
  uint64_t* empty = full + C::kStages;
  uint64_t* tmem_full = empty + C::kStages;
  uint64_t* tmem_empty = tmem_full + C::kAccStages;
  uint64_t* sf_full = tmem_empty + C::kAccStages;  // block-scaled: this CTA's scale blocks landed (kStages)
  uint32_t* tmem_slot = reinterpret_cast<uint32_t*>(sf_full + (C::kBlockScaled ? C::kStages : 0));

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const uint32_t rank = cluster_ctarank();  // 0 = leader
  const bool leader = rank == 0;

  if (threadIdx.x == 0) {
    for (int s = 0; s < C::kStages; ++s) {
      // leader: its producer's expect_tx (both halves' bytes land here) + block-scaled: both CTAs' forwards
      mbarrier_init(&full[s], C::kBlockScaled ? 3 : 1);
      mbarrier_init(&empty[s], 1);  // the leader's multicast commit
      if constexpr (C::kBlockScaled) mbarrier_init(&sf_full[s], 1);  // this CTA's producer's expect_tx
    }
    for (int s = 0; s < C::kAccStages; ++s) {
      mbarrier_init(&tmem_full[s], 1);   // the leader's multicast commit
      mbarrier_init(&tmem_empty[s], 8);  // leader: 4 epilogue warps of each CTA
    }
    fence_barrier_init();
  }
  // NOTE: the peer must have launched and initialised its barriers before anyone allocates TMEM as a
  // pair, sends it TMA bytes or commits to it (reference §13.3).
  cluster_sync();
  if (warp == kTmemWarp) {
    tmem_alloc<2>(tmem_slot, C::TMEM_COLS);
    tmem_relinquish_alloc_permit<2>();
    tcgen05_fence_before_thread_sync();
  }
  __syncthreads();
  tcgen05_fence_after_thread_sync();
  const uint32_t tmem_base = *tmem_slot;

  const sched::PersistentScheduler<C::kGroupM> scheduler{(p.m + C::BLOCK_M - 1) / C::BLOCK_M,
                                                         (p.n + C::BLOCK_N - 1) / C::BLOCK_N, p.batch};
  const int num_tiles = scheduler.num_tiles();
  const int k_blocks = (p.k + C::BLOCK_K - 1) / C::BLOCK_K;
  const int pair = blockIdx.x / 2, num_pairs = gridDim.x / 2;

  if (warp == kTmaWarp) {
    if (elect_one()) {
      prefetch_tensormap(&tma_a);
      prefetch_tensormap(&tma_b);
      PipelineState<C::kStages> st;
      for (int t = pair; t < num_tiles; t += num_pairs) {
        const sched::TileCoord tc = scheduler.coord(t);
        const int m0 = tc.m_blk * C::BLOCK_M + rank * C::CTA_M, n0 = tc.n_blk * C::BLOCK_N + rank * C::CTA_N;
        const int ab = p.a_batched ? tc.batch : 0, bb = p.b_batched ? tc.batch : 0;
        for (int kb = 0; kb < k_blocks; ++kb) {
          mbarrier_wait(&empty[st.stage], st.phase ^ 1u);
          uint8_t* sa = smem + st.stage * C::STAGE_BYTES;
          uint8_t* sb = sa + C::A_BYTES;
          if (leader) mbarrier_arrive_expect_tx(&full[st.stage], 2 * C::TX_BYTES);
          if constexpr (C::kBlockScaled) {
            // this CTA's 128 rows of A (none past M: the 128x4 layout has no such row block), all of B's N
            const int64_t a_blk = int64_t(tc.m_blk) * 2 + rank;
            const bool a_rows = a_blk < (p.m + 127) / 128;
            mbarrier_arrive_expect_tx(&sf_full[st.stage], scale_tx_bytes<C>(p, kb, a_rows));
            load_scale_blocks<C>(p, tc.batch, a_blk, a_rows, int64_t(tc.n_blk) * C::SFB_BLOCKS, kb, sb + C::B_BYTES,
                                 &sf_full[st.stage]);
          }
          load_stage<C>(tma_load_3d_cg2, sa, sb, &tma_a, &tma_b, &full[st.stage], m0, n0, kb * C::BLOCK_K, ab, bb);
          st.advance();
        }
      }
    }
    __syncwarp();
  } else if (warp == kMmaWarp) {
    if (leader && elect_one()) {
      PipelineState<C::kStages> st;
      PipelineState<C::kAccStages> acc;
      for (int t = pair; t < num_tiles; t += num_pairs) {
        mbarrier_wait(&tmem_empty[acc.stage], acc.phase ^ 1u);
        tcgen05_fence_after_thread_sync();
        const uint32_t d_tmem = tmem_base + acc.stage * C::ACC_STRIDE;
        for (int kb = 0; kb < k_blocks; ++kb) {
          mbarrier_wait(&full[st.stage], st.phase);
          tcgen05_fence_after_thread_sync();
          const uint32_t a_base = smem_addr(smem + st.stage * C::STAGE_BYTES);
          const uint32_t b_base = a_base + C::A_BYTES;
          if constexpr (C::kBlockScaled) {
            // Scale groups: those inside K (the same in both CTAs); the peer's rows past M read stale scales
            // for zero-filled data, in rows that are never stored.
            const int mmas = min(C::BLOCK_K / C::UMMA_K, (p.k - kb * C::BLOCK_K + C::UMMA_K - 1) / C::UMMA_K);
            issue_block_scaled_kblock<C>(d_tmem, a_base, b_base, b_base + C::B_BYTES,
                                         tmem_base + C::SFA_COL0 + st.stage * C::SFA_COLS,
                                         tmem_base + C::SFB_COL0 + st.stage * C::SFB_COLS,
                                         kblock_sf_groups<C>(p, kb), mmas, kb > 0);
          } else {
#pragma unroll
            for (int ks = 0; ks < C::BLOCK_K / C::UMMA_K; ++ks)
              issue_mma_2cta<C>(d_tmem, operand_desc<C, C::kAMN>(a_base, ks), operand_desc<C, C::kBMN>(b_base, ks),
                                (kb > 0 || ks > 0) ? 1u : 0u);
          }
          tcgen05_commit_cg2_multicast(&empty[st.stage], 0x3);
          st.advance();
        }
        tcgen05_commit_cg2_multicast(&tmem_full[acc.stage], 0x3);
        acc.advance();
      }
    }
    __syncwarp();
  } else if (warp == kSfForwardWarp) {
    // Block-scaled: this CTA's scale blocks of each stage landed -> one arrive on the leader's full[s].
    if constexpr (C::kBlockScaled) {
      if (elect_one()) {
        const uint32_t leader_full = mapa_shared(smem_addr(full), 0);
        PipelineState<C::kStages> st;
        for (int t = pair; t < num_tiles; t += num_pairs) {
          for (int kb = 0; kb < k_blocks; ++kb) {
            mbarrier_wait(&sf_full[st.stage], st.phase);
            mbarrier_arrive_cluster(leader_full + st.stage * 8);
            st.advance();
          }
        }
      }
    }
    __syncwarp();
  } else if (warp >= kFirstEpilogueWarp) {
    const int quadrant = warp % 4;
    const uint32_t leader_tmem_empty = mapa_shared(smem_addr(tmem_empty), 0);
    PipelineState<C::kAccStages> acc;
    epilogue::StoreRing<C::OUT_BOX_BYTES> ring{out_bufs + quadrant * 2 * C::OUT_BOX_BYTES, 0u};  // kTmaStore
    for (int t = pair; t < num_tiles; t += num_pairs) {
      const sched::TileCoord tc = scheduler.coord(t);
      mbarrier_wait(&tmem_full[acc.stage], acc.phase);
      tcgen05_fence_after_thread_sync();
      const int row = tc.m_blk * C::BLOCK_M + rank * C::CTA_M + quadrant * 32 + lane;
      const int64_t row_index = static_cast<int64_t>(tc.batch) * p.m + row;
      const uint32_t taddr = tmem_base + acc.stage * C::ACC_STRIDE + (static_cast<uint32_t>(quadrant * 32) << 16);
      if constexpr (C::kTmaStore)
        epilogue_tile_tma<C>(taddr, row, row_index, tc.m_blk * C::BLOCK_M + rank * C::CTA_M + quadrant * 32, tc.batch,
                             tc.n_blk, p, &tma_out, ring, lane);
      else
        epilogue_tile<C>(taddr, row, row_index, tc.n_blk, p);
      tcgen05_fence_before_thread_sync();
      __syncwarp();
      if (lane == 0) mbarrier_arrive_cluster(leader_tmem_empty + acc.stage * 8);
      acc.advance();
    }
    // The output is complete only once this warp's bulk stores have been performed.
    if constexpr (C::kTmaStore) ring.drain(lane == 0);
  }

  __syncthreads();
  // NOTE: neither CTA may free the pair's TMEM while the other may still use it (reference §13.3).
  cluster_sync();
  if (warp == kTmemWarp) {
    tcgen05_fence_after_thread_sync();
    tmem_dealloc<2>(tmem_base, C::TMEM_COLS);
  }
#endif
}

}  // namespace jax_tmem::sm100
