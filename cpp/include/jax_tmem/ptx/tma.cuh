// jax_tmem: TMA (cp.async.bulk.tensor) wrappers. PTX ISA "Data Movement: cp.async.bulk.tensor".
// The tensor map is a __grid_constant__ kernel parameter; its generic address is passed here.
#pragma once

#include <cstdint>

#include "jax_tmem/ptx/common.cuh"

namespace jax_tmem::ptx {

__device__ __forceinline__ void prefetch_tensormap(const void* tmap) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(tmap)) : "memory");
}

// 3-D tile load global -> shared, completing `bytes` on the mbarrier `bar` (complete_tx).
// Coordinates are element indices {c0 innermost, c1, c2}; out-of-bounds elements are zero-filled.
__device__ __forceinline__ void tma_load_3d(void* smem_dst, const void* tmap, uint64_t* bar, int32_t c0,
                                            int32_t c1, int32_t c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(smem_addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(tmap)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// The same load multicast to every CTA of the cluster in `cta_mask`: the box lands at the same
// shared-memory offset in each, and each destination's mbarrier at `bar`'s offset receives the bytes.
__device__ __forceinline__ void tma_load_3d_multicast(void* smem_dst, const void* tmap, uint64_t* bar, uint16_t cta_mask,
                                                      int32_t c0, int32_t c1, int32_t c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%4, %5, %6}], [%2], %3;" ::"r"(smem_addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(tmap)), "r"(smem_addr(bar)), "h"(cta_mask), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

}  // namespace jax_tmem::ptx
