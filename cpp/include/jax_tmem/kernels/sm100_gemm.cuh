// jax_tmem: the sm_100a / sm_103a GEMM kernel (tcgen05 + TMEM). Persistent and warp-specialised, one CTA
// per SM, 256 threads:
//   warp 0       TMA producer: one elected thread loads A/B tiles into a kStages-deep smem ring
//                (full/empty mbarriers, the same ring and scheduler as the sm_90a kernel).
//   warp 1       MMA issuer: one elected thread issues tcgen05.mma (M=128, N=BLOCK_N, K=32 bytes) into a
//                TMEM accumulator, commits each stage's MMAs to that stage's empty barrier (frees the
//                smem slot when they retire) and each tile's MMAs to the tmem_full barrier.
//   warp 2       TMEM allocator: allocates the planned columns, relinquishes the permit, frees at exit.
//   warps 4..7   epilogue warpgroup: warp w reads TMEM lane quadrant w % 4 with tcgen05.ld 32x32b (one
//                thread = one output row), applies the fused epilogue, stores, and signals tmem_empty.
// Two accumulator buffers (tmem_full/tmem_empty ring) let the epilogue of tile i overlap the MMAs of
// tile i+1. NOTHING IN THIS FILE HAS BEEN EXECUTED ON A BLACKWELL GPU: it is compiled and its SASS and
// encoders are checked (tests/test_build.py, tests/test_isa.py); the non-tcgen05 machinery is the
// sm_90a kernel's, which runs on the H200.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "jax_tmem/desc_sm100.h"
#include "jax_tmem/epilogue.cuh"
#include "jax_tmem/epilogue_tma.cuh"
#include "jax_tmem/kernels/sm100_epilogue.cuh"
#include "jax_tmem/pipeline.cuh"
#include "jax_tmem/ptx/mbarrier.cuh"
#include "jax_tmem/ptx/tcgen05.cuh"
#include "jax_tmem/ptx/tma.cuh"
#include "jax_tmem/scheduler.cuh"
#include "jax_tmem/tail_boxes.h"
#include "jax_tmem/tmem_plan.h"

