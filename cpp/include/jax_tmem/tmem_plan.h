// jax_tmem: the TMEM planner. For a kernel config it lays out the columns of the 128-lane tensor memory:
// the accumulator buffers (double-buffered, so the epilogue of tile i overlaps the MMAs of tile i+1) and
// the scale-factor regions the block-scaled kinds need. One definition, used by the sm_100a kernels
// (constexpr + static_assert) and exposed to Python as jax_tmem.isa.tmem_plan.
//
// Rules (PTX ISA 9.7.16.7.1; reference §2, §9.1, §13.4): TMEM is 128 lanes x 512 columns of 32 bits;
// an allocation is a power of two of columns in [32, 512]; a 128 x N f32 accumulator takes N columns
// (cta_group::1 M=128, or each CTA's half of an M=256 pair); scale factors take 4 columns per 128 rows
// per 4 scale vectors along K; tcgen05.alloc blocks while columns are short, so every CTA that can be
// resident on an SM at once must fit: ctas_per_sm x alloc_cols <= 512, or the SM can deadlock.
#pragma once

#include <cstdint>

namespace jax_tmem {

struct TmemPlan {
  uint32_t acc_cols = 0;    // columns of one accumulator buffer
  uint32_t acc_stages = 0;  // accumulator buffers
  uint32_t sfa_cols = 0;    // scale-factor columns for A per SF stage (0 for dense kinds)
  uint32_t sfb_cols = 0;    // scale-factor columns for B per SF stage
  uint32_t sf_stages = 0;   // scale-factor buffers (one per smem pipeline stage in flight)
  uint32_t ctas_per_sm = 1;
  uint32_t sf_vec = 0;      // scale vector size along K (0 dense, 16 NVFP4, 32 MX)

  constexpr uint32_t acc_offset(uint32_t stage) const { return stage * acc_cols; }
  constexpr uint32_t sfa_offset(uint32_t stage) const { return acc_stages * acc_cols + stage * sfa_cols; }
  constexpr uint32_t sfb_offset(uint32_t stage) const {
    return acc_stages * acc_cols + sf_stages * sfa_cols + stage * sfb_cols;
  }
  constexpr uint64_t used_cols() const {
    return uint64_t(acc_stages) * acc_cols + uint64_t(sf_stages) * (uint64_t(sfa_cols) + sfb_cols);
  }
  constexpr uint32_t alloc_cols() const {
    uint64_t c = 32;
    while (c < used_cols()) c <<= 1;
    return static_cast<uint32_t>(c > 0xffffffffu ? 0xffffffffu : c);
  }
  // nullptr when valid, else the rule that is broken.
  constexpr const char* error() const {
    if (acc_cols == 0 || acc_stages == 0) return "the plan has no accumulator";
    if (sf_vec != 0 && sf_vec != 16 && sf_vec != 32) return "sf_vec must be 0 (dense), 16 (NVFP4) or 32 (MX)";
    if (acc_cols > 512 || acc_stages > 512 || sf_stages > 512 || sfa_cols > 512 || sfb_cols > 512)
      return "columns used exceed the 512 TMEM columns of an SM";
    if (acc_cols % 8 != 0) return "accumulator columns (N) must be a multiple of 8";
    if (used_cols() > 512) return "columns used exceed the 512 TMEM columns of an SM";
    if (ctas_per_sm < 1) return "ctas_per_sm must be >= 1";
    if (ctas_per_sm * alloc_cols() > 512)
      return "ctas_per_sm x allocated columns exceeds 512: co-resident CTAs would block in tcgen05.alloc";
    return nullptr;
  }
  constexpr bool valid() const { return error() == nullptr; }
};

// Scale-factor columns for an mn_tile x k_tile operand tile with one scale per `vec_size` elements
// along K: 4 columns per 128 rows per group of 4 scales (reference §9.1).
constexpr uint32_t sf_cols(uint32_t mn_tile, uint32_t k_tile, uint32_t vec_size) {
  if (vec_size == 0) return 0;
  const uint64_t v = 4ull * vec_size;
  const uint64_t cols = 4ull * ((uint64_t(k_tile) + v - 1) / v) * ((uint64_t(mn_tile) + 127) / 128);
  return cols > 0xffffffffu ? 0xffffffffu : static_cast<uint32_t>(cols);
}

constexpr TmemPlan make_tmem_plan(uint32_t block_n, uint32_t acc_stages, uint32_t block_m = 128, uint32_t k_tile = 0,
                                  uint32_t sf_vec = 0, uint32_t sf_stages = 0, uint32_t ctas_per_sm = 1) {
  TmemPlan p;
  p.acc_cols = block_n;
  p.acc_stages = acc_stages;
  p.sfa_cols = sf_cols(block_m, k_tile, sf_vec);
  p.sfb_cols = sf_cols(block_n, k_tile, sf_vec);
  p.sf_stages = sf_vec ? sf_stages : 0;
  p.ctas_per_sm = ctas_per_sm;
  p.sf_vec = sf_vec;
  return p;
}

}  // namespace jax_tmem
