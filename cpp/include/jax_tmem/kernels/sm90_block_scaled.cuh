// jax_tmem: the sm_90a block-scaled (MX) GEMM kernel: FP8 wgmma with the per-32 block scales applied
// when the accumulators are promoted.
//
//   out[b, i, j] = epilogue( sum_kb sa[i, kb] * sb[j, kb] * sum_{k in kb} A[i, k] * B[j, k] )
//
// kb runs over blocks of 32 along K: exactly the K of one fp8 wgmma (m64nNk32). Per block a consumer
// warpgroup issues the wgmma into a temporary fragment (scale-d = 0) and adds it to its f32 accumulator
// scaled by sa[row] * sb[col] (UE8M0 scales are powers of two, so the product is exact). The two consumer
// warpgroups (64 rows each of the 128-row tile) interleave: one's wgmma runs on the tensor cores while
// the other promotes.
// Cost: 2 FP32 instructions per accumulator per 32-K block (FMUL for sa * sb, FFMA) plus one 8-byte
// shared load per 4 accumulators: ~290 issue cycles per SM per 32-K block of a 128x128 tile against
// 128 tensor-core cycles, so the kernel is bound by instruction issue at roughly half the FP8 wgmma
// rate (docs/PERF.md has the measurement).
//
// Warp roles (384 threads, one CTA per SM, persistent over tiles as the dense kernel):
//   warp 0, lane 0  : TMA loads of the A and B tiles (128B-swizzled, K-major, BLOCK_K = 128) into a
//                     kStages ring, as the dense kernel;
//   warps 1..3      : scale loaders (kLoaderWarps: 3, or one per stage of a shorter ring), taking the
//                     ring's k-blocks round robin: each reads the k-block's
//                     4 scales of every tile row of A and B from global memory (plain (rows, K / 32) or
//                     the 128x4 tiles), turns them into f32 (2^(e - 127); 0 -> 2^-127, 255 -> NaN, as
//                     the CPU reference) and writes them next to the stage's data; its 32 lanes arrive on
//                     the stage's full barrier with the TMA thread;
//   warpgroups 1, 2 : consumers (64 rows each), the promotion above, then the dense kernel's register
//                     epilogue (alpha, bias, activation, c, any output type).
// Tails: TMA zero-fills rows past M / N and K past the end, and the loaders give scales past the end 0,
// so padded blocks add exactly 0.
#pragma once

#include "jax_tmem/kernels/sm90_gemm.cuh"
#include "jax_tmem/kernels/sm90_mx_widen.cuh"