namespace jax_tmem::sm100 {

// The MMA of a kernel is named by its operand types (A, B); the tcgen05 kind and the accumulator follow
// from them: kind::f16 (bf16, f16), kind::tf32 (f32 read as tf32), kind::i8 (int8, exact s32
// accumulator), kind::f8f6f4 (every e4m3/e5m2 mix); f32 accumulators otherwise.
constexpr desc::MmaKind mma_kind(DType a) {
  return a == DType::kF32 ? desc::MmaKind::kTF32
       : (a == DType::kBF16 || a == DType::kF16) ? desc::MmaKind::kF16
       : a == DType::kS8 ? desc::MmaKind::kI8 : desc::MmaKind::kF8F6F4;
}
constexpr desc::DFormat d_format(DType a) { return a == DType::kS8 ? desc::DFormat::kS32 : desc::DFormat::kF32; }

// Instruction descriptor for operands (a, b) (M = 128, cta_group::1), from the same encoder and format
// table that jax_tmem.isa.instr_desc exposes.
constexpr uint32_t kind_idesc(DType a, DType b, int m, int n, bool a_mn, bool b_mn) {
  return desc::sm100_instr_desc(static_cast<uint32_t>(desc::format_code(mma_kind(a), a)),
                                static_cast<uint32_t>(desc::format_code(mma_kind(a), b)), d_format(a),
                                static_cast<uint32_t>(m), static_cast<uint32_t>(n), a_mn, b_mn);
}

// kTmaStore: the epilogue warps store through shared memory with TMA (epilogue_tma.cuh): each warp
// fills a 32-row x 128-byte swizzled box per column chunk (double-buffered) and its lane 0 stores it.
// Menu config 8.
// kPartialOut (1 split-K, 2 swap-AB with split-K; menu configs 11-14, as on sm_90a): work units are
// (tile, K split) pairs and the epilogue writes each unit's f32 accumulator rows to the workspace
// (epilogue_tile_partial); the reduce pass (splitk_reduce.cuh) adds the splits and runs the epilogue.
// kSfVec > 0 (the block-scaled GEMM): 8-bit x UE8M0/32 -> kind::mxf8f6f4 1X (K = 32 per MMA, MXFP8);
// packed e2m1 x UE8M0/32 -> kind::mxf4 2X (K = 64, MXFP4); packed e2m1 x UE4M3/16 -> kind::mxf4nvf4 4X
// (K = 64, NVFP4). A k-block (one 128-byte row: 4 MMAs) needs SF_GROUPS = BLOCK_K / (4 * kSfVec) (1, 2,
// 4) of the 128x4 layout's 512-byte "128 rows x 4 scales" blocks per 128 rows, consecutive there: one
// bulk copy per operand row block. The MMA thread copies them into the stage's own TMEM scale columns
// (tcgen05.cp 32x128b.warpx4: rewritten only after the stage's previous MMAs retired) and issues the
// MMAs; MMA j reads the row's scales from j * UMMA_K / kSfVec: group that / 4, SF id that % 4. In the
// last k-block only the MMAs (and scale groups) inside K are issued (loaded): no stale TMEM enters a
// product. A 4-bit MMA spans 64 of K, so where K % 64 == 32 the last one reads the scales of the 32
// elements past K: TMA zero-fills that data, and its scales are the 128x4 layout's padding, which must be
// finite (zero bytes: swizzle_scales and the quantize kernel write them, scaled_matmul re-swizzles such scales;
// a NaN scale times zero data would make the row's outputs NaN).
//
// What the 1-CTA Config and the CTA pair's Config2Cta share, for an UMMA_M x BLOCK_N MMA: the kind of the
// operand types (block-scaled where kSfVec > 0), the geometry of a 128-byte k-block, the scale blocks a stage
// holds per 128 rows (B's: all BLOCK_N of them) and the instruction descriptor.
template <DType kA_, DType kB_, int UMMA_M_, int BLOCK_N_, bool kAMN_, bool kBMN_, int kSfVec_>
struct MmaShape {
  static constexpr DType kA = kA_, kB = kB_;
  static constexpr bool kAMN = kAMN_, kBMN = kBMN_;
  static constexpr int kSfVec = kSfVec_;
  static constexpr bool kBlockScaled = kSfVec_ != 0;
  static constexpr int ELEM_BITS = dtype_bits(kA);  // 4: packed e2m1 (two per byte, XLA's E(4) layout)
  static constexpr desc::MmaKind kMma = !kBlockScaled ? mma_kind(kA)
                                      : ELEM_BITS == 8 ? desc::MmaKind::kMXF8F6F4
                                      : kSfVec == 16   ? desc::MmaKind::kMXF4NVF4 : desc::MmaKind::kMXF4;
  static constexpr int BLOCK_K = 1024 / ELEM_BITS;  // one 128-byte swizzle row along K
  static constexpr int STAGE_K = BLOCK_K;  // K elements per ring slot (the launcher's K-split bound)
  static constexpr int UMMA_K = 256 / ELEM_BITS;    // K of one tcgen05.mma (always 32 bytes)
  static constexpr int MN_CHUNK = 1024 / ELEM_BITS; // elements of one 128B swizzle atom along M/N (MN-major)
  static constexpr int SF_BLOCK_BYTES = 512;  // 128 rows x 4 UE8M0 scales (reference §9.1, §10)
  static constexpr int SF_GROUPS = kBlockScaled ? BLOCK_K / (4 * kSfVec) : 0;  // scale blocks per 128 rows
  static constexpr int SFB_BLOCKS = kBlockScaled ? BLOCK_N_ / 128 : 0;         // B's 128-row blocks
  static constexpr int SF_BYTES = kBlockScaled ? ((1 + SFB_BLOCKS) * SF_GROUPS * SF_BLOCK_BYTES + 1023) / 1024 * 1024 : 0;
  static constexpr uint32_t IDESC =
      kBlockScaled ? desc::sm100_instr_desc_block_scaled(static_cast<uint32_t>(desc::format_code(kMma, kA)),
                                                         static_cast<uint32_t>(desc::format_code(kMma, kB)), UMMA_M_,
                                                         BLOCK_N_, kAMN, kBMN, kSfVec == 32, 0, 0)
                   : kind_idesc(kA, kB, UMMA_M_, BLOCK_N_, kAMN, kBMN);

