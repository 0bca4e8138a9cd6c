// jax_tmem: host launch of the sm_90a block-scaled (MX) GEMM (kernels/sm90_block_scaled.cuh): both operands
// K-major 8-bit floats (e4m3 / e5m2, any mix), UE8M0 scales per 32 along K, plain or 128x4 layout.
#include <algorithm>
#include <string>

#include "jax_tmem/kernels/sm90_block_scaled.cuh"
#include "launch_common.cuh"

namespace jax_tmem::sm90 {
namespace {

template <class C>
std::string launch_block_scaled(const GemmLaunch& L) {
  const GemmProblem& p = L.p;
  CUtensorMap map_a, map_b;
  if (std::string err = encode_ab_maps<C>(L, &map_a, &map_b); !err.empty()) return err;
  static DeviceSlots state;  // per instantiation and device, as launch_persistent
  if (L.device < 0 || L.device >= kMaxDevices)
    return "device ordinal " + std::to_string(L.device) + " outside [0, " + std::to_string(kMaxDevices) + ")";
  const auto kernel = sm90_block_scaled_kernel<C>;
  if (!state.ready[L.device].load(std::memory_order_acquire)) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM_BYTES);
    if (e != cudaSuccess) return std::string("cudaFuncSetAttribute: ") + cudaGetErrorString(e);
    state.ready[L.device].store(1, std::memory_order_release);
  }
  ScaleParams s;
  s.sfa = static_cast<const uint8_t*>(L.in(Role::kSFA));
  s.sfb = static_cast<const uint8_t*>(L.in(Role::kSFB));
  s.sfa_batch = p.sf_per_batch(p.m);
  s.sfb_batch = p.sf_per_batch(p.n);
  s.cols = static_cast<int>(p.k / p.sf_vec);
  s.layout = p.sf_layout;
  const int64_t tiles = p.batch * ((p.m + C::BLOCK_M - 1) / C::BLOCK_M) * ((p.n + C::BLOCK_N - 1) / C::BLOCK_N);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(std::min<int64_t>(tiles, L.num_sms)), 1, 1);
  cfg.blockDim = dim3(C::NUM_THREADS, 1, 1);
  cfg.dynamicSmemBytes = C::SMEM_BYTES;
  cfg.stream = L.stream;
  cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, map_a, map_b, kernel_params(L), s);
  if (e == cudaSuccess) e = cudaGetLastError();
  if (e != cudaSuccess) return std::string("kernel launch failed: ") + cudaGetErrorString(e);
  return "";
}

// The configurations (the private `config` of the call; -1: the heuristic): 0: 128x128, 1: 128x64,
// 2: 128x128 with the warpgroups taking turns on the tensor cores (kOrdered; not yet measured).
constexpr int kBlockScaledConfigs = 3;

template <DType A, DType B>
std::string run_types(const GemmLaunch& L) {
  const GemmProblem& p = L.p;
  int config = p.config;
  if (config < 0) {  // 128x128 when its tiles fill the SMs, else 128x64: twice the CTAs
    const int64_t tiles128 = p.batch * ((p.m + 127) / 128) * ((p.n + 127) / 128);
    config = tiles128 >= L.num_sms ? 0 : 1;
  }
  switch (config) {
    case 0: return launch_block_scaled<ScaledConfig<A, B, 128, 6>>(L);
    case 1: return launch_block_scaled<ScaledConfig<A, B, 64, 8>>(L);
    case 2: return launch_block_scaled<ScaledConfig<A, B, 128, 6, true>>(L);
  }
  return "block-scaled config " + std::to_string(config) + " outside [-1, " + std::to_string(kBlockScaledConfigs) + ")";
}

}  // namespace

std::string sm90_block_scaled_launch(const GemmLaunch& L) {
  const GemmProblem& p = L.p;
  if (p.sf_vec != 32) return "the sm_90a block-scaled kernel takes MX scales (sf_vec 32), got " + std::to_string(p.sf_vec);
  if (p.a_mn_major || p.b_mn_major) return "the sm_90a block-scaled kernel takes K-major operands only";
  if (p.sf_layout == 0 && (p.k / p.sf_vec) % 4)
    return "the sm_90a block-scaled kernel reads plain scales a word per 4 columns: K / 32 must be a multiple of 4 "
           "(pass the scales in the 128x4 layout, jax_tmem.swizzle_scales, as jax_tmem.scaled_matmul does)";
  if (std::string why = kernel_legality(p); !why.empty()) return why;
  return dispatch_mx8(p, "sm_90a", [&](auto a, auto b) { return run_types<decltype(a)::value, decltype(b)::value>(L); });
}

}  // namespace jax_tmem::sm90
