// jax_tmem: the sm_100a/sm_103a dispatcher and the kind::f16 (bf16, f16; any majorness) and kind::tf32
// (K-major) instantiations. Compiled and SASS-checked only: never executed on Blackwell hardware.
#include "sm100_launch.cuh"

namespace jax_tmem {

std::string sm100_gemm_launch(const GemmLaunch& L) {
  using namespace sm100;
  const GemmProblem& p = L.p;
  if (!menu::sm100_valid(p.config))
    return "sm_100a config must be -1 (heuristic), 0 (128x128), 1 (128x256), 4 (256x256 CTA pair) or 8 (128x256, "
           "TMA-store epilogue)";
  if (p.m >= (int64_t(1) << 31) || p.n >= (int64_t(1) << 31) || p.k >= (int64_t(1) << 31))
    return "dimensions must be < 2^31";
  const Tile tile = menu::sm100_choose(p, L.num_sms);
  if (p.a_type == DType::kBF16 && p.b_type == DType::kBF16) return run_majors<Kind::kBF16>(L, tile);
  if (p.a_type == DType::kF16 && p.b_type == DType::kF16) return run_majors<Kind::kF16>(L, tile);
  if (p.a_type == DType::kF32 && p.b_type == DType::kF32) {
    if (p.a_mn_major || p.b_mn_major) return "tf32 operands must be K-major (MN-major tf32 is not built)";
    return run_tile<Kind::kTF32, false, false>(L, tile);
  }
  return run_8bit(L, tile);
}

}  // namespace jax_tmem
