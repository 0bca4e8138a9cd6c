// jax_tmem: tcgen05 wrappers for sm_100a / sm_103a (PTX ISA 9.0 ch. 9.7.16 "TensorCore 5th Generation
// Family Instructions"). Every function is one PTX instruction; all tcgen05 ops of a kernel must use the
// same cta_group (ptxas rejects mixes), so each takes it as a template parameter.
#pragma once

#include <cstdint>

#include "jax_tmem/ptx/common.cuh"

namespace jax_tmem::ptx {

// ---- TMEM allocation (9.7.16.7.1): one whole warp; writes the TMEM address to shared memory. -------
template <int kCtaGroup>
__device__ __forceinline__ void tmem_alloc(uint32_t* smem_dst, uint32_t ncols) {
  if constexpr (kCtaGroup == 1)
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;" ::"r"(smem_addr(smem_dst)),
                 "r"(ncols) : "memory");
  else
    asm volatile("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%0], %1;" ::"r"(smem_addr(smem_dst)),
                 "r"(ncols) : "memory");
}

template <int kCtaGroup>
__device__ __forceinline__ void tmem_relinquish_alloc_permit() {
  if constexpr (kCtaGroup == 1) asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
  else asm volatile("tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;" ::: "memory");
}

template <int kCtaGroup>
__device__ __forceinline__ void tmem_dealloc(uint32_t taddr, uint32_t ncols) {
  if constexpr (kCtaGroup == 1)
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" ::"r"(taddr), "r"(ncols) : "memory");
  else
    asm volatile("tcgen05.dealloc.cta_group::2.sync.aligned.b32 %0, %1;" ::"r"(taddr), "r"(ncols) : "memory");
}

// ---- ordering around thread synchronisation (9.7.16.6.4) ---------------------------------------
__device__ __forceinline__ void tcgen05_fence_before_thread_sync() {
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
}
__device__ __forceinline__ void tcgen05_fence_after_thread_sync() {
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
}