  static_assert(desc::mma_shape_error(kMma, UMMA_M_, BLOCK_N_, kAMN, kBMN, ELEM_BITS) == nullptr,
                "illegal tcgen05.mma shape/majorness (see desc::mma_shape_error)");
  static_assert(desc::format_code(kMma, kA) >= 0 && desc::format_code(kMma, kB) >= 0 &&
                    (kBlockScaled || mma_kind(kB) == kMma),
                "operand type not taken by the kind");
  static_assert(!kBlockScaled || ((kSfVec == 32 || (kSfVec == 16 && ELEM_BITS == 4)) &&
                                  (ELEM_BITS == 8 || ELEM_BITS == 4) && dtype_bits(kB) == ELEM_BITS &&
                                  BLOCK_N_ % 128 == 0 && !kAMN && !kBMN && SF_GROUPS * 4 * kSfVec == BLOCK_K),
                "block-scaled: MXFP8 / MXFP4 (32, UE8M0) or NVFP4 (16, UE4M3) K-major operands of one width, "
                "BLOCK_N a multiple of 128");
  static_assert(ELEM_BITS != 4 || kBlockScaled, "4-bit operands: block-scaled kinds only");
};

template <DType kA_, DType kB_, int BLOCK_N_, int kStages_, bool kAMN_, bool kBMN_, bool kTmaStore_ = false,
          int kPartialOut_ = 0, int kSfVec_ = 0>
struct Config : MmaShape<kA_, kB_, 128, BLOCK_N_, kAMN_, kBMN_, kSfVec_> {
  using Shape = MmaShape<kA_, kB_, 128, BLOCK_N_, kAMN_, kBMN_, kSfVec_>;
  using Shape::kA, Shape::kBlockScaled, Shape::BLOCK_K, Shape::SF_BYTES;
  static constexpr int BLOCK_M = 128;
  static constexpr int BLOCK_N = BLOCK_N_;
  static constexpr int BOX_M = BLOCK_M, BOX_N = BLOCK_N;  // rows of A / B one CTA loads per tile
  static constexpr int TILE_M = BLOCK_M, TILE_N = BLOCK_N;  // one scheduler tile
  static constexpr int CLUSTER_M = 1, CLUSTER_N = 1;  // (TailBoxes: no multicast)
  static constexpr bool kATrans = false;  // (TailBoxes: tcgen05 reads MN-major 8-bit A in place)
  static constexpr int kPartialOut = kPartialOut_;
  static constexpr bool kTmaStore = kTmaStore_;
  static constexpr int OUT_BOX_ROWS = 32;  // an epilogue warp's TMEM lane quadrant
  static constexpr int OUT_BOX_BYTES = OUT_BOX_ROWS * 128;
  static constexpr int OUT_BYTES = kTmaStore ? 4 * 2 * OUT_BOX_BYTES : 0;  // 2 boxes per epilogue warp
  static constexpr int CTAS_PER_TILE = 1;
  static constexpr int kStages = kStages_;
  static constexpr int A_BYTES = BLOCK_M * 128;
  static constexpr int B_BYTES = BLOCK_N * 128;
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES + SF_BYTES;
  static constexpr int TX_BYTES = A_BYTES + B_BYTES;  // + the k-block's scale blocks (block-scaled)
  static constexpr int kAccStages = 2;
  // Block-scaled: scale columns per pipeline stage (sf_stages = kStages).
  static constexpr TmemPlan kTmem =
      make_tmem_plan(BLOCK_N, kAccStages, 128, kBlockScaled ? BLOCK_K : 0, Shape::kSfVec, kBlockScaled ? kStages : 0);
  static constexpr uint32_t TMEM_COLS = kTmem.alloc_cols();     // allocated columns (power of two)
  static constexpr uint32_t ACC_STRIDE = kTmem.acc_offset(1);  // columns between accumulator buffers
  // Block-scaled: TMEM columns of stage s's scales: A at SFA_COL0 + s * SFA_COLS, B at SFB_COL0 + s * SFB_COLS.
  static constexpr uint32_t SFA_COL0 = kTmem.sfa_offset(0), SFA_COLS = kTmem.sfa_cols;
  static constexpr uint32_t SFB_COL0 = kTmem.sfb_offset(0), SFB_COLS = kTmem.sfb_cols;
  static constexpr int NUM_THREADS = 256;
  static constexpr int kGroupM = 8;
  static constexpr int SMEM_BYTES = kStages * STAGE_BYTES + OUT_BYTES + 1024 + (2 * kStages + 2 * kAccStages) * 8 + 16;

