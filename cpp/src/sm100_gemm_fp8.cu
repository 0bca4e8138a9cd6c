// jax_tmem: sm_100a/sm_103a instantiations for kind::f8f6f4 (e4m3/e5m2 in any mix) and kind::i8
// (int8 x int8 -> s32 accumulator, sm_100a only); A and B each K-major or MN-major. Compiled and
// SASS-checked only: never executed on Blackwell hardware.
#include "sm100_launch.cuh"

namespace jax_tmem::sm100 {

std::string run_8bit(const GemmLaunch& L, Tile tile) {
  const DType a = L.p.a_type, b = L.p.b_type;
  if (a == DType::kS8 && b == DType::kS8) {
    if (L.cc != 100) return "kind::i8 (int8 x int8) exists on sm_100a only";
    return run_majors<Kind::kS8S8>(L, tile);
  }
  if (a == DType::kE4M3 && b == DType::kE4M3) return run_majors<Kind::kE4M3E4M3>(L, tile);
  if (a == DType::kE4M3 && b == DType::kE5M2) return run_majors<Kind::kE4M3E5M2>(L, tile);
  if (a == DType::kE5M2 && b == DType::kE4M3) return run_majors<Kind::kE5M2E4M3>(L, tile);
  if (a == DType::kE5M2 && b == DType::kE5M2) return run_majors<Kind::kE5M2E5M2>(L, tile);
  return std::string("no sm_100a kernel for ") + dtype_name(a) + " x " + dtype_name(b);
}

}  // namespace jax_tmem::sm100
