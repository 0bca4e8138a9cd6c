// jax_tmem: the persistent tile scheduler shared by the sm_90a and sm_100a kernels.
//
// A persistent grid of min(#SMs, #tiles) CTAs walks the tiles t = blockIdx.x, blockIdx.x + gridDim.x,
// ... Every role of a CTA (TMA producer, MMA issuer, epilogue) walks the same sequence, so their
// pipeline stages line up without communication. Tiles are ordered batch-major, and inside a batch
// in bands of kGroupM tile-rows walked column by column, so the CTAs that run at the same time share
// A rows and B columns in L2 (the usual grouped/"swizzled" rasterisation).
#pragma once

#include <cstdint>

// Host and device code (the host tests call TailSplit through the extension, compiled without nvcc).
#if defined(__CUDACC__)
#define JT_SCHED_HD __host__ __device__
#else
#define JT_SCHED_HD inline
#endif

namespace jax_tmem::sched {

struct TileCoord {
  int batch, m_blk, n_blk;
};

template <int kGroupM>
struct PersistentScheduler {
  int tiles_m, tiles_n, batch;

  JT_SCHED_HD int num_tiles() const { return batch * tiles_m * tiles_n; }

  JT_SCHED_HD TileCoord coord(int t) const {
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

  JT_SCHED_HD WorkUnits(int num_tiles, int k_blocks_, int splits_)
      : k_blocks(k_blocks_), splits(splits_), num_units(num_tiles * splits_) {}
  JT_SCHED_HD int tile(int u) const { return u / splits; }
  JT_SCHED_HD int split(int u) const { return u - (u / splits) * splits; }
  JT_SCHED_HD void k_range(int split, int& kb0, int& kb1) const {
    kb0 = static_cast<int>(static_cast<int64_t>(split) * k_blocks / splits);
    kb1 = static_cast<int>(static_cast<int64_t>(split + 1) * k_blocks / splits);
  }
};

// The work of a dense kernel whose last, partial wave is shared out along K (stream-K over the last
// wave; sm_90a cooperative entries, as planned by menu.h: see menu::tail_ws_floats). With `grid` CTAs and
// num_tiles = waves x grid + tail, the first dp_tiles = num_tiles - tail tiles run whole, CTA c taking
// c, c + grid, ...; then the tail's tail x k_blocks k-blocks, in tile order, are dealt evenly to CTAs
// 0..ctas-1 (the launcher's tail: the partial wave's tiles, ctas > those, so each CTA's share is under
// one tile and touches at most two: the end of one, then the start of the next; or that plus whole waves
// (menu::tail_share), each share then over a tile: the end of one, whole tiles, the start of another).
// A tile's piece that starts at k-block 0 is its owner's: after its own MMAs it waits for
// the later pieces (other CTAs' f32 partial sums, each CTA's one partial piece in its own workspace
// slot), adds them in CTA order (bitwise repeatable) and stores the tile. A CTA's partial piece comes
// before its owned one and never waits, and all CTAs are resident (a persistent grid), so every wait
// ends. ctas = 0: no tail, every tile runs whole.
struct TailSplit {
  int dp_tiles, tail, ctas, k_blocks, grid;

  JT_SCHED_HD TailSplit(int num_tiles, int tail_, int ctas_, int k_blocks_, int grid_)
      : dp_tiles(num_tiles - (ctas_ > 0 ? tail_ : 0)), tail(ctas_ > 0 ? tail_ : 0), ctas(ctas_ > 0 ? ctas_ : 0),
        k_blocks(k_blocks_), grid(grid_) {}
  JT_SCHED_HD bool split_tile(int t) const { return t >= dp_tiles; }
  // CTA c's first k-block of the tail, counted over the tail's tiles in order (c <= ctas).
  JT_SCHED_HD int64_t begin(int c) const { return int64_t(c) * tail * k_blocks / ctas; }
  // How many units (whole tiles, then tail pieces) CTA c runs.
  JT_SCHED_HD int count(int c) const {
    const int whole = c < dp_tiles ? (dp_tiles - c + grid - 1) / grid : 0;
    if (c >= ctas) return whole;
    const int64_t b0 = begin(c), b1 = begin(c + 1);
    return b1 <= b0 ? whole : whole + static_cast<int>((b1 - 1) / k_blocks - b0 / k_blocks) + 1;
  }
  // CTA c's unit i: its tile and k-block range.
  JT_SCHED_HD void unit(int c, int i, int& t, int& kb0, int& kb1) const {
    const int whole = c < dp_tiles ? (dp_tiles - c + grid - 1) / grid : 0;
    if (i < whole) {
      t = c + i * grid, kb0 = 0, kb1 = k_blocks;
      return;
    }
    const int64_t b0 = begin(c), b1 = begin(c + 1);
    const int64_t j = b0 / k_blocks + (i - whole), lo = j * k_blocks, hi = lo + k_blocks;
    t = dp_tiles + static_cast<int>(j);
    kb0 = static_cast<int>((b0 > lo ? b0 : lo) - lo);
    kb1 = static_cast<int>((b1 < hi ? b1 : hi) - lo);
  }
  // The CTA after `c` whose piece of tail tile t (an owner's tile) follows, or -1 past the tile's end.
  JT_SCHED_HD int next_piece(int c, int t) const {
    const int64_t end = int64_t(t - dp_tiles + 1) * k_blocks;
    return c + 1 < ctas && begin(c + 1) < end ? c + 1 : -1;
  }
};

}  // namespace jax_tmem::sched