  static_assert(!kBlockScaled || kPartialOut == 0, "block-scaled: no split-K");
  static_assert(kTmem.valid(), "TMEM plan invalid (see tmem_plan.h)");
  static_assert(!(kA == DType::kF32 && (kAMN_ || kBMN_)), "tf32 MN-major needs the 128B/32B-atom layout (not built)");
  static_assert(SMEM_BYTES <= 232448, "shared memory per CTA exceeds 227 KB");
  static_assert(STAGE_BYTES % 1024 == 0, "128B-swizzle tiles must stay 1024-byte aligned");
  static_assert(kPartialOut == 0 || (!kTmaStore && kA != DType::kS8), "split-K: direct stores, no int8");
  static_assert(BLOCK_N % 32 == 0 || (BLOCK_N == 16 && kPartialOut != 0), "the epilogue reads 32 (or 16) columns");
};

using Params = epilogue::KernelParams;

// Shared-memory descriptor of operand X for K step `ks` of a stage whose tile starts at `base`.
//   K-major : 8-row groups 1024 B apart (SBO), K step = +32 B inside the 128 B swizzle row.
//   MN-major: atoms of MN_CHUNK elements x BLOCK_K rows (BLOCK_K * 128 B each, LBO) stacked along M/N;
//             8-deep K groups 1024 B apart (SBO); K step = UMMA_K rows x 128 B.
template <class C, bool kMN>
__device__ __forceinline__ uint64_t operand_desc(uint32_t base, int ks) {
  constexpr uint32_t kAtomBytes = C::BLOCK_K * 128;
  const uint32_t start = base + (kMN ? ks * C::UMMA_K * 128 : ks * 32);
  return desc::sm100_smem_desc(start, kMN ? kAtomBytes : 16, 1024, desc::Sm100Layout::k128B);
}

// The shared-memory descriptor of a 512-byte scale block: 32 rows of 16 bytes, no swizzle, 8-row groups
// 128 bytes apart (SBO; LBO unused) (reference §9.1, DeepGEMM make_sf_desc).
__device__ __forceinline__ uint64_t sf_desc(uint32_t base) {
  return desc::sm100_smem_desc(base, 0, 128, desc::Sm100Layout::kNone);
}

// The scale blocks per 128 rows k-block `kb` needs: SF_GROUPS, fewer in a last k-block that ends early.
template <class C>
__device__ __forceinline__ int kblock_sf_groups(const Params& p, int kb) {
  return min(C::SF_GROUPS, p.sf_col_blocks - kb * C::SF_GROUPS);
}

// The bytes load_scale_blocks moves for k-block `kb` (its barrier's expect_tx).
template <class C>
__device__ __forceinline__ uint32_t scale_tx_bytes(const Params& p, int kb, bool with_a) {
  return (C::SFB_BLOCKS + (with_a ? 1 : 0)) * kblock_sf_groups<C>(p, kb) * C::SF_BLOCK_BYTES;
}

// One CTA's scale blocks of k-block `kb` into its stage at `sf` (A's SF_GROUPS blocks, then B's per 128-row
// block), on `bar`: the 128x4 layout's row block a_blk of A (none where !with_a) and SFB_BLOCKS row blocks of B
// from b_blk0; blocks (row block, kb * SF_GROUPS + g), g < the groups inside K, consecutive in memory: one bulk
// copy per row block.
template <class C>
__device__ __forceinline__ void load_scale_blocks(const Params& p, int batch, int64_t a_blk, bool with_a,
                                                  int64_t b_blk0, int kb, uint8_t* sf, uint64_t* bar) {
  using namespace jax_tmem::ptx;
  const int bytes = kblock_sf_groups<C>(p, kb) * C::SF_BLOCK_BYTES;
  const int64_t col = int64_t(kb) * C::SF_GROUPS;
  const uint8_t* ga = p.sfa + (p.a_batched ? batch * p.sfa_batch : 0);
  const uint8_t* gb = p.sfb + (p.b_batched ? batch * p.sfb_batch : 0);
  if (with_a) bulk_load_g2s(sf, ga + (a_blk * p.sf_col_blocks + col) * C::SF_BLOCK_BYTES, bytes, bar);
#pragma unroll
  for (int j = 0; j < C::SFB_BLOCKS; ++j)
    bulk_load_g2s(sf + (1 + j) * C::SF_GROUPS * C::SF_BLOCK_BYTES,
                  gb + ((b_blk0 + j) * p.sf_col_blocks + col) * C::SF_BLOCK_BYTES, bytes, bar);
}

// One k-block of the block-scaled GEMM: its `groups` scale blocks per 128 rows SMEM -> the stage's TMEM
// columns (A group g at sfa + 4g; B row block j of group g at sfb + 4 * (g * SFB_BLOCKS + j): the MMA
// reads a 128 * SFB_BLOCKS-row operand's scales from consecutive 4-column blocks), then the k-block's
// first `mmas` MMAs (Config's comment: group and SF id per MMA). C::CTAS_PER_TILE 2 (Config2Cta): the
// cta_group::2 forms, issued by the pair's leader (each CTA's own scales into its own TMEM).
template <class C>
__device__ __forceinline__ void issue_block_scaled_kblock(uint32_t d_tmem, uint32_t a_base, uint32_t b_base,
                                                          uint32_t sf_base, uint32_t sfa_tmem, uint32_t sfb_tmem,
                                                          int groups, int mmas, bool accumulate_first) {
  using namespace jax_tmem::ptx;
#pragma unroll
  for (int g = 0; g < C::SF_GROUPS; ++g) {
    if (g >= groups) break;
    const auto cp = [](uint32_t taddr, uint64_t desc) {
      if constexpr (C::CTAS_PER_TILE == 2) tcgen05_cp_32x128b_warpx4_cg2(taddr, desc);
      else tcgen05_cp_32x128b_warpx4_cg1(taddr, desc);
    };
    cp(sfa_tmem + 4 * g, sf_desc(sf_base + g * C::SF_BLOCK_BYTES));
#pragma unroll
    for (int j = 0; j < C::SFB_BLOCKS; ++j)
      cp(sfb_tmem + 4 * (g * C::SFB_BLOCKS + j), sf_desc(sf_base + ((1 + j) * C::SF_GROUPS + g) * C::SF_BLOCK_BYTES));
  }
#pragma unroll
  for (int ks = 0; ks < C::BLOCK_K / C::UMMA_K; ++ks) {
    if (ks >= mmas) break;
    constexpr int kScalesPerMma = C::UMMA_K / C::kSfVec;  // 1 (mxf8f6f4), 2 (mxf4), 4 (mxf4nvf4)
    const uint32_t g = (ks * kScalesPerMma) / 4, id = (ks * kScalesPerMma) % 4;
    const uint32_t idesc = C::IDESC | (id << 29) | (id << 4);
    const uint32_t sfa = sfa_tmem + 4 * g, sfb = sfb_tmem + 4 * g * C::SFB_BLOCKS;
    const uint64_t da = operand_desc<C, false>(a_base, ks), db = operand_desc<C, false>(b_base, ks);
    const uint32_t acc = (accumulate_first || ks > 0) ? 1u : 0u;
    if constexpr (C::CTAS_PER_TILE == 2) {
      if constexpr (C::kMma == desc::MmaKind::kMXF8F6F4) tcgen05_mma_mxf8f6f4_cg2(d_tmem, da, db, idesc, sfa, sfb, acc);
      else if constexpr (C::kMma == desc::MmaKind::kMXF4) tcgen05_mma_mxf4_cg2(d_tmem, da, db, idesc, sfa, sfb, acc);
      else tcgen05_mma_mxf4nvf4_cg2(d_tmem, da, db, idesc, sfa, sfb, acc);
    } else {
      if constexpr (C::kMma == desc::MmaKind::kMXF8F6F4) tcgen05_mma_mxf8f6f4_cg1(d_tmem, da, db, idesc, sfa, sfb, acc);
      else if constexpr (C::kMma == desc::MmaKind::kMXF4) tcgen05_mma_mxf4_cg1(d_tmem, da, db, idesc, sfa, sfb, acc);
      else tcgen05_mma_mxf4nvf4_cg1(d_tmem, da, db, idesc, sfa, sfb, acc);
    }
  }
}

template <class C>
__device__ __forceinline__ void issue_mma(uint32_t d_tmem, uint64_t da, uint64_t db, uint32_t accumulate) {
  using namespace jax_tmem::ptx;
  if constexpr (C::kMma == desc::MmaKind::kF16) tcgen05_mma_f16_cg1(d_tmem, da, db, C::IDESC, accumulate);
  else if constexpr (C::kMma == desc::MmaKind::kTF32) tcgen05_mma_tf32_cg1(d_tmem, da, db, C::IDESC, accumulate);
  else if constexpr (C::kMma == desc::MmaKind::kI8) {
#if defined(__CUDA_ARCH_FEAT_SM103_ALL)
    __trap();  // NOTE: kind::i8 does not exist on sm_103a; the host never launches this kernel there
#else
    tcgen05_mma_i8_cg1(d_tmem, da, db, C::IDESC, accumulate);
#endif
  } else tcgen05_mma_f8f6f4_cg1(d_tmem, da, db, C::IDESC, accumulate);
}

enum WarpRole : int { kTmaWarp = 0, kMmaWarp = 1, kTmemWarp = 2, kFirstEpilogueWarp = 4 };

// Loads this CTA's A (BOX_M rows) and B (BOX_N rows) boxes of one k-block into a stage, with `load`
// = ptx::tma_load_3d (1-CTA) or ptx::tma_load_3d_cg2 (CTA pair). K-major: one BLOCK_K x rows box.
// MN-major: MN_CHUNK x BLOCK_K boxes of BLOCK_K * 128 bytes stacked along M/N.
template <class C, typename Load>
__device__ __forceinline__ void load_stage(Load load, uint8_t* sa, uint8_t* sb, const CUtensorMap* tma_a,
                                           const CUtensorMap* tma_b, uint64_t* bar, int m0, int n0, int k0, int ab,
                                           int bb) {
  if constexpr (C::kAMN) {
#pragma unroll
    for (int j = 0; j < C::BOX_M / C::MN_CHUNK; ++j) load(sa + j * C::BLOCK_K * 128, tma_a, bar, m0 + C::MN_CHUNK * j, k0, ab);
  } else {
    load(sa, tma_a, bar, k0, m0, ab);
  }
  if constexpr (C::kBMN) {
#pragma unroll
    for (int j = 0; j < C::BOX_N / C::MN_CHUNK; ++j) load(sb + j * C::BLOCK_K * 128, tma_b, bar, n0 + C::MN_CHUNK * j, k0, bb);
  } else {
    load(sb, tma_b, bar, k0, n0, bb);
  }
}

template <class C>
__global__ void __launch_bounds__(C::NUM_THREADS, 1)
    sm100_gemm_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                      const __grid_constant__ CUtensorMap tma_out, const __grid_constant__ CUtensorMap tma_a_tail,
                      const __grid_constant__ CUtensorMap tma_b_tail, const Params p) {
#if defined(__CUDA_ARCH__) && (defined(__CUDA_ARCH_FEAT_SM100_ALL) || defined(__CUDA_ARCH_FEAT_SM103_ALL))
  using namespace jax_tmem::ptx;
  uint8_t* smem = aligned_dynamic_smem();
  uint8_t* out_bufs = smem + C::kStages * C::STAGE_BYTES;  // kTmaStore only (OUT_BYTES, 1024-aligned)
  uint64_t* full = reinterpret_cast<uint64_t*>(out_bufs + C::OUT_BYTES);
  uint64_t* empty = full + C::kStages;
  uint64_t* tmem_full = empty + C::kStages;
  uint64_t* tmem_empty = tmem_full + C::kAccStages;
  uint32_t* tmem_slot = reinterpret_cast<uint32_t*>(tmem_empty + C::kAccStages);

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;

  if (threadIdx.x == 0) {
    for (int s = 0; s < C::kStages; ++s) {
      mbarrier_init(&full[s], 1);   // producer's arrive.expect_tx + TMA bytes
      mbarrier_init(&empty[s], 1);  // one tcgen05.commit from the MMA thread
    }
    for (int s = 0; s < C::kAccStages; ++s) {
      mbarrier_init(&tmem_full[s], 1);   // one tcgen05.commit after the tile's last MMA
      mbarrier_init(&tmem_empty[s], 4);  // one arrive per epilogue warp
    }
    fence_barrier_init();
  }
  if (warp == kTmemWarp) {
    // One whole warp allocates (the address lands in smem), then gives up the permit so another CTA
    // may allocate on this SM once we free.
    tmem_alloc<1>(tmem_slot, C::TMEM_COLS);
    tmem_relinquish_alloc_permit<1>();
    tcgen05_fence_before_thread_sync();
  }
  __syncthreads();
  tcgen05_fence_after_thread_sync();
  const uint32_t tmem_base = *tmem_slot;

  const sched::PersistentScheduler<C::kGroupM> scheduler{(p.m + C::BLOCK_M - 1) / C::BLOCK_M,
                                                         (p.n + C::BLOCK_N - 1) / C::BLOCK_N, p.batch};
  const int num_tiles = scheduler.num_tiles();
  const int k_blocks = (p.k + C::BLOCK_K - 1) / C::BLOCK_K;
  // Work units (tile, K split): sched::WorkUnits, shared with the sm_90a kernel.
  const sched::WorkUnits work(num_tiles, k_blocks, C::kPartialOut ? p.splits : 1);
  const int splits = work.splits, num_units = work.num_units;
  // Split-K: the reduce pass may be launched now (its CTAs wait for this grid to complete).
  if constexpr (C::kPartialOut != 0) griddep_launch_dependents();

  if (warp == kTmaWarp) {
    // ---------------- TMA producer (the sm_90a kernel's loop) ----------------
    if (elect_one()) {
      prefetch_tensormap(&tma_a);
      prefetch_tensormap(&tma_b);
      // A K-major operand's last row block, where M (N) ends inside it, comes through a tail map whose box holds
      // just its rows, rounded up to 8 (TailBoxes, as the sm_90a kernel: mostly out-of-bounds boxes cost time per
      // row there); the slot's other rows keep stale data, which reaches only accumulator rows / columns past M / N.
      const TailBoxes<C> tails(p);
      if (tails.a_rows) prefetch_tensormap(&tma_a_tail);
      if (tails.b_rows) prefetch_tensormap(&tma_b_tail);
      PipelineState<C::kStages> st;
      for (int u = blockIdx.x; u < num_units; u += gridDim.x) {
        const int t = u / splits;
        int kb0, kb1;
        work.k_range(u - t * splits, kb0, kb1);
        const sched::TileCoord tc = scheduler.coord(t);
        const int m0 = tc.m_blk * C::BLOCK_M, n0 = tc.n_blk * C::BLOCK_N;
        const int ab = p.a_batched ? tc.batch : 0, bb = p.b_batched ? tc.batch : 0;
        const bool a_tail = tails.a_rows && m0 + C::BLOCK_M > p.m, b_tail = tails.b_rows && n0 + C::BLOCK_N > p.n;
        const CUtensorMap* map_a = a_tail ? &tma_a_tail : &tma_a;
        const CUtensorMap* map_b = b_tail ? &tma_b_tail : &tma_b;
        const uint32_t tx_bytes = C::TX_BYTES - (a_tail ? (C::BLOCK_M - tails.a_rows) * 128 : 0) -
                                  (b_tail ? (C::BLOCK_N - tails.b_rows) * 128 : 0);
        for (int kb = kb0; kb < kb1; ++kb) {
          mbarrier_wait(&empty[st.stage], st.phase ^ 1u);
          uint8_t* sa = smem + st.stage * C::STAGE_BYTES;
          uint8_t* sb = sa + C::A_BYTES;
          if constexpr (C::kBlockScaled) {
            mbarrier_arrive_expect_tx(&full[st.stage], tx_bytes + scale_tx_bytes<C>(p, kb, true));
            load_scale_blocks<C>(p, tc.batch, tc.m_blk, true, n0 / 128, kb, sb + C::B_BYTES, &full[st.stage]);
          } else {
            mbarrier_arrive_expect_tx(&full[st.stage], tx_bytes);
          }
          load_stage<C>(tma_load_3d, sa, sb, map_a, map_b, &full[st.stage], m0, n0, kb * C::BLOCK_K, ab, bb);
          st.advance();
        }
      }
    }
    __syncwarp();
  } else if (warp == kMmaWarp) {
    // ---------------- MMA issuer: one thread ----------------
    if (elect_one()) {
      PipelineState<C::kStages> st;
      PipelineState<C::kAccStages> acc;
      for (int u = blockIdx.x; u < num_units; u += gridDim.x) {
        int kb0, kb1;
        work.k_range(u - (u / splits) * splits, kb0, kb1);
        // Wait until the epilogue has drained this accumulator buffer (passes at once the first time).
        mbarrier_wait(&tmem_empty[acc.stage], acc.phase ^ 1u);
        tcgen05_fence_after_thread_sync();
        const uint32_t d_tmem = tmem_base + acc.stage * C::ACC_STRIDE;
        for (int kb = kb0; kb < kb1; ++kb) {
          mbarrier_wait(&full[st.stage], st.phase);
          tcgen05_fence_after_thread_sync();
          const uint32_t a_base = smem_addr(smem + st.stage * C::STAGE_BYTES);
          const uint32_t b_base = a_base + C::A_BYTES;
          if constexpr (C::kBlockScaled) {
            const int mmas = min(C::BLOCK_K / C::UMMA_K, (p.k - kb * C::BLOCK_K + C::UMMA_K - 1) / C::UMMA_K);
            issue_block_scaled_kblock<C>(d_tmem, a_base, b_base, b_base + C::B_BYTES,
                                         tmem_base + C::SFA_COL0 + st.stage * C::SFA_COLS,
                                         tmem_base + C::SFB_COL0 + st.stage * C::SFB_COLS,
                                         kblock_sf_groups<C>(p, kb), mmas, kb > kb0);
          } else {
#pragma unroll
            for (int ks = 0; ks < C::BLOCK_K / C::UMMA_K; ++ks)
              issue_mma<C>(d_tmem, operand_desc<C, C::kAMN>(a_base, ks), operand_desc<C, C::kBMN>(b_base, ks),
                           (kb > kb0 || ks > 0) ? 1u : 0u);
          }
          // NOTE: commit tracks every prior MMA of this thread; it frees the slot once they retire.
          tcgen05_commit_cg1(&empty[st.stage]);
          st.advance();
        }
        tcgen05_commit_cg1(&tmem_full[acc.stage]);
        acc.advance();
      }
    }
    __syncwarp();
  } else if (warp >= kFirstEpilogueWarp) {
    // ---------------- epilogue warpgroup: TMEM -> registers -> global ----------------
    const int quadrant = warp % 4;  // NOTE: a warp may only touch TMEM lanes 32 * (warp % 4) + [0, 32)
    PipelineState<C::kAccStages> acc;
    epilogue::StoreRing<C::OUT_BOX_BYTES> ring{out_bufs + quadrant * 2 * C::OUT_BOX_BYTES, 0u};  // kTmaStore
    for (int u = blockIdx.x; u < num_units; u += gridDim.x) {
      const int t = u / splits;
      const sched::TileCoord tc = scheduler.coord(t);
      mbarrier_wait(&tmem_full[acc.stage], acc.phase);
      tcgen05_fence_after_thread_sync();
      const int row = tc.m_blk * C::BLOCK_M + quadrant * 32 + lane;
      const int64_t row_index = static_cast<int64_t>(tc.batch) * p.m + row;
      const uint32_t taddr = tmem_base + acc.stage * C::ACC_STRIDE + (static_cast<uint32_t>(quadrant * 32) << 16);
      if constexpr (C::kPartialOut != 0)
        epilogue_tile_partial<C>(taddr, row, tc.batch, u - t * splits, tc.n_blk, p);
      else if constexpr (C::kTmaStore)
        epilogue_tile_tma<C>(taddr, row, row_index, tc.m_blk * C::BLOCK_M + quadrant * 32, tc.batch, tc.n_blk, p,
                             &tma_out, ring, lane);
      else
        epilogue_tile<C>(taddr, row, row_index, tc.n_blk, p);
      // All TMEM reads of this buffer are complete (wait::ld): hand it back to the MMA warp.
      tcgen05_fence_before_thread_sync();
      __syncwarp();
      if (lane == 0) mbarrier_arrive(&tmem_empty[acc.stage]);
      acc.advance();
    }
    if constexpr (C::kTmaStore) ring.drain(lane == 0);
  }

  __syncthreads();
  if (warp == kTmemWarp) {
    tcgen05_fence_after_thread_sync();
    tmem_dealloc<1>(tmem_base, C::TMEM_COLS);
  }
#endif
}

}  // namespace jax_tmem::sm100
