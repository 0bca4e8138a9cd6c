// jax_tmem: the widened schedule of the sm_90a block-scaled (MX) GEMM (BsSchedule::kWidened in
// kernels/sm90_block_scaled.cuh): MXFP8 data widened to bf16 in shared memory with its block scale
// applied, then bf16 wgmma into one f32 accumulator, no per-32 promotion.
//
// Exact: an e4m3 / e5m2 value times a UE8M0 scale has at most 3 significant bits and, unless it is
// below 2^-133 or overflows, is a bf16 number, so bf16 x bf16 products with f32 accumulation compute
// the reference semantics (dequantize to f32, dot) up to the order of the f32 sums.
//
// Why: the promotion schedules are bound by instruction issue (16384 FMUL + FFMA per 32-K block of a
// 128x128 tile); here each element is widened once per CTA instead (6 instructions per pair: cvt e4m3x2
// -> f16x2, two f16 -> f32, two FMUL by the scale, one cvt to bf16x2), (BLOCK_M + BLOCK_N) x 64 elements
// per 64-K unit against 128 x BLOCK_N x 64 MACs of bf16 wgmma. Measured (H100, 2026-11-26, docs/PERF.md):
// 361 / 380 TFLOP/s at 4096^3 / 8192^3, 5-14 % above the promotion schedules and about half the bf16
// rate. What binds is shared memory: per 64-K unit of a 128x256 tile the wgmmas read 80 KB, TMA writes
// 24 KB and the widening reads 24 KB and writes 48 KB, 176 KB in the unit's 1024 tensor-core cycles
// against 128 bytes per clock. (A prototype widening with no conversion instruction, integer bit moves and
// one bf16x2 multiply per pair, ran no faster, so F2FP's 16 lanes per clock are not the limit; its results
// were also wrong and it was dropped undebugged.)
//
// The ring (TMA + scale loaders, as the other schedules) brings 128-K stages of fp8 data; each stage is
// widened in two 64-K units into one of two unit buffers (bf16, K-major, 128B-swizzled: A's 128 rows,
// then B's BLOCK_N rows, 128 bytes = 64 K each). Consumer warpgroup cw widens A's rows [64 cw, 64 cw +
// 64) and B's rows [BLOCK_N / 2 cw, ...) of each unit, one unit ahead of its MMAs (unit u + 1 is widened
// while the MMAs of u run); both warpgroups read all of B, so two named barriers of the 256 consumer
// threads per unit: "the MMAs of u - 1 retired everywhere" (its buffer is refilled next) and "unit u + 1
// is written" (fence.proxy.async first: generic-proxy stores before wgmma's async-proxy reads). A ring
// stage goes back to the producers once both its units are widened, before their MMAs run.
#pragma once

#include <cstdint>

#include "jax_tmem/desc_sm90.h"
#include "jax_tmem/fp8_convert.cuh"
#include "jax_tmem/kernels/sm90_mma.cuh"
#include "jax_tmem/ptx/common.cuh"
#include "jax_tmem/ptx/mbarrier.cuh"
#include "jax_tmem/ptx/wgmma.cuh"

namespace jax_tmem::sm90 {

// 16 fp8 values (one 16-byte chunk of a row) widened into two 16-byte bf16 chunks at `dst0`, `dst1`.
template <DType T>
__device__ __forceinline__ void widen_chunk(const uint4& w, float s, uint32_t dst0, uint32_t dst1) {
  const uint32_t x[4] = {w.x, w.y, w.z, w.w};
  uint32_t o[8];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    o[2 * i] = fp8x2_scaled_to_bf16x2<T>(x[i], s);
    o[2 * i + 1] = fp8x2_scaled_to_bf16x2<T>(x[i] >> 16, s);
  }
  ptx::sts_v4_u32(dst0, o[0], o[1], o[2], o[3]);
  ptx::sts_v4_u32(dst1, o[4], o[5], o[6], o[7]);
}

