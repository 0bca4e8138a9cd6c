// jax_tmem: the sm_90a dispatcher (config heuristic + dtype/majorness dispatch) and the 16-bit
// instantiations (bf16, f16; A and B each K-major or MN-major, never transposed in memory).
#include "sm90_launch.cuh"

namespace jax_tmem {
namespace sm90 {
namespace {

template <Kind K>
std::string run_16bit(const GemmLaunch& L, Tile tile) {
  const bool am = L.p.a_mn_major, bm = L.p.b_mn_major;
  if (!am && !bm) return run_tile<K, false, false>(L, tile);
  if (!am && bm) return run_tile<K, false, true>(L, tile);
  if (am && !bm) return run_tile<K, true, false>(L, tile);
  return run_tile<K, true, true>(L, tile);
}

}  // namespace
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
  const Tile tile = static_cast<Tile>(plan.config);
  GemmLaunch R = menu::is_swap_ab(plan.config) ? swap_ab(L) : L;
  R.p.splits = plan.splits;
  if (R.p.a_type == DType::kBF16 && R.p.b_type == DType::kBF16) return run_16bit<Kind::kBF16>(R, tile);
  if (R.p.a_type == DType::kF16 && R.p.b_type == DType::kF16) return run_16bit<Kind::kF16>(R, tile);
  return run_8bit_or_tf32(R, tile);
}

}  // namespace jax_tmem
