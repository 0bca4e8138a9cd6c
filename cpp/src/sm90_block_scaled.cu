// jax_tmem: host launch of the sm_90a block-scaled (MX) GEMM (kernels/sm90_block_scaled.cuh): both operands
// K-major 8-bit floats (e4m3 / e5m2, any mix), UE8M0 scales per 32 along K, plain or 128x4 layout.
#include <string>

#include "jax_tmem/kernels/sm90_block_scaled.cuh"
#include "launch_common.cuh"

namespace jax_tmem::sm90 {
namespace {

// The shared persistent launch (launch_common.cuh): the scales travel in KernelParams.
template <class C>
std::string launch_block_scaled(const GemmLaunch& L) {
  return launch_persistent<C>(sm90_block_scaled_kernel<C>, L);
}

template <DType A, DType B>
std::string run_types(const GemmLaunch& L) {
  const GemmProblem& p = L.p;
  int config = p.config;
  if (config < 0) {  // the widened 128x256 tiles when they fill the SMs, 128x128 when those do, else 128x64
    // (the widened schedule measured 5-14 % above the promotion at 4096^3 and 8192^3, docs/PERF.md 2026-11-26)
    const int64_t tile_rows = p.batch * ((p.m + 127) / 128);
    config = tile_rows * ((p.n + 255) / 256) >= L.num_sms ? 4 : tile_rows * ((p.n + 127) / 128) >= L.num_sms ? 0 : 1;
  }
  switch (config) {  // the table (jax_tmem/sm90_block_scaled_configs.def)
#define JT_SM90_BS_CONFIG(id, bn, st, sched, name) \
  case id: return launch_block_scaled<ScaledConfig<A, B, bn, st, BsSchedule::sched>>(L);
#include "jax_tmem/sm90_block_scaled_configs.def"
#undef JT_SM90_BS_CONFIG
  }
  return "block-scaled config " + std::to_string(config) + " is not in jax_tmem/sm90_block_scaled_configs.def "
         "(jax_tmem.isa.block_scaled_menu lists them)";
}

}  // namespace

std::string sm90_block_scaled_launch(const GemmLaunch& L) {
  const GemmProblem& p = L.p;
  if (p.sf_vec != 32) return "the sm_90a block-scaled kernel takes MX scales (sf_vec 32), got " + std::to_string(p.sf_vec);
  if (p.a_mn_major || p.b_mn_major) return "the sm_90a block-scaled kernel takes K-major operands only";
  if (p.sf_layout == 0 && (p.k / p.sf_vec) % 4)
    return "the sm_90a block-scaled kernel reads plain scales a word per 4 columns: K / 32 must be a multiple of 4 "
           "(pass the scales in the 128x4 layout, jax_tmem.swizzle_scales, as jax_tmem.scaled_matmul does)";
  if (std::string why = kernel_legality(p); !why.empty()) return why;
  return dispatch_mx8(p, "sm_90a", [&](auto a, auto b) { return run_types<decltype(a)::value, decltype(b)::value>(L); });
}

}  // namespace jax_tmem::sm90
