// jax_tmem: the persistent tile scheduler shared by the sm_90a and sm_100a kernels.
//
// A persistent grid of min(#SMs, #tiles) CTAs walks the tiles t = blockIdx.x, blockIdx.x + gridDim.x,
// ... Every role of a CTA (TMA producer, MMA issuer, epilogue) walks the same sequence, so their
// pipeline stages line up without communication. Tiles are ordered batch-major, and inside a batch
// in bands of kGroupM tile-rows walked column by column, so the CTAs that run at the same time share
// A rows and B columns in L2 (the usual grouped/"swizzled" rasterisation).
#pragma once

#include <cstdint>

namespace jax_tmem::sched {

struct TileCoord {
  int batch, m_blk, n_blk;
};

template <int kGroupM>
struct PersistentScheduler {
  int tiles_m, tiles_n, batch;

  __host__ __device__ int num_tiles() const { return batch * tiles_m * tiles_n; }

  __host__ __device__ TileCoord coord(int t) const {
    const int per_batch = tiles_m * tiles_n;
    const int b = t / per_batch;
    const int r = t - b * per_batch;
    const int group_tiles = kGroupM * tiles_n;
    const int group = r / group_tiles;
    const int first_m = group * kGroupM;
    const int rows = (tiles_m - first_m) < kGroupM ? (tiles_m - first_m) : kGroupM;
    const int in_group = r - group * group_tiles;
    return TileCoord{b, first_m + in_group % rows, in_group / rows};
  }
};

// The work units every kernel walks: (tile, K split) pairs, unit u = tile * splits + split; split s runs
// k-blocks [s * k_blocks / splits, (s + 1) * k_blocks / splits), never empty (the host keeps
// splits <= k_blocks). With splits = 1 a unit is a tile and its whole K. Defined once here for the
// sm_90a and sm_100a kernels (and their split-K / swap-AB variants).
struct WorkUnits {
  int k_blocks, splits, num_units;

  __host__ __device__ WorkUnits(int num_tiles, int k_blocks_, int splits_)
      : k_blocks(k_blocks_), splits(splits_), num_units(num_tiles * splits_) {}
  __host__ __device__ int tile(int u) const { return u / splits; }
  __host__ __device__ int split(int u) const { return u - (u / splits) * splits; }
  __host__ __device__ void k_range(int split, int& kb0, int& kb1) const {
    kb0 = static_cast<int>(static_cast<int64_t>(split) * k_blocks / splits);
    kb1 = static_cast<int>(static_cast<int64_t>(split + 1) * k_blocks / splits);
  }
};

}  // namespace jax_tmem::sched
