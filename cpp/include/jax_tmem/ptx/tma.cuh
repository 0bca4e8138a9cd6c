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

// tma_load_3d, with an L2 evict-first cache policy (createpolicy) where kEvictFirst: for an operand each CTA streams
// once and no other reads, the swap-AB (decode) kernels' weight. Without it the weight's lines push the token tile,
// which every CTA re-reads, out of L2 (H200, 2026-12-02 17:00, docs/PERF.md, 160 tokens: the 8B gate / up on entry 40
// 69.3 -> 64.6 us, the down projection on 48 38.0 -> 36.2, the QKV on 50 22.6 -> 20.6; the same bits; the 8B layer
// at 16-160 tokens 1-4 % faster bf16, 2-8 % e4m3, 18:56). Neutral in the decode / 4-bit kernels
// (docs/wip/decode_evict_first.patch).
template <bool kEvictFirst>
__device__ __forceinline__ void tma_load_3d_stream(void* smem_dst, const void* tmap, uint64_t* bar, int32_t c0,
                                                   int32_t c1, int32_t c2) {
  if constexpr (!kEvictFirst) {
    tma_load_3d(smem_dst, tmap, bar, c0, c1, c2);
  } else {
    asm volatile(
        "{\n.reg .b64 pol;\n"
        "createpolicy.fractional.L2::evict_first.b64 pol, 1.0;\n"
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
        " [%0], [%1, {%3, %4, %5}], [%2], pol;\n}" ::"r"(smem_addr(smem_dst)),
        "l"(reinterpret_cast<uint64_t>(tmap)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2)
        : "memory");
  }
}

// Contiguous bulk copy global -> shared of `bytes` (a multiple of 16, both addresses 16-byte aligned),
// completing them on the mbarrier `bar` (complete_tx). (The block-scale tiles: 512 bytes each.)
__device__ __forceinline__ void bulk_load_g2s(void* smem_dst, const void* gmem_src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_addr(smem_dst)),
               "l"(reinterpret_cast<uint64_t>(gmem_src)), "r"(bytes), "r"(smem_addr(bar))
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
template <bool kEvictFirst>  // (as tma_load_3d_stream's)
__device__ __forceinline__ void tma_load_3d_multicast_stream(void* smem_dst, const void* tmap, uint64_t* bar,
                                                             uint16_t cta_mask, int32_t c0, int32_t c1, int32_t c2) {
  if constexpr (!kEvictFirst) {
    tma_load_3d_multicast(smem_dst, tmap, bar, cta_mask, c0, c1, c2);
  } else {
    asm volatile(
        "{\n.reg .b64 pol;\n"
        "createpolicy.fractional.L2::evict_first.b64 pol, 1.0;\n"
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster.L2::cache_hint"
        " [%0], [%1, {%4, %5, %6}], [%2], %3, pol;\n}" ::"r"(smem_addr(smem_dst)),
        "l"(reinterpret_cast<uint64_t>(tmap)), "r"(smem_addr(bar)), "h"(cta_mask), "r"(c0), "r"(c1), "r"(c2)
        : "memory");
  }
}

// 3-D tile store shared -> global (bulk-group completion). Out-of-bounds elements of the box are not
// written, which is how partial tiles at the M/N edges are clipped.
__device__ __forceinline__ void tma_store_3d(const void* tmap, const void* smem_src, int32_t c0, int32_t c1,
                                             int32_t c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(
          reinterpret_cast<uint64_t>(tmap)),
      "r"(smem_addr(smem_src)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

// Waits until at most N committed bulk groups of this thread are still reading their shared memory.
template <int N>
__device__ __forceinline__ void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

// Waits until at most N committed bulk groups of this thread are incomplete (writes performed).
template <int N>
__device__ __forceinline__ void bulk_wait_group() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}

}  // namespace jax_tmem::ptx