namespace jax_tmem::sm90 {

// The consumer warpgroups' schedule (the table's `schedule` column, sm90_block_scaled_configs.def):
// kPlain: wgmma of a 32-K block into the temporary, wait, promote.
// kOrdered: the two consumer warpgroups take turns on the tensor cores, so that one promotes while the
// other's wgmma runs: warpgroup 1 issues block j's wgmma once warpgroup 0's has completed, warpgroup 0
// issues block j + 1's once warpgroup 1's has (named barriers kTurnBarrier + w, bar.arrive / bar.sync).
// Without it the two tend to run in phase (docs/PERF.md 2026-11-23 17:31: issue slots 47 % busy).
// kPipelined: each consumer warpgroup keeps the tensor cores busy while it promotes: its tile is issued
// in two halves of BLOCK_N / 2 columns, each into its own temporary, one unit (32-K block, half) ahead, so
// that the wgmma of the next unit runs while the previous one's temporary is promoted (consumer_pipelined).
// kWidened: no promotion: the consumers widen each 64-K unit of the stage to bf16 with its scales applied,
// one unit ahead, and run bf16 wgmma on it (kernels/sm90_mx_widen.cuh, consumer_widened).
enum class BsSchedule { kPlain, kOrdered, kPipelined, kWidened };

template <DType kA_, DType kB_, int BLOCK_N_, int kStages_, BsSchedule kSchedule_ = BsSchedule::kPlain>
struct ScaledConfig : Config<kA_, kB_, BLOCK_N_, kStages_, false, false> {
  static constexpr bool kOrdered = kSchedule_ == BsSchedule::kOrdered;
  static constexpr bool kPipelined = kSchedule_ == BsSchedule::kPipelined;
  static constexpr bool kWidened = kSchedule_ == BsSchedule::kWidened;
  static constexpr uint32_t kTurnBarrier = 3;  // named barriers 3 and 4 (0: __syncthreads)
  static constexpr uint32_t kWideBarrier = 5;  // kWidened: the 256 consumer threads
  using Base = Config<kA_, kB_, BLOCK_N_, kStages_, false, false>;
  // kWidened: the bf16 wgmma of a widened tile (its mma_step: both operands K-major in shared memory)
  using WideMma = Config<DType::kBF16, DType::kBF16, BLOCK_N_, kStages_, false, false>;
  static constexpr int SF_BLOCKS = Base::BLOCK_K / 32;                 // scale blocks per k-block (4)
  static constexpr int DATA_BYTES = Base::A_BYTES + Base::B_BYTES;     // what TMA brings per stage
  static constexpr int SFA_FLOATS = SF_BLOCKS * Base::BLOCK_M;         // f32 [SF_BLOCKS][BLOCK_M]
  static constexpr int SFB_FLOATS = SF_BLOCKS * BLOCK_N_;              // f32 [SF_BLOCKS][BLOCK_N]
  static constexpr int STAGE_BYTES = DATA_BYTES + 4 * (SFA_FLOATS + SFB_FLOATS);
  // Scale loader warps (1..3 of warpgroup 0), taking the stages round robin. A loader waits only for its
  // own stages' empty barriers, so it runs up to kLoaderWarps - 1 stages ahead of the others; a parity wait
  // tells phases apart within one lap of the ring only, hence no more loaders than stages.
  static constexpr int kLoaderWarps = kStages_ < 3 ? kStages_ : 3;
  // kWidened: two unit buffers of 64 K in bf16 (A's rows, then B's; 128 bytes each), after the ring
  static constexpr int WIDE_UNIT_BYTES = kWidened ? (Base::BLOCK_M + BLOCK_N_) * 128 : 0;
  static constexpr int SMEM_BYTES = kStages_ * STAGE_BYTES + 2 * WIDE_UNIT_BYTES + 1024 + 2 * kStages_ * 8;
  // Registers per thread after setmaxnreg (warpgroup 0: TMA + scale loaders; the consumers): 128 x
  // LOADER_REGS + 256 x CONSUMER_REGS <= 384 x 168, what the launch allocated (a larger request blocks
  // setmaxnreg.inc forever); the loaders spill at 80. kWidened at BLOCK_N = 256 holds 128 accumulators.
  static constexpr int LOADER_REGS = 96, CONSUMER_REGS = 200;
  static_assert(128 * LOADER_REGS + 256 * CONSUMER_REGS <= 384 * 168, "setmaxnreg: more registers than the CTA has");
  static_assert(Base::ELEM_BYTES == 1 && Base::INSTR_K == 32, "one fp8 wgmma (K = 32) per scale block");
  static_assert(kLoaderWarps >= 1 && kLoaderWarps <= kStages_, "at most one loader warp per ring stage");
  static_assert(STAGE_BYTES % 1024 == 0 && WIDE_UNIT_BYTES % 1024 == 0, "128B-swizzle tiles must stay 1024-byte aligned");
  static_assert(SMEM_BYTES <= 232448, "shared memory per CTA exceeds 227 KB");
  static_assert(BLOCK_N_ % 32 == 0 && (BLOCK_N_ <= 128 || (kWidened && BLOCK_N_ == 256)),
                "the temporary + the accumulator: BLOCK_N <= 128 (kWidened: no temporary, 256 too)");
  static_assert(!kWidened || BLOCK_N_ % 64 == 0, "kWidened: each warpgroup widens BLOCK_N / 2 rows of B, 64 at a time");
};

// The 4 UE8M0 scales [c0, c0 + 4) of row `r` (of `rows`) as one aligned word, byte j = column c0 + j
// (0 past the last row). Plain layout: rows of cols % 4 == 0 bytes (the launcher checks; Python passes
// other plain scales in the 128x4 layout); 128x4 tiles: rows padded to 128 and columns to 4.
// (Fetched for every row of a stage before any is used: the loads are in flight together.)
__device__ __forceinline__ uint32_t fetch_scale_quad(const uint8_t* base, int layout, int cols, int64_t r,
                                                     int64_t rows, int c0) {
  if (r >= rows) return 0u;
  const int64_t idx = layout == 1 ? ((r >> 7) * ((cols + 3) >> 2) + (c0 >> 2)) * 512 + (r & 31) * 16 + (r & 127) / 32 * 4
                                  : r * cols + c0;
  return __ldg(reinterpret_cast<const uint32_t*>(base + idx));
}

// The quad as f32 into shared address dst + 4 j pitch; scales past the ends are an exact 0 (their data is zero-filled
// anyway, and a pre-swizzled tensor's padding may hold anything).
__device__ __forceinline__ void store_scale_quad(uint32_t w, bool row_ok, int c0, int cols, uint32_t dst, int pitch) {
#pragma unroll
  for (int j = 0; j < 4; ++j)
    ptx::sts_f32(dst + 4 * j * pitch, (row_ok && c0 + j < cols) ? ue8m0_to_float((w >> (8 * j)) & 0xffu) : 0.0f);
}

// acc += t * sa[row] * sb[col] for one 32-K block; fragment element 4j + 2h + e is (row + 8h, col 8j + 2q + e).
// `t` holds columns [J0 * 8, J0 * 8 + NT) of the N-wide accumulator (a wgmma of NT columns).
template <int N, int NT = N, int J0 = 0>
__device__ __forceinline__ void promote(float (&acc)[N / 2], const float (&t)[NT / 2], uint32_t sfa, uint32_t sfb,
                                        int row, int q) {
  static_assert(NT % 8 == 0 && J0 * 8 + NT <= N, "t is a column range of acc");
  const float sa0 = ptx::lds_f32(sfa + 4 * row), sa1 = ptx::lds_f32(sfa + 4 * (row + 8));
#pragma unroll
  for (int jt = 0; jt < NT / 8; ++jt) {
    const int j = J0 + jt;
    const float2 sb = ptx::lds_v2f32(sfb + 4 * (8 * j + 2 * q));
    acc[4 * j + 0] = fmaf(t[4 * jt + 0], sa0 * sb.x, acc[4 * j + 0]);
    acc[4 * j + 1] = fmaf(t[4 * jt + 1], sa0 * sb.y, acc[4 * j + 1]);
    acc[4 * j + 2] = fmaf(t[4 * jt + 2], sa1 * sb.x, acc[4 * j + 2]);
    acc[4 * j + 3] = fmaf(t[4 * jt + 3], sa1 * sb.y, acc[4 * j + 3]);
  }
}

// kPipelined: one unit = (32-K block ks of a ring slot, half h of the tile's columns), 2 * SF_BLOCKS per
// slot. Its wgmma into `d` (scale-d 0): rows of A from desc_a0, columns [h * BLOCK_N / 2, ...) of B, i.e.
// B's rows from h * BLOCK_N / 2 (128 bytes of K each, whole 1024-byte swizzle atoms).
template <class C>
__device__ __forceinline__ void issue_unit(float (&d)[C::BLOCK_N / 4], uint64_t desc_a0, uint64_t desc_b0,
                                           uint32_t stage_off, int ks, int h) {
  using namespace jax_tmem::ptx;
  static_assert((C::BLOCK_N / 2) % 8 == 0, "a half is whole swizzle atoms");
  fence_operands(d);
  wgmma_fence();
  mma_step<C, C::BLOCK_N / 2>(d, desc::sm90_desc_advance(desc_a0, stage_off + ks * 32),
                              desc::sm90_desc_advance(desc_b0, stage_off + ks * 32 + h * (C::BLOCK_N / 2) * 128), 0u);
  wgmma_commit();
}

// The consumer loop of a kPipelined configuration for one tile: within a ring slot, unit u + 1's wgmma is
// issued before unit u is waited for and promoted, so a warpgroup's tensor-core work overlaps its own
// promotion (the two temporaries are distinct registers). Each slot starts and ends with no wgmma in
// flight: ptxas serialises every wgmma (C7514) when one is in flight across the loop's back edge with
// another temporary read (sm_90a, CUDA 13.0), so the first unit's latency and the last unit's promotion of
// a slot are left to the other warpgroup to cover. The slot is released after its last promotion has
// read the slot's scales.
template <class C, class St>
__device__ __forceinline__ void consumer_pipelined(float (&acc)[C::ACC_REGS], St& st, uint64_t* full, uint64_t* empty,
                                                   uint32_t scales0, uint64_t desc_a0, uint64_t desc_b0,
                                                   int k_blocks, int frag_row, int q, int lane) {
  using namespace jax_tmem::ptx;
  constexpr int NH = C::BLOCK_N / 2, UNITS = 2 * C::SF_BLOCKS;
  float part0[NH / 2], part1[NH / 2];
  for (int kb = 0; kb < k_blocks; ++kb) {
    const uint32_t stage_off = st.stage * C::STAGE_BYTES, sf = scales0 + stage_off;
    mbarrier_wait(&full[st.stage], st.phase);
    issue_unit<C>(part0, desc_a0, desc_b0, stage_off, 0, 0);
#pragma unroll
    for (int u = 0; u < UNITS; ++u) {
      if (u + 1 < UNITS) {  // the next unit, into the other temporary; then wait for this one
        if ((u + 1) % 2 == 0) issue_unit<C>(part0, desc_a0, desc_b0, stage_off, (u + 1) / 2, 0);
        else issue_unit<C>(part1, desc_a0, desc_b0, stage_off, (u + 1) / 2, 1);
        wgmma_wait<1>();
      } else {
        wgmma_wait<0>();
      }
      const int ks = u / 2;
      const uint32_t sfa_k = sf + 4 * ks * C::BLOCK_M, sfb_k = sf + 4 * (C::SFA_FLOATS + ks * C::BLOCK_N);
      if (u % 2 == 0) {
        fence_operands(part0);
        promote<C::BLOCK_N, NH, 0>(acc, part0, sfa_k, sfb_k, frag_row, q);
      } else {
        fence_operands(part1);
        promote<C::BLOCK_N, NH, NH / 8>(acc, part1, sfa_k, sfb_k, frag_row, q);
      }
    }
    __syncwarp();
    if (lane == 0) mbarrier_arrive(&empty[st.stage]);
    st.advance();
  }
}

template <class C>
__global__ void __launch_bounds__(C::NUM_THREADS, 1)
    sm90_block_scaled_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                             const __grid_constant__ CUtensorMap /*tma_out: unused*/, const Params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace jax_tmem::ptx;
  uint8_t* smem = aligned_dynamic_smem();
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + C::kStages * C::STAGE_BYTES + 2 * C::WIDE_UNIT_BYTES);
  uint64_t* empty = full + C::kStages;
  const int warpgroup = threadIdx.x / 128, warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  // full[s]: the TMA thread's arrive (+ bytes) and the 32 lanes of the stage's scale loader;
  // empty[s]: one arrive per consumer warp.
  if (threadIdx.x == 0) {
    for (int i = 0; i < C::kStages; ++i) {
      mbarrier_init(&full[i], 1 + 32);
      mbarrier_init(&empty[i], 8);
    }
    fence_barrier_init();
  }
  __syncthreads();

  // (Each role computes the tile walk after its setmaxnreg: values live across it are spilled.)
