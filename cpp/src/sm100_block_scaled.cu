// jax_tmem: host launch of the sm_100a/sm_103a block-scaled (MX) GEMM: the tcgen05 kernel of
// kernels/sm100_gemm.cuh with kSfVec = 32 (kind::mxf8f6f4, scales staged SMEM -> TMEM by tcgen05.cp).
// Both operands K-major 8-bit floats (e4m3 / e5m2, any mix), UE8M0 scales per 32 along K in the 128x4
// layout (jax_tmem.swizzle_scales; Python passes that layout to this arch). Compiled and SASS-checked
// only: NEVER EXECUTED ON A BLACKWELL GPU.
#include <string>

#include "jax_tmem/kernels/sm100_gemm.cuh"
#include "launch_common.cuh"

namespace jax_tmem::sm100 {
namespace {

// 128x128 tiles, 6 stages: double-buffered 128-column accumulators + 8 scale columns per stage fit the
// 512 TMEM columns (a 256-wide tile's two accumulators alone take all 512).
template <DType A, DType B>
std::string run_types(const GemmLaunch& L) {
  using C = Config<A, B, 128, 6, false, false, false, 0, 32>;
  return launch_persistent<C>(sm100_gemm_kernel<C>, L);
}

}  // namespace

std::string sm100_block_scaled_launch(const GemmLaunch& L) {
  const GemmProblem& p = L.p;
  if (p.sf_vec != 32) return "the sm_100a block-scaled kernel takes MX scales (sf_vec 32), got " + std::to_string(p.sf_vec);
  if (p.sf_layout != 1)
    return "the sm_100a block-scaled kernel reads scales in the 128x4 layout (sf_layout 1, jax_tmem.swizzle_scales)";
  if (p.a_mn_major || p.b_mn_major) return "the block-scaled kernels take K-major operands only";
  if (p.config >= 0) return "the sm_100a block-scaled GEMM has no forced configurations (config must be -1)";
  if (std::string why = kernel_legality(p); !why.empty()) return why;
  return dispatch_mx8(p, "sm_100a", [&](auto a, auto b) { return run_types<decltype(a)::value, decltype(b)::value>(L); });
}

}  // namespace jax_tmem::sm100
