// jax_tmem: the sm_90 wgmma shared-memory matrix descriptor (PTX ISA "Matrix Descriptor Format" for
// wgmma). Host and device: the kernels build descriptors with it and jax_tmem.isa.smem_desc(arch="sm90")
// exposes the same function to Python tests.
//
//   bits  0-13  start address >> 4
//   bits 16-29  leading-dimension byte offset (LBO) >> 4
//   bits 32-45  stride-dimension byte offset (SBO) >> 4
//   bits 49-51  matrix base offset (0 when the swizzle pattern starts 1024-byte aligned)
//   bits 62-63  layout: 0 = no swizzle (interleave), 1 = 128B, 2 = 64B, 3 = 32B swizzle
//
// What LBO/SBO mean with a swizzle (in bytes):
//   K-major : SBO = stride between 8-row groups along M/N (8 rows x swizzle width); LBO unused (set 1).
//   MN-major: LBO = stride between swizzle-width chunks along M/N; SBO = stride between 8-row groups
//             along K.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define JT_HD_CONSTEXPR __host__ __device__ constexpr
#else
#define JT_HD_CONSTEXPR constexpr
#endif

namespace jax_tmem::desc {

enum class Sm90Swizzle : uint32_t { kNone = 0, k128B = 1, k64B = 2, k32B = 3 };

JT_HD_CONSTEXPR uint64_t sm90_smem_desc(uint32_t start_addr, uint32_t lbo, uint32_t sbo, Sm90Swizzle swz,
                                        uint32_t base_offset = 0) {
  return (static_cast<uint64_t>((start_addr >> 4) & 0x3fffu)) |
         (static_cast<uint64_t>((lbo >> 4) & 0x3fffu) << 16) |
         (static_cast<uint64_t>((sbo >> 4) & 0x3fffu) << 32) |
         (static_cast<uint64_t>(base_offset & 0x7u) << 49) |
         (static_cast<uint64_t>(static_cast<uint32_t>(swz) & 0x3u) << 62);
}

// Advances a descriptor by `bytes` (a multiple of 16) by adding to its start-address field, the way
// CUTLASS/DeepGEMM step descriptors along K: the kernels build one descriptor per operand outside the
// main loop and add (stage offset + K step) >> 4 per wgmma, instead of re-encoding (and masking) it.
// Valid while the advanced address stays below 2^18 bytes (the 14-bit field cannot carry), which
// every CTA shared-memory window address does (at most 227 KB).
// Only the low word changes (the high word, SBO + swizzle, is a constant the compiler materialises
// once): a 32-bit add the uniform datapath does, where a 64-bit add cost a carry chain per wgmma.
JT_HD_CONSTEXPR uint64_t sm90_desc_advance(uint64_t desc, uint32_t bytes) {
  return (desc & 0xffffffff00000000ull) | static_cast<uint32_t>(static_cast<uint32_t>(desc) + (bytes >> 4));
}

}  // namespace jax_tmem::desc
