// jax_tmem: thread-block-cluster wrappers (PTX ISA "barrier.cluster", "mapa", special registers
// %cluster_ctarank) and the CTA-pair TMA load (cp.async.bulk.tensor ... .cta_group::2, sm_100a).
#pragma once

#include <cstdint>

#include "jax_tmem/ptx/common.cuh"

namespace jax_tmem::ptx {

__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// All threads of all CTAs of the cluster (release/acquire: orders prior shared-memory work).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// The shared::cluster address of the same shared variable in CTA `rank` of the cluster.
__device__ __forceinline__ uint32_t mapa_shared(uint32_t smem_addr_local, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(smem_addr_local), "r"(rank));
  return r;
}

// A float from the shared memory of a CTA in the cluster (address from mapa_shared).
__device__ __forceinline__ float lds_cluster_f32(uint32_t cluster_addr) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(cluster_addr) : "memory");
  return v;
}

// Four floats (16-byte aligned) from the shared memory of a CTA in the cluster (address from mapa_shared).
__device__ __forceinline__ float4 lds_cluster_f32x4(uint32_t cluster_addr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(cluster_addr)
               : "memory");
  return v;
}

// Arrive on an mbarrier of another CTA in the cluster (address from mapa_shared).
__device__ __forceinline__ void mbarrier_arrive_cluster(uint32_t remote_bar) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote_bar) : "memory");
}

// Arrive on a ring-slot barrier of a CTA in the cluster (own or peer), with the default .release.cta
// semantics (CUTLASS ClusterBarrier::arrive). Enough to free a slot once the async-proxy reads of it
// have completed (wgmma.wait_group); the .release.cluster form above costs a MEMBAR.ALL.GPU per arrive,
// which halved the throughput of the sm_90a cluster kernels when used per k-block.
__device__ __forceinline__ void mbarrier_arrive_cluster_cta_scope(uint32_t remote_bar) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote_bar) : "memory");
}

// CTA-pair TMA load: the data lands in this CTA's shared memory, the transaction bytes on the
// LEADER's barrier: the barrier address has the peer bit (bit 24 of the shared::cluster address)
// cleared (CUTLASS Sm100MmaPeerBitMask), so both CTAs' bytes complete one barrier.
__device__ __forceinline__ void tma_load_3d_cg2(void* smem_dst, const void* tmap, uint64_t* local_bar, int32_t c0,
                                                int32_t c1, int32_t c2) {
  const uint32_t leader_bar = smem_addr(local_bar) & 0xFEFFFFFFu;
  asm volatile(
      "cp.async.bulk.tensor.3d.cta_group::2.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(smem_addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(tmap)), "r"(leader_bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

}  // namespace jax_tmem::ptx
