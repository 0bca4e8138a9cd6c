// jax_tmem: the derivative epilogue's second pass (GemmProblem::act_grad where the plan does not run it in the
// kernel: launch.h): the launch without it wrote y = alpha acc + bias; here y *= act'(c), elementwise, in the output
// type (one more rounding than in the kernel: the unfused program's arithmetic), with the CPU handler's act'
// (epilogue_math.h). Memory-bound: a grid-stride loop, two elements per thread and iteration.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "jax_tmem/epilogue_math.h"
#include "jax_tmem/launch.h"

namespace jax_tmem {
namespace {

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
template <typename T>
__device__ __forceinline__ T from_float(float v) {
  if constexpr (sizeof(T) == 4) return v;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(v);
  else return __float2half_rn(v);
}

template <typename T>
__global__ void act_grad_pass_kernel(T* __restrict__ y, const T* __restrict__ c, int64_t count, Activation act) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    y[i] = from_float<T>(to_float(y[i]) * apply_activation_grad(to_float(c[i]), act));
}

template <typename T>
std::string launch_pass(const GemmLaunch& L, int64_t count) {
  constexpr int kThreads = 256;
  const int64_t blocks = std::min<int64_t>((count + kThreads - 1) / kThreads, int64_t(L.num_sms) * 16);
  if (blocks == 0) return "";
  (void)launch_kernel(launch_config(dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0, L.stream),
                      act_grad_pass_kernel<T>, static_cast<T*>(L.out), static_cast<const T*>(L.in(Role::kC)), count,
                      L.p.activation);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string("activation-derivative pass: launch failed: ") + cudaGetErrorString(e);
}

}  // namespace

GemmLaunch without_act_grad(const GemmLaunch& L) {
  GemmLaunch K = L;
  K.p.act_grad = false;
  K.p.activation = Activation::kNone;
  K.p.operands &= ~role_bit(Role::kC);
  K.inputs[static_cast<int>(Role::kC)] = nullptr;
  return K;
}

std::string act_grad_pass(const GemmLaunch& L) {
  if (L.in(Role::kC) == L.out) return "activation-derivative pass: c must not share the output's buffer";
  const int64_t count = L.p.batch * L.p.m * L.p.n;
  switch (L.p.out_type) {
    case DType::kF32: return launch_pass<float>(L, count);
    case DType::kBF16: return launch_pass<__nv_bfloat16>(L, count);
    case DType::kF16: return launch_pass<__half>(L, count);
    default: return std::string("activation-derivative pass: output type ") + dtype_name(L.p.out_type);
  }
}

}  // namespace jax_tmem
