// jax_tmem: the sm_100a/sm_103a dispatcher: the plan from menu.h, then the kernel family of the
// problem's operand types and majorness (run_family, generated from instances.def; the families are
// compiled in generated translation units, see CMakeLists.txt). Compiled and SASS-checked only: never executed on Blackwell.
#include "sm100_launch.cuh"

namespace jax_tmem {
namespace sm100 {
#define JT_FAMILY_SM90 0
#define JT_FAMILY_ARCH "sm_100a/sm_103a"
#include "family_dispatch.inc"
#undef JT_FAMILY_SM90
#undef JT_FAMILY_ARCH
std::string sm100_block_scaled_launch(const GemmLaunch& L);  // sm100_block_scaled.cu
}  // namespace sm100

std::string sm100_gemm_launch(const GemmLaunch& L) {
  using namespace sm100;
  const GemmProblem& p = L.p;
  if (p.sf_vec != 0) return sm100_block_scaled_launch(L);
  if (p.config >= 0 && !menu::kSm100Table.find(p.config))
    return "sm_100a config must be -1 (heuristic) or one of " + menu::kSm100Table.list();
  if (std::string why = kernel_legality(p); !why.empty()) return why;
  if (!menu::sm100_family_runs(L.cc, p.a_type)) return "kind::i8 (int8 x int8) exists on sm_100a only";
  const menu::Plan plan = menu::sm100_plan(p, L.num_sms, L.ws_count);
  const menu::KernelConfig& c = *menu::kSm100Table.find(plan.config);
  if (c.partial() && p.a_type == DType::kS8)
    return "the split-K / swap-AB entries take no int8 (exact s32 sums would be added in f32)";
  GemmLaunch R = c.swap_ab() ? swap_ab(L) : L;
  R.p.splits = plan.splits;
  return run_family(R, c);
}

}  // namespace jax_tmem
