// jax_tmem: the sm_90a dispatcher: the plan from menu.h, then the kernel family of the problem's operand
// types and majorness (run_family, generated from instances.def; the families are compiled in
// generated translation units, see CMakeLists.txt).
#include "sm90_launch.cuh"

namespace jax_tmem {
namespace sm90 {
#define JT_FAMILY_SM90 1
#define JT_FAMILY_ARCH "sm_90a"
#include "family_dispatch.inc"
#undef JT_FAMILY_SM90
#undef JT_FAMILY_ARCH
std::string sm90_block_scaled_launch(const GemmLaunch& L);  // sm90_block_scaled.cu
}  // namespace sm90

std::string sm90_gemm_launch(const GemmLaunch& L) {
  using namespace sm90;
  const GemmProblem& p = L.p;
  if (p.sf_vec != 0) return sm90_block_scaled_launch(L);
  if (p.config >= 0 && !menu::kSm90Table.find(p.config))
    return "sm_90a config must be -1 (heuristic) or one of " + menu::kSm90Table.list();
  if (std::string why = kernel_legality(p); !why.empty()) return why;
  const menu::Plan plan = menu::sm90_plan(p, L.num_sms, L.ws_count);
  const menu::KernelConfig& c = *menu::kSm90Table.find(plan.config);
  GemmLaunch R = c.swap_ab() ? swap_ab(L) : L;
  R.p.splits = plan.splits;
  return run_family(R, c);
}

bool sm90_act_grad_in_kernel(const GemmLaunch& L) {
  const GemmProblem& p = L.p;
  if (p.sf_vec != 0 || (p.config >= 0 && !menu::kSm90Table.find(p.config)) || !kernel_legality(p).empty())
    return false;
  const menu::Plan plan = menu::sm90_plan(p, L.num_sms, L.ws_count);
  return menu::act_grad_in_kernel(*menu::kSm90Table.find(plan.config), p);
}

}  // namespace jax_tmem
