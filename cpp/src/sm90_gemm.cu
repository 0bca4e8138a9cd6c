// jax_tmem: the sm_90a dispatcher (config heuristic + dtype/majorness dispatch) and the 16-bit
// instantiations (bf16, f16; A and B each K-major or MN-major, never transposed in memory).
#include "sm90_launch.cuh"

namespace jax_tmem {
namespace sm90 {
namespace {

template <Kind K>
std::string run_16bit(const GemmLaunch& L, int block_n) {
  const bool am = L.p.a_mn_major, bm = L.p.b_mn_major;
  if (!am && !bm) return run_tile<K, false, false>(L, block_n);
  if (!am && bm) return run_tile<K, false, true>(L, block_n);
  if (am && !bm) return run_tile<K, true, false>(L, block_n);
  return run_tile<K, true, true>(L, block_n);
}

// Returns BLOCK_N, or -128 for the 128x128 ping-pong schedule (config 3), -256 for 128x256 with the
// shared-memory staged epilogue (config 5).
int choose_block_n(const GemmProblem& p, int num_sms) {
  if (p.config == 3) return -128;
  if (p.config == 5) return -256;
  static constexpr int kMenu[] = {256, 128, 64};
  return choose_tile_n(p, num_sms, kMenu, 3);
}

}  // namespace
}  // namespace sm90

std::string sm90_gemm_launch(const GemmLaunch& L) {
  using namespace sm90;
  const GemmProblem& p = L.p;
  if (p.config < -1 || p.config > 5 || p.config == 4)
    return "sm_90a config must be -1 (heuristic), 0 (128x128), 1 (128x256), 2 (128x64), 3 (128x128 ping-pong) or "
           "5 (128x256, staged epilogue)";
  if (p.m >= (int64_t(1) << 31) || p.n >= (int64_t(1) << 31) || p.k >= (int64_t(1) << 31))
    return "dimensions must be < 2^31";
  const int block_n = choose_block_n(p, L.num_sms);
  if (p.a_type == DType::kBF16 && p.b_type == DType::kBF16) return run_16bit<Kind::kBF16>(L, block_n);
  if (p.a_type == DType::kF16 && p.b_type == DType::kF16) return run_16bit<Kind::kF16>(L, block_n);
  return run_8bit_or_tf32(L, block_n);
}

}  // namespace jax_tmem