// Unit `half` (K [64 half, 64 half + 64) of the stage) of warpgroup cw's rows, thread `tid` of 128:
// `stage`: the ring stage (fp8 A: 128 rows x 128 B, then B: BLOCK_N rows, each 128B-swizzled by TMA; f32
// scales [4][128] of A then [4][BLOCK_N] of B at C::DATA_BYTES); `dst`: the unit buffer (bf16 A rows, then B
// rows at 128 x 128 B). A task is one 16-byte fp8 chunk c of a row r; consecutive threads take
// consecutive rows, so each quarter warp's 16-byte loads and stores hit 8 distinct bank groups.
template <class C>
__device__ __forceinline__ void widen_unit(uint32_t stage, uint32_t dst, int half, int cw, int tid) {
  constexpr int kATasks = 64 * 4 / 128, kBRows = C::BLOCK_N / 2, kBTasks = kBRows * 4 / 128;
  const uint32_t sfa = stage + C::DATA_BYTES, sfb = sfa + 4 * C::SFA_FLOATS;
  uint4 wa[kATasks], wb[kBTasks];
  float sa[kATasks], sb[kBTasks];
#pragma unroll
  for (int i = 0; i < kATasks; ++i) {  // all loads first: in flight together
    const int task = i * 128 + tid, r = 64 * cw + task % 64, c = 4 * half + task / 64;
    wa[i] = ptx::lds_v4(stage + r * 128 + ((c ^ (r & 7)) << 4));
    sa[i] = ptx::lds_f32(sfa + 4 * ((c >> 1) * C::BLOCK_M + r));
  }
#pragma unroll
  for (int i = 0; i < kBTasks; ++i) {
    const int task = i * 128 + tid, r = kBRows * cw + task % kBRows, c = 4 * half + task / kBRows;
    wb[i] = ptx::lds_v4(stage + C::A_BYTES + r * 128 + ((c ^ (r & 7)) << 4));
    sb[i] = ptx::lds_f32(sfb + 4 * ((c >> 1) * C::BLOCK_N + r));
  }
#pragma unroll
  for (int i = 0; i < kATasks; ++i) {
    const int task = i * 128 + tid, r = 64 * cw + task % 64, j = 2 * (task / 64);  // bf16 chunks j, j + 1
    const uint32_t row = dst + r * 128;
    widen_chunk<C::kA>(wa[i], sa[i], row + ((j ^ (r & 7)) << 4), row + (((j + 1) ^ (r & 7)) << 4));
  }
#pragma unroll
  for (int i = 0; i < kBTasks; ++i) {
    const int task = i * 128 + tid, r = kBRows * cw + task % kBRows, j = 2 * (task / kBRows);
    const uint32_t row = dst + C::BLOCK_M * 128 + r * 128;
    widen_chunk<C::kB>(wb[i], sb[i], row + ((j ^ (r & 7)) << 4), row + (((j + 1) ^ (r & 7)) << 4));
  }
}

// One tile of a kWidened consumer warpgroup (cw, thread tid of 128): every unit's MMAs (4 bf16 wgmma
// m64 x BLOCK_N x 16, the first with scale-d 0) into acc, the next unit widened under them. On return
// every MMA of the tile has retired (wait 0) and `st` is past the tile's last ring stage.
template <class C, class St>
__device__ __forceinline__ void consumer_widened(float (&acc)[C::ACC_REGS], St& st, uint64_t* full, uint64_t* empty,
                                                 uint32_t smem0, uint32_t wide0, int k_blocks, int cw, int tid) {
  using namespace jax_tmem::ptx;
  using W = typename C::WideMma;
  const uint64_t desc_a0 = desc::sm90_smem_desc(wide0 + cw * 8192, 16, 1024, desc::Sm90Swizzle::k128B);
  const uint64_t desc_b0 = desc::sm90_smem_desc(wide0 + C::BLOCK_M * 128, 16, 1024, desc::Sm90Swizzle::k128B);
  const auto stage_addr = [&]() { return smem0 + st.stage * C::STAGE_BYTES; };
  const int units = 2 * k_blocks;
  if (units == 0) return;  // K = 0: acc stays 0 (both warpgroups return: no barrier is left waiting)
  // Unit 0 goes into buffer 0, which the previous tile's MMAs of its unit units - 2 read: every consumer
  // thread has waited for its own (wait 0 before its epilogue); this barrier makes that everyone's.
  named_barrier_sync(C::kWideBarrier, 256);
  mbarrier_wait(&full[st.stage], st.phase);
  widen_unit<C>(stage_addr(), wide0, 0, cw, tid);
  fence_proxy_async_shared();
  named_barrier_sync(C::kWideBarrier, 256);
  for (int u = 0; u < units; ++u) {
    const uint32_t buf = (u & 1) * C::WIDE_UNIT_BYTES;
    fence_operands(acc);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
      mma_step<W, C::BLOCK_N>(acc, desc::sm90_desc_advance(desc_a0, buf + ks * 32),
                              desc::sm90_desc_advance(desc_b0, buf + ks * 32), (u > 0 || ks > 0) ? 1u : 0u);
    wgmma_commit();
    fence_operands(acc);
    if (u + 1 == units) break;
    wgmma_wait<1>();  // this warpgroup's MMAs of unit u - 1 have retired
    fence_operands(acc);
    named_barrier_sync(C::kWideBarrier, 256);  // ... and the other's: buffer (u + 1) & 1 is free
    const int next_half = (u + 1) & 1;
    if (next_half == 0) {  // a new ring stage
      st.advance();
      mbarrier_wait(&full[st.stage], st.phase);
    }
    widen_unit<C>(stage_addr(), wide0 + next_half * C::WIDE_UNIT_BYTES, next_half, cw, tid);
    if (next_half == 1) {  // both units of the stage widened by this warp: its arrive on empty
      __syncwarp();
      if (tid % 32 == 0) mbarrier_arrive(&empty[st.stage]);
    }
    fence_proxy_async_shared();
    named_barrier_sync(C::kWideBarrier, 256);  // unit u + 1 is in its buffer
  }
  st.advance();
  wgmma_wait<0>();
  fence_operands(acc);
}

}  // namespace jax_tmem::sm90
