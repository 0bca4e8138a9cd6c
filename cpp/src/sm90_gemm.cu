// jax_tmem: the sm_90a dispatcher: the plan from menu.h, then the kernel family of the problem's operand
// types and majorness (run_family, generated from sm90_instances.def; the families are compiled in
// generated translation units, see CMakeLists.txt).
#include "sm90_launch.cuh"

namespace jax_tmem {
namespace sm90 {
#define JT_FAMILY_LIST "sm90_instances.def"
#define JT_FAMILY_ARCH "sm_90a"
#include "family_dispatch.inc"
#undef JT_FAMILY_LIST
#undef JT_FAMILY_ARCH
}  // namespace sm90

std::string sm90_gemm_launch(const GemmLaunch& L) {
  using namespace sm90;
  const GemmProblem& p = L.p;
  if (!menu::sm90_valid(p.config))
    return "sm_90a config must be -1 (heuristic), 0 (128x128), 1 (128x256), 2 (128x64), 3 (128x128 ping-pong), "
           "5 (128x256, staged epilogue), 6 (128x256, 2x1 cluster), 7 (128x128, 2x1 cluster), "
           "8 (128x256, TMA-store epilogue), 9 (128x128, TMA-store epilogue), 10 (128x256, 2x1 cluster, "
           "TMA-store epilogue), 11-13 (swap-AB 128x16/32/64, split-K) or 14 (128x128, split-K)";
  if (p.m >= (int64_t(1) << 31) || p.n >= (int64_t(1) << 31) || p.k >= (int64_t(1) << 31))
    return "dimensions must be < 2^31";
  const menu::Plan plan = menu::sm90_plan(p, L.num_sms, L.ws_count);
  GemmLaunch R = menu::is_swap_ab(plan.config) ? swap_ab(L) : L;
  R.p.splits = plan.splits;
  return run_family(R, static_cast<Tile>(plan.config));
}

}  // namespace jax_tmem
