// jax_tmem: the TMA-store epilogue machinery shared by the sm_90a and sm_100a kernels. A group of
// threads (a consumer warpgroup on sm_90a, an epilogue warp on sm_100a) finishes a 128-byte-wide
// column chunk of its rows in registers, writes it into a 128B-swizzled shared-memory box, and one
// thread of the group stores the box with a TMA bulk tensor store, which clips rows and columns
// outside the output. Two boxes per group alternate, so writing chunk i+1 overlaps the store of
// chunk i, and the last stores of a tile drain while the next tile's MMAs run.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "jax_tmem/epilogue.cuh"
#include "jax_tmem/ptx/common.cuh"
#include "jax_tmem/ptx/tma.cuh"

namespace jax_tmem::epilogue {

// Byte offset of (row, byte) in a box of 128-byte rows with the 128B swizzle: 16-byte unit u of row r
// lives at unit u ^ (r % 8) (the box must be 1024-byte aligned, as the swizzle reads address bits).
__device__ __forceinline__ uint32_t swizzle128(int row, int byte) {
  return static_cast<uint32_t>(row * 128 + ((((byte >> 4) ^ (row & 7)) << 4) | (byte & 15)));
}

// Two output boxes of kBoxBytes (1024-aligned) used alternately by one group; `count` numbers the
// boxes the group has filled, across tiles. Protocol per chunk, for every thread of the group:
//   ring.wait_free(leader); sync(group); write ring.box(); fence_proxy_async_shared(); sync(group);
//   ring.store(leader, ...);
// Every chunk commits one bulk group (an empty one when the box lies outside the output: PTX ISA,
// cp.async.bulk.commit_group "results in an empty bulk async-group"), so "at most one group still
// reading" always means the other box's store.
template <int kBoxBytes>
struct StoreRing {
  uint8_t* base;
  uint32_t count;

  __device__ __forceinline__ uint8_t* box() const { return base + (count & 1u) * kBoxBytes; }

  __device__ __forceinline__ void wait_free(bool leader) const {
    if (leader && count >= 2) ptx::bulk_wait_group_read<1>();
  }

  __device__ __forceinline__ void store(bool leader, bool in_bounds, const CUtensorMap* map, int c0, int c1, int c2) {
    if (leader) {
      if (in_bounds) ptx::tma_store_3d(map, box(), c0, c1, c2);
      ptx::bulk_commit_group();
    }
    ++count;
  }

  // Before the kernel exits: the output is complete only once every store has been performed.
  __device__ __forceinline__ void drain(bool leader) const {
    if (leader) ptx::bulk_wait_group<0>();
  }
};

// Writes kCols finished values of one row (a thread owns a row: the sm_100a tcgen05.ld 32x32b layout)
// into a swizzled box at row `row`, starting at byte `byte0` of the row, as 16-byte units.
template <int kCols, typename T>
__device__ __forceinline__ void stage_row_swizzled(const float (&v)[kCols], uint8_t* box, int row, int byte0) {
  constexpr int kPerUnit = 16 / sizeof(T);
  static_assert(kCols % kPerUnit == 0, "whole 16-byte units");
#pragma unroll
  for (int j = 0; j < kCols; j += kPerUnit)
    *reinterpret_cast<uint4*>(box + swizzle128(row, byte0 + j * static_cast<int>(sizeof(T)))) = pack_unit<T>(v, j);
}

}  // namespace jax_tmem::epilogue
