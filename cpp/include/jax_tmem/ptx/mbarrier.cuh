// jax_tmem: mbarrier wrappers (PTX ISA "Parallel Synchronization and Communication Instructions:
// mbarrier"). Phase convention used by every pipeline in jax_tmem (see pipeline.cuh): a waiter passes
// the parity of the phase it waits to see completed; a freshly initialised barrier is in phase 0, so
// waiting on parity 1 returns at once ("the previous phase is complete").
#pragma once

#include <cstdint>

#include "jax_tmem/ptx/common.cuh"

namespace jax_tmem::ptx {

__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

// Makes barrier initialisation visible to the async proxy (TMA) and, with clusters, to peer CTAs.
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// Arrives and adds `bytes` to the transaction count the current phase waits for (TMA completes them).
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ bool mbarrier_try_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(smem_addr(bar)), "r"(parity)
      : "memory");
  return done != 0;
}

// With a suspend-time hint (10 ms, as CUTLASS's ClusterBarrier::wait) ptxas puts a NANOSLEEP.SYNCS (woken by the
// barrier) in the retry path; without one the retry is a TRYWAIT + BRA spin. Built with -DJAX_TMEM_MBARRIER_SUSPEND=ON
// only: with JAX_TMEM_PIN_DESCRIPTORS it took 20-24 % of the 128x256 entry's instructions away and changed neither
// its time nor its clock, single launches or sustained at the power cap (H200, docs/PERF.md 2026-11-28 07:37). The
// loop stays either way.
__device__ __forceinline__ bool mbarrier_try_wait_suspend(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(smem_addr(bar)), "r"(parity), "r"(0x989680u)
      : "memory");
  return done != 0;
}

__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
#if defined(JAX_TMEM_MBARRIER_SUSPEND) && JAX_TMEM_MBARRIER_SUSPEND
  while (!mbarrier_try_wait_suspend(bar, parity)) {
  }
#else
  while (!mbarrier_try_wait(bar, parity)) {
  }
#endif
}

// A TMA ring's barriers, by thread 0, then the CTA meets: `stages` full barriers (the producer's one
// arrive.expect_tx; TMA completes the bytes) and as many empty ones (`consumers` arrivals each).
__device__ __forceinline__ void init_ring(uint64_t* full, uint64_t* empty, int stages, uint32_t consumers) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], consumers);
    }
    fence_barrier_init();
  }
  __syncthreads();
}

}  // namespace jax_tmem::ptx
