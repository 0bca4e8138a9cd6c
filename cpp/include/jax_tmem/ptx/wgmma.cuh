// jax_tmem: wgmma synchronisation, register reconfiguration and the sm_90 shared-memory matrix
// descriptor. PTX ISA "Asynchronous Warpgroup Level Matrix Instructions" (sm_90a).
#pragma once

#include <cstdint>

#include "jax_tmem/ptx/wgmma_ops.cuh"

namespace jax_tmem::ptx {

// Orders prior register/shared accesses before the following wgmma.mma_async (once per batch).
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
// Waits until at most N committed wgmma groups of this warp are pending.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Keeps the compiler from moving accumulator reads/writes across the async MMA (CUTLASS's
// warpgroup_fence_operand): the registers are "used and redefined" here.
template <int N>
__device__ __forceinline__ void fence_operands(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// For a register-A operand (wgmma's RS form): its registers stay live, unchanged, up to here (a use, not
// a definition: ptxas serializes wgmmas whose input registers are redefined while they may run).
__device__ __forceinline__ void keep_operands_u32(const uint32_t (&a)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) asm volatile("" ::"r"(a[i]) : "memory");
}

template <uint32_t kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegs));
}
template <uint32_t kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegs));
}

}  // namespace jax_tmem::ptx
