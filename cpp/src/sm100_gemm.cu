// jax_tmem: the sm_100a/sm_103a dispatcher and the kind::f16 (bf16, f16; any majorness) and kind::tf32
// (K-major) instantiations. Compiled and SASS-checked only: never executed on Blackwell hardware.
#include "sm100_launch.cuh"

namespace jax_tmem {

std::string sm100_gemm_launch(const GemmLaunch& L) {
  using namespace sm100;
  const GemmProblem& p = L.p;
  if (!menu::sm100_valid(p.config))
    return "sm_100a config must be -1 (heuristic), 0 (128x128), 1 (128x256), 4 (256x256 CTA pair), 8 (128x256, "
           "TMA-store epilogue), 9 (CTA pair, TMA-store epilogue), 11-13 (swap-AB 128x16/32/64, split-K) or 14 "
           "(128x128, split-K)";
  if (p.m >= (int64_t(1) << 31) || p.n >= (int64_t(1) << 31) || p.k >= (int64_t(1) << 31))
    return "dimensions must be < 2^31";
  const menu::Plan plan = menu::sm100_plan(p, L.num_sms, L.ws_count);
  const Tile tile = static_cast<Tile>(plan.config);
  if (menu::is_partial(plan.config) && p.a_type == DType::kS8)
    return "the split-K / swap-AB entries take no int8 (exact s32 sums would be added in f32)";
  GemmLaunch R = menu::is_swap_ab(plan.config) ? swap_ab(L) : L;
  R.p.splits = plan.splits;
  const GemmProblem& q = R.p;
  if (q.a_type == DType::kBF16 && q.b_type == DType::kBF16) return run_majors<Kind::kBF16>(R, tile);
  if (q.a_type == DType::kF16 && q.b_type == DType::kF16) return run_majors<Kind::kF16>(R, tile);
  if (q.a_type == DType::kF32 && q.b_type == DType::kF32) {
    if (q.a_mn_major || q.b_mn_major) return "tf32 operands must be K-major (MN-major tf32 is not built)";
    return run_tile<Kind::kTF32, false, false>(R, tile);
  }
  return run_8bit(R, tile);
}

}  // namespace jax_tmem
