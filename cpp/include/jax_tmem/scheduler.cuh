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

}  // namespace jax_tmem::sched