#define JT_TILE_WALK                                                                                      \
  const sched::PersistentScheduler<C::kGroupM> scheduler{(p.m + C::BLOCK_M - 1) / C::BLOCK_M,             \
                                                         (p.n + C::BLOCK_N - 1) / C::BLOCK_N, p.batch};   \
  const int num_tiles = scheduler.num_tiles();                                                            \
  const int k_blocks = (p.k + C::BLOCK_K - 1) / C::BLOCK_K;
  // Shared address of a stage's scales: f32 [SF_BLOCKS][BLOCK_M] of A, then [SF_BLOCKS][BLOCK_N] of B.
  auto stage_scales = [&](int stage) { return smem_addr(smem) + stage * C::STAGE_BYTES + C::DATA_BYTES; };

  if (warpgroup == 0) {
    setmaxnreg_dec<C::LOADER_REGS>();  // the scale loaders (8 loads in flight) need more than the dense producer's 40
    JT_TILE_WALK
    if (warp == 0) {
      // ---------------- TMA producer ----------------
      if (lane == 0) {
        prefetch_tensormap(&tma_a);
        prefetch_tensormap(&tma_b);
        PipelineState<C::kStages> st;
        for (int t = blockIdx.x; t < num_tiles; t += gridDim.x) {
          const sched::TileCoord tc = scheduler.coord(t);
          const int m0 = tc.m_blk * C::BLOCK_M, n0 = tc.n_blk * C::BLOCK_N;
          const int ab = p.a_batched ? tc.batch : 0, bb = p.b_batched ? tc.batch : 0;
          for (int kb = 0; kb < k_blocks; ++kb) {
            mbarrier_wait(&empty[st.stage], st.phase ^ 1u);
            uint8_t* sa = smem + st.stage * C::STAGE_BYTES;
            mbarrier_arrive_expect_tx(&full[st.stage], C::DATA_BYTES);
            tma_load_3d(sa, &tma_a, &full[st.stage], kb * C::BLOCK_K, m0, ab);
            tma_load_3d(sa + C::A_BYTES, &tma_b, &full[st.stage], kb * C::BLOCK_K, n0, bb);
            st.advance();
          }
        }
      }
    } else if (warp - 1 < C::kLoaderWarps) {
      // ---------------- scale loaders: warp w takes k-blocks i with i % kLoaderWarps == w - 1 ----------------
      PipelineState<C::kStages> st;
      const int cols = p.k / 32;  // scale columns of a row
      int i = 0;
      for (int t = blockIdx.x; t < num_tiles; t += gridDim.x) {
        const sched::TileCoord tc = scheduler.coord(t);
        const int64_t m0 = int64_t(tc.m_blk) * C::BLOCK_M, n0 = int64_t(tc.n_blk) * C::BLOCK_N;
        const uint8_t* sfa = p.sfa + (p.a_batched ? tc.batch * p.sfa_batch : 0);
        const uint8_t* sfb = p.sfb + (p.b_batched ? tc.batch * p.sfb_batch : 0);
        for (int kb = 0; kb < k_blocks; ++kb, ++i, st.advance()) {
          if (i % C::kLoaderWarps != warp - 1) continue;
          mbarrier_wait(&empty[st.stage], st.phase ^ 1u);
          const uint32_t dst_a = stage_scales(st.stage), dst_b = dst_a + 4 * C::SFA_FLOATS;
          const int c0 = kb * C::SF_BLOCKS;
          if constexpr (C::BLOCK_N > 128) {
            // Rows in groups of 128 (A's, then B's), 4 quads in flight, not unrolled: the 12 rows' loop
            // invariants of an unrolled walk spill even at 104 registers.
#pragma unroll 1
            for (int g = 0; g < (C::BLOCK_M + C::BLOCK_N) / 128; ++g) {
              const bool is_a = g == 0;
              const uint8_t* base = is_a ? sfa : sfb;
              const int64_t r0 = is_a ? m0 : n0 + 128 * (g - 1), rows = is_a ? p.m : p.n;
              const uint32_t dst = is_a ? dst_a : dst_b + 4 * 128 * (g - 1);
              const int pitch = is_a ? C::BLOCK_M : C::BLOCK_N;
              uint32_t w[4];
#pragma unroll
              for (int j = 0; j < 4; ++j) w[j] = fetch_scale_quad(base, p.sf_layout, cols, r0 + lane + 32 * j, rows, c0);
#pragma unroll
              for (int j = 0; j < 4; ++j)
                store_scale_quad(w[j], r0 + lane + 32 * j < rows, c0, cols, dst + 4 * (lane + 32 * j), pitch);
            }
          } else {
            uint32_t wa[C::BLOCK_M / 32], wb[C::BLOCK_N / 32];
#pragma unroll
            for (int j = 0; j < C::BLOCK_M / 32; ++j) wa[j] = fetch_scale_quad(sfa, p.sf_layout, cols, m0 + lane + 32 * j, p.m, c0);
#pragma unroll
            for (int j = 0; j < C::BLOCK_N / 32; ++j) wb[j] = fetch_scale_quad(sfb, p.sf_layout, cols, n0 + lane + 32 * j, p.n, c0);
#pragma unroll
            for (int j = 0; j < C::BLOCK_M / 32; ++j)
              store_scale_quad(wa[j], m0 + lane + 32 * j < p.m, c0, cols, dst_a + 4 * (lane + 32 * j), C::BLOCK_M);
#pragma unroll
            for (int j = 0; j < C::BLOCK_N / 32; ++j)
              store_scale_quad(wb[j], n0 + lane + 32 * j < p.n, c0, cols, dst_b + 4 * (lane + 32 * j), C::BLOCK_N);
          }
          mbarrier_arrive(&full[st.stage]);  // release: the consumers' wait orders these stores
        }
      }
    }
  } else {
    // ---------------- consumers ----------------
    setmaxnreg_inc<C::CONSUMER_REGS>();  // (ptxas allocates 168 for the kernel)
    JT_TILE_WALK
    const int cw = __shfl_sync(0xffffffffu, warpgroup - 1, 0);
    constexpr int R = C::ACC_REGS;
    float acc[R], part[R];  // the tile accumulator; one 32-K block's product
    PipelineState<C::kStages> st;
    const uint64_t desc_a0 = desc::sm90_smem_desc(smem_addr(smem) + cw * 8192, 16, 1024, desc::Sm90Swizzle::k128B);
    const uint64_t desc_b0 = desc::sm90_smem_desc(smem_addr(smem) + C::A_BYTES, 16, 1024, desc::Sm90Swizzle::k128B);
    const int frag_row = cw * 64 + 16 * (warp % 4) + lane / 4;  // the fragment's first row in the tile
    const int q = lane % 4;
    // kOrdered: this CTA's 32-K blocks, counted across its tiles (the first and last skip a handshake).
    const int64_t my_blocks = int64_t((num_tiles - int(blockIdx.x) + int(gridDim.x) - 1) / int(gridDim.x)) *
                              k_blocks * C::SF_BLOCKS;
    int64_t blk = 0;
    for (int t = blockIdx.x; t < num_tiles; t += gridDim.x) {
      const sched::TileCoord tc = scheduler.coord(t);
#pragma unroll
      for (int i = 0; i < R; ++i) acc[i] = 0.0f;
      if constexpr (C::kWidened)
        consumer_widened<C>(acc, st, full, empty, smem_addr(smem), smem_addr(smem) + C::kStages * C::STAGE_BYTES,
                            k_blocks, cw, threadIdx.x % 128);
      else if constexpr (C::kPipelined)
        consumer_pipelined<C>(acc, st, full, empty, stage_scales(0), desc_a0, desc_b0, k_blocks, frag_row, q, lane);
      else for (int kb = 0; kb < k_blocks; ++kb) {
        mbarrier_wait(&full[st.stage], st.phase);
        const uint32_t stage_off = st.stage * C::STAGE_BYTES;
        const uint32_t sf = stage_scales(st.stage);
        // Per 32-K block: the wgmma into `part` (scale-d 0), then `part` promoted into acc.
#pragma unroll
        for (int ks = 0; ks < C::SF_BLOCKS; ++ks, ++blk) {
          if constexpr (C::kOrdered) {  // my turn: the other warpgroup's previous wgmma has completed
            if (cw == 1 || blk > 0) named_barrier_sync(C::kTurnBarrier + cw, 256);
          }
          fence_operands(part);
          wgmma_fence();
          mma_step<C>(part, desc::sm90_desc_advance(desc_a0, stage_off + ks * 32),
                      desc::sm90_desc_advance(desc_b0, stage_off + ks * 32), 0u);
          wgmma_commit();
          const uint32_t sfa_k = sf + 4 * ks * C::BLOCK_M;
          const uint32_t sfb_k = sf + 4 * (C::SFA_FLOATS + ks * C::BLOCK_N);
          // NOTE: reading one temporary while the next block's wgmma writes another makes ptxas serialise
          // every wgmma (C7514); the other warpgroup's wgmma overlaps instead. (Forming sa * sb while the
          // wgmma runs was measured no faster, docs/PERF.md 17:31.)
          wgmma_wait<0>();
          if constexpr (C::kOrdered) {  // the other warpgroup's turn
            if (cw == 0 || blk + 1 < my_blocks) named_barrier_arrive(C::kTurnBarrier + (cw ^ 1), 256);
          }
          fence_operands(part);
          promote<C::BLOCK_N>(acc, part, sfa_k, sfb_k, frag_row, q);
        }
        __syncwarp();
        if (lane == 0) mbarrier_arrive(&empty[st.stage]);
        st.advance();
      }
      const int row0 = tc.m_blk * C::BLOCK_M + frag_row;
      const int col0 = tc.n_blk * C::BLOCK_N + 2 * q;
      epilogue_store<C>(acc, p, tc.batch, row0, col0);
    }
  }
#undef JT_TILE_WALK
#endif
}

}  // namespace jax_tmem::sm90
