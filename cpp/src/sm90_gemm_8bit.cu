// jax_tmem: sm_90a instantiations for tf32 and fp8 (e4m3/e5m2 in any mix); K-major A and B only
// (wgmma reads 8-bit and tf32 operands K-major). See sm90_gemm.cu for the dispatcher.
#include "sm90_launch.cuh"

namespace jax_tmem::sm90 {

std::string run_8bit_or_tf32(const GemmLaunch& L, Tile tile) {
  const GemmProblem& p = L.p;
  if (p.a_mn_major || p.b_mn_major) return "tf32/fp8 operands must be K-major on sm_90a";
  const DType a = p.a_type, b = p.b_type;
  if (a == DType::kF32 && b == DType::kF32) return run_tile<Kind::kTF32, false, false>(L, tile);
  if (a == DType::kE4M3 && b == DType::kE4M3) return run_tile<Kind::kE4M3E4M3, false, false>(L, tile);
  if (a == DType::kE4M3 && b == DType::kE5M2) return run_tile<Kind::kE4M3E5M2, false, false>(L, tile);
  if (a == DType::kE5M2 && b == DType::kE4M3) return run_tile<Kind::kE5M2E4M3, false, false>(L, tile);
  if (a == DType::kE5M2 && b == DType::kE5M2) return run_tile<Kind::kE5M2E5M2, false, false>(L, tile);
  return std::string("no sm_90a kernel for ") + dtype_name(a) + " x " + dtype_name(b);
}

}  // namespace jax_tmem::sm90
