// jax_tmem: the sm_100a/sm_103a dispatcher: the plan from menu.h, then the kernel family of the
// problem's operand types and majorness (run_family, generated from sm100_instances.def; the families are
// compiled in generated translation units, see CMakeLists.txt). Compiled and SASS-checked only: never executed on Blackwell.
#include "sm100_launch.cuh"

namespace jax_tmem {
namespace sm100 {
#define JT_FAMILY_LIST "sm100_instances.def"
#define JT_FAMILY_ARCH "sm_100a/sm_103a"
#include "family_dispatch.inc"
#undef JT_FAMILY_LIST
#undef JT_FAMILY_ARCH
}  // namespace sm100

std::string sm100_gemm_launch(const GemmLaunch& L) {
  using namespace sm100;
  const GemmProblem& p = L.p;
  if (!menu::sm100_valid(p.config))
    return "sm_100a config must be -1 (heuristic), 0 (128x128), 1 (128x256), 4 (256x256 CTA pair), 8 (128x256, "
           "TMA-store epilogue), 9 (CTA pair, TMA-store epilogue), 11-13 (swap-AB 128x16/32/64, split-K) or 14 "
           "(128x128, split-K)";
  if (p.m >= (int64_t(1) << 31) || p.n >= (int64_t(1) << 31) || p.k >= (int64_t(1) << 31))
    return "dimensions must be < 2^31";
  if (!menu::sm100_family_runs(L.cc, p.a_type)) return "kind::i8 (int8 x int8) exists on sm_100a only";
  const menu::Plan plan = menu::sm100_plan(p, L.num_sms, L.ws_count);
  if (menu::is_partial(plan.config) && p.a_type == DType::kS8)
    return "the split-K / swap-AB entries take no int8 (exact s32 sums would be added in f32)";
  GemmLaunch R = menu::is_swap_ab(plan.config) ? swap_ab(L) : L;
  R.p.splits = plan.splits;
  return run_family(R, static_cast<Tile>(plan.config));
}

}  // namespace jax_tmem