// ---- MMA (9.7.16.10.9.1): issued by ONE thread. D[tmem] (+)= A[smem desc] x B[smem desc]. ----------
// `accumulate` false overwrites D (first K step of a tile). Kind strings: f16, tf32, f8f6f4, i8.
#define JAX_TMEM_TCGEN05_MMA(NAME, KIND, GROUP)                                                        \
  __device__ __forceinline__ void NAME(uint32_t d_tmem, uint64_t a_desc, uint64_t b_desc, uint32_t idesc, \
                                       uint32_t accumulate) {                                          \
    asm volatile(                                                                                      \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"                                                    \
        "tcgen05.mma.cta_group::" #GROUP ".kind::" #KIND " [%0], %1, %2, %3, p;\n}\n" ::"r"(d_tmem),    \
        "l"(a_desc), "l"(b_desc), "r"(idesc), "r"(accumulate)                                          \
        : "memory");                                                                                   \
  }
JAX_TMEM_TCGEN05_MMA(tcgen05_mma_f16_cg1, f16, 1)
JAX_TMEM_TCGEN05_MMA(tcgen05_mma_tf32_cg1, tf32, 1)
JAX_TMEM_TCGEN05_MMA(tcgen05_mma_f8f6f4_cg1, f8f6f4, 1)
JAX_TMEM_TCGEN05_MMA(tcgen05_mma_i8_cg1, i8, 1)
JAX_TMEM_TCGEN05_MMA(tcgen05_mma_f16_cg2, f16, 2)
JAX_TMEM_TCGEN05_MMA(tcgen05_mma_tf32_cg2, tf32, 2)
JAX_TMEM_TCGEN05_MMA(tcgen05_mma_f8f6f4_cg2, f8f6f4, 2)
#undef JAX_TMEM_TCGEN05_MMA

// Block-scaled MMA, cta_group::1: D (+)= (A x SFA) (B x SFB)^T; SFA / SFB are the TMEM column bases of
// the scale groups (lane 0) and the SF ids in idesc (bits 29-30 A, 4-5 B) pick the part of each 32-bit
// cell the MMA reads [PTX 9.7.16.10.9.1, 9.7.16.10.7]:
//   kind::mxf8f6f4 scale_vec::1X (block32, K = 32): one UE8M0 scale per row, SF id = the byte (0..3);
//   kind::mxf4     scale_vec::2X (block32, K = 64, packed e2m1): two UE8M0 scales, SF id 0 or 2 (half);
//   kind::mxf4nvf4 scale_vec::4X (block16, K = 64, packed e2m1): four UE4M3 scales (NVFP4), SF id 0.
// The cta_group::2 forms (the CTA pair, issued by the leader): each CTA's TMEM receives its own rows, with the
// scales at the same TMEM columns of both CTAs (each CTA's own copy: tcgen05_cp_32x128b_warpx4_cg2).
#define JAX_TMEM_TCGEN05_MMA_BS(fn, kind, vec, group)                                                      \
  __device__ __forceinline__ void fn(uint32_t d_tmem, uint64_t a_desc, uint64_t b_desc, uint32_t idesc,     \
                                     uint32_t sfa_tmem, uint32_t sfb_tmem, uint32_t accumulate) {          \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"                                               \
                 "tcgen05.mma.cta_group::" #group ".kind::" #kind ".block_scale.scale_vec::" #vec          \
                 " [%0], %1, %2, %3, [%4], [%5], p;\n}\n" ::"r"(d_tmem),                                   \
                 "l"(a_desc), "l"(b_desc), "r"(idesc), "r"(sfa_tmem), "r"(sfb_tmem), "r"(accumulate)       \
                 : "memory");                                                                              \
  }
JAX_TMEM_TCGEN05_MMA_BS(tcgen05_mma_mxf8f6f4_cg1, mxf8f6f4, 1X, 1)
JAX_TMEM_TCGEN05_MMA_BS(tcgen05_mma_mxf4_cg1, mxf4, 2X, 1)
JAX_TMEM_TCGEN05_MMA_BS(tcgen05_mma_mxf4nvf4_cg1, mxf4nvf4, 4X, 1)
JAX_TMEM_TCGEN05_MMA_BS(tcgen05_mma_mxf8f6f4_cg2, mxf8f6f4, 1X, 2)
JAX_TMEM_TCGEN05_MMA_BS(tcgen05_mma_mxf4_cg2, mxf4, 2X, 2)
JAX_TMEM_TCGEN05_MMA_BS(tcgen05_mma_mxf4nvf4_cg2, mxf4nvf4, 4X, 2)
#undef JAX_TMEM_TCGEN05_MMA_BS

// ---- SMEM -> TMEM copy (9.7.16.9.2): one thread; asynchronous, ordered before the same thread's later
// tcgen05.mma. 32x128b.warpx4: 32 rows of 16 bytes (the 512-byte scale block of 128 rows x 4 scales)
// into 4 columns of 32 lanes, replicated into all four lane quadrants (reference §9.1). -----------------
__device__ __forceinline__ void tcgen05_cp_32x128b_warpx4_cg1(uint32_t taddr, uint64_t s_desc) {
  asm volatile("tcgen05.cp.cta_group::1.32x128b.warpx4 [%0], %1;" ::"r"(taddr), "l"(s_desc) : "memory");
}
// CTA-pair form, issued by the leader: each CTA of the pair copies the block at this shared-memory offset of
// its own shared memory into its own TMEM (as the pair's MMA reads each CTA's own tiles; DeepGEMM's 2-CTA
// block-scaled GEMM loads each CTA's scales into its own shared memory and copies them this way).
__device__ __forceinline__ void tcgen05_cp_32x128b_warpx4_cg2(uint32_t taddr, uint64_t s_desc) {
  asm volatile("tcgen05.cp.cta_group::2.32x128b.warpx4 [%0], %1;" ::"r"(taddr), "l"(s_desc) : "memory");
}

// ---- commit (9.7.16.11): the mbarrier gets one arrive when all prior async tcgen05 ops OF THIS THREAD
// complete. Implies tcgen05.fence::before_thread_sync. Must be issued by the MMA-issuing thread. --------
__device__ __forceinline__ void tcgen05_commit_cg1(uint64_t* bar) {
  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" ::"r"(smem_addr(bar))
               : "memory");
}
// CTA-pair form: arrives on the barrier at the same shared offset in every CTA of `cta_mask`.
__device__ __forceinline__ void tcgen05_commit_cg2_multicast(uint64_t* bar, uint16_t cta_mask) {
  asm volatile(
      "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%0], %1;" ::"r"(
          smem_addr(bar)),
      "h"(cta_mask)
      : "memory");
}

// ---- TMEM -> registers (9.7.16.8.3): warp-collective. 32x32b.x32: thread t reads lane (quadrant + t),
// 32 consecutive 32-bit columns starting at the address's column. --------------------------------
__device__ __forceinline__ void tmem_ld_32x32b_x32(uint32_t taddr, uint32_t (&r)[32]) {
  asm volatile(
      "tcgen05.ld.sync.aligned.32x32b.x32.b32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, "
      "%15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, [%32];"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7]), "=r"(r[8]),
        "=r"(r[9]), "=r"(r[10]), "=r"(r[11]), "=r"(r[12]), "=r"(r[13]), "=r"(r[14]), "=r"(r[15]), "=r"(r[16]),
        "=r"(r[17]), "=r"(r[18]), "=r"(r[19]), "=r"(r[20]), "=r"(r[21]), "=r"(r[22]), "=r"(r[23]), "=r"(r[24]),
        "=r"(r[25]), "=r"(r[26]), "=r"(r[27]), "=r"(r[28]), "=r"(r[29]), "=r"(r[30]), "=r"(r[31])
      : "r"(taddr));
}

// 32x32b.x16: 16 consecutive columns (the narrow accumulators of the swap-AB decode kernels).
__device__ __forceinline__ void tmem_ld_32x32b_x16(uint32_t taddr, uint32_t (&r)[16]) {
  asm volatile(
      "tcgen05.ld.sync.aligned.32x32b.x16.b32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, "
      "%15}, [%16];"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7]), "=r"(r[8]),
        "=r"(r[9]), "=r"(r[10]), "=r"(r[11]), "=r"(r[12]), "=r"(r[13]), "=r"(r[14]), "=r"(r[15])
      : "r"(taddr));
}

// Blocks until this thread's prior tcgen05.ld have completed (their registers are valid).
__device__ __forceinline__ void tcgen05_wait_ld() { asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory"); }

}  // namespace jax_tmem::ptx
