// jax_tmem: sm_100a/sm_103a instantiations for kind::f8f6f4 (e4m3/e5m2 in any mix; A and B each
// K-major or MN-major). Compiled and SASS-checked only: never executed on Blackwell hardware.
#include "sm100_launch.cuh"

namespace jax_tmem::sm100 {

std::string run_fp8(const GemmLaunch& L, int block_n) {
  const DType a = L.p.a_type, b = L.p.b_type;
  if (a == DType::kE4M3 && b == DType::kE4M3) return run_majors<Kind::kE4M3E4M3>(L, block_n);
  if (a == DType::kE4M3 && b == DType::kE5M2) return run_majors<Kind::kE4M3E5M2>(L, block_n);
  if (a == DType::kE5M2 && b == DType::kE4M3) return run_majors<Kind::kE5M2E4M3>(L, block_n);
  if (a == DType::kE5M2 && b == DType::kE5M2) return run_majors<Kind::kE5M2E5M2>(L, block_n);
  return std::string("no sm_100a kernel for ") + dtype_name(a) + " x " + dtype_name(b);
}

}  // namespace jax_tmem::sm100
