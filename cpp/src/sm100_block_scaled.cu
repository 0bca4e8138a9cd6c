// jax_tmem: host launch of the sm_100a/sm_103a block-scaled GEMM: the tcgen05 kernel of
// kernels/sm100_gemm.cuh with kSfVec > 0 (scales staged SMEM -> TMEM by tcgen05.cp), both operands K-major,
// scales in the 128x4 layout (jax_tmem.swizzle_scales; Python passes that layout to this arch):
//   MXFP8: 8-bit floats (e4m3 / e5m2, any mix), UE8M0 per 32     -> kind::mxf8f6f4
//   MXFP4: packed e2m1, UE8M0 per 32                             -> kind::mxf4
//   NVFP4: packed e2m1, UE4M3 per 16 (global scales: the `scale` operand, applied in the epilogue)
//                                                                 -> kind::mxf4nvf4
// Large problems run on CTA pairs (cta_group::2, 256x128 tiles; block_scaled_pair).
// Compiled and SASS-checked only: NEVER EXECUTED ON A BLACKWELL GPU.
#include <string>

#include "jax_tmem/kernels/sm100_gemm.cuh"
#include "jax_tmem/kernels/sm100_gemm_2cta.cuh"
#include "launch_common.cuh"

namespace jax_tmem::sm100 {
namespace {

// 128x128 tiles, 6 stages: double-buffered 128-column accumulators + 8 scale columns per stage fit the
// 512 TMEM columns (a 256-wide tile's two accumulators alone take all 512).
// (4-bit: 36 KB stages; the NVFP4 plan: 2 x 128 + 6 x (16 + 16) = 448 columns.)
// Where the 256x128 pair tiles give every pair of SMs one (sm100_choose's rule for the dense pair kernel),
// the CTA pair (kernels/sm100_gemm_2cta.cuh, cta_group::2): each CTA loads half of B's 128 columns and
// the same TMEM plan per CTA. Both chosen by rule, never timed (no Blackwell GPU here).
inline bool block_scaled_pair(const GemmProblem& p, int num_sms) {
  return p.batch * ((p.m + 255) / 256) * ((p.n + 127) / 128) >= num_sms / 2 && p.m > 128;
}

template <DType A, DType B, int kSfVec = 32>
std::string run_types(const GemmLaunch& L) {
  if (block_scaled_pair(L.p, L.num_sms)) {
    using P = Config2Cta<A, B, 128, 6, false, false, false, kSfVec>;
    return launch_persistent<P>(sm100_gemm_2cta_kernel<P>, L);
  }
  using C = Config<A, B, 128, 6, false, false, false, 0, kSfVec>;
  return launch_persistent<C, true>(sm100_gemm_kernel<C>, L);  // with tail maps (TailBoxes)
}

}  // namespace

std::string sm100_block_scaled_launch(const GemmLaunch& L) {
  const GemmProblem& p = L.p;
  if (p.sf_layout != 1)
    return "the sm_100a block-scaled kernel reads scales in the 128x4 layout (sf_layout 1, jax_tmem.swizzle_scales)";
  if (p.a_mn_major || p.b_mn_major) return "the block-scaled kernels take K-major operands only";
  if (p.config >= 0) return "the sm_100a block-scaled GEMM has no forced configurations (config must be -1)";
  if (std::string why = kernel_legality(p); !why.empty()) return why;
  if (p.a_type == DType::kE2M1 && p.b_type == DType::kE2M1) {
    if (p.k % 32) return "the sm_100a 4-bit kernel needs K a multiple of 32 (16-byte TMA rows), got " + std::to_string(p.k);
    if (p.sf_vec == 16) return run_types<DType::kE2M1, DType::kE2M1, 16>(L);
    return run_types<DType::kE2M1, DType::kE2M1, 32>(L);
  }
  if (p.sf_vec != 32) return "the sm_100a block-scaled kernel takes MX scales (sf_vec 32) with 8-bit operands, got " + std::to_string(p.sf_vec);
  return dispatch_mx8(p, "sm_100a", [&](auto a, auto b) { return run_types<decltype(a)::value, decltype(b)::value>(L); });
}

}  // namespace jax_tmem::sm100
