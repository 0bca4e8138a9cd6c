// jax_tmem: what the FFI handler hands an arch's launcher (host code, no CUDA device code).
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <string>

#include "jax_tmem/gemm_problem.h"
#include "jax_tmem/record.h"  // launch_kernel / zero_async: every launch of the launchers below

namespace jax_tmem {

constexpr int kMaxDevices = 64;  // per-device state is kept for CUDA ordinals [0, kMaxDevices)

// Raises `kernel`'s dynamic shared-memory limit to `bytes` on `device` before its first launch there:
// `ready` is one slot per device ordinal, kept per kernel instantiation (a function attribute belongs to
// one device's context, so nothing is process-wide). XLA runs different devices' thunks from different
// threads at once, hence atomics; two threads racing on one device set the same attribute twice,
// harmlessly. A function attribute, not a stream operation: allowed while XLA captures a command buffer.
template <typename Kernel>
std::string raise_smem_limit(Kernel kernel, int bytes, int device, std::atomic<int> (&ready)[kMaxDevices]) {
  if (device < 0 || device >= kMaxDevices)
    return "device ordinal " + std::to_string(device) + " outside [0, " + std::to_string(kMaxDevices) + ")";
  if (!ready[device].load(std::memory_order_acquire)) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (e != cudaSuccess) return std::string("cudaFuncSetAttribute: ") + cudaGetErrorString(e);
    ready[device].store(1, std::memory_order_release);
  }
  return "";
}

// Launches `cfg` as clusters of (x, 1, 1) CTAs (x > 1; `attr` must outlive the launch).
inline void set_cluster_x(cudaLaunchConfig_t& cfg, cudaLaunchAttribute (&attr)[1], int x) {
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = x;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
}

// What a kernel instantiation keeps per device (raise_smem_limit, resident_clusters): occupancy is a
// property of one device too, so nothing here is process-wide: a slot per device ordinal.
struct DeviceSlots {
  std::atomic<int> ready[kMaxDevices];     // 1 once the shared-memory attribute is set on that device
  std::atomic<int> clusters[kMaxDevices];  // co-resident clusters there (0 = not asked yet)
};

// How many clusters of x CTAs `kernel` can hold at once on `device` with `cfg`'s block and shared memory
// (cluster attribute set): cudaOccupancyMaxActiveClusters, asked on the first call per device (a query, no
// stream work) and kept in cache[device]. Clusters sit inside a GPC, so this can be below num_sms / x (an
// H200: 39 clusters of 3, 30 of 4, for one 207 KB CTA per SM). `device` must be in range (raise_smem_limit
// checks it, and runs first: the query needs the kernel's shared-memory limit).
template <typename Kernel>
std::string resident_clusters(Kernel kernel, cudaLaunchConfig_t cfg, int x, int num_sms, int device,
                              std::atomic<int> (&cache)[kMaxDevices], int& clusters) {
  clusters = cache[device].load(std::memory_order_acquire);
  if (clusters == 0) {
    cfg.gridDim = dim3(static_cast<unsigned>(x * (num_sms / x)), 1, 1);
    const cudaError_t e = cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg);
    if (e != cudaSuccess) return std::string("cudaOccupancyMaxActiveClusters: ") + cudaGetErrorString(e);
    if (clusters < 1) return "no cluster of this kernel fits on the GPU";
    cache[device].store(clusters, std::memory_order_release);
  }
  return "";
}

// How many CTAs of `threads` threads (no dynamic shared memory) `kernel` keeps resident per SM on `device`:
// cudaOccupancyMaxActiveBlocksPerMultiprocessor, asked on the first call per device and kept in
// cache[device] (a grid sized to what the GPU holds at once: the 4-bit colwise quantize's prefetching form).
// `device` must be in range.
template <typename Kernel>
std::string resident_ctas(Kernel kernel, int threads, int device, std::atomic<int> (&cache)[kMaxDevices], int& per_sm) {
  per_sm = cache[device].load(std::memory_order_acquire);
  if (per_sm == 0) {
    const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0);
    if (e != cudaSuccess) return std::string("cudaOccupancyMaxActiveBlocksPerMultiprocessor: ") + cudaGetErrorString(e);
    if (per_sm < 1) return "the kernel does not fit on an SM";
    cache[device].store(per_sm, std::memory_order_release);
  }
  return "";
}

struct GemmLaunch {
  GemmProblem p;
  const void* inputs[kNumRoles];  // by role (operands.def); null for roles the call does not pass
  void* out;
  float* ws;         // f32 workspace of split-K / swap-AB plans (XLA-allocated, contents undefined)
  int64_t ws_count;  // its size in floats
  int num_sms;
  int cc;  // compute capability, major * 10 + minor
  int device;  // CUDA ordinal of the device the call runs on (keys every piece of per-device state)
  cudaStream_t stream;

  const void* in(Role r) const { return inputs[static_cast<int>(r)]; }
};

// Each returns "" on success, else a message (nothing was launched). Defined per arch library.
std::string sm90_gemm_launch(const GemmLaunch& launch);

std::string sm100_gemm_launch(const GemmLaunch& launch);  // sm_100a / sm_103a (never executed yet)

// The derivative epilogue (GemmProblem::act_grad) where the plan does not run it in the kernel
// (menu::act_grad_in_kernel, asked through sm90_act_grad_in_kernel): the launch without it (y = alpha acc + bias,
// no c), then act_grad_pass multiplies the output by act'(c) in place (act_grad_pass.cu, every built arch).
bool sm90_act_grad_in_kernel(const GemmLaunch& launch);
GemmLaunch without_act_grad(const GemmLaunch& launch);
std::string act_grad_pass(const GemmLaunch& launch);

// The weight-only 4-bit GEMM (w4_gemm.cu, every built arch): bf16 a x e2m1 b with b's block scales.
std::string w4_gemm_launch(const GemmLaunch& launch);

// The fused block-scale quantize (mx_quantize.cu, every built arch): x (batch, rows, k) rowwise or
// (batch, k, rows) colwise -> data of x's shape (e4m3 / e5m2, or packed e2m1) and scales per V along k
// (UE8M0 per 32: MXFP8 / MXFP4; UE4M3 per 16: NVFP4, x divided by `gscale` first when given), plain
// ((batch, rows, k / V) rowwise, (batch, k / V, rows) colwise) or in the 128x4 tiles with `rows` as the
// tiles' rows (swizzled).
struct QuantizeLaunch {
  const void* x;
  DType in;
  void* data;
  DType out;
  void* scales;
  DType scale_type;
  const float* gscale;  // null or one float (NVFP4)
  int64_t scale_count;
  int64_t batch, rows, k;
  bool colwise, swizzled;
  bool dequant;  // MXFP8 rowwise: data receives dequantize(quantize(x)) as bf16 (`out` names the fp8 format)
  int device, num_sms;  // the CUDA ordinal the call runs on and its SM count (grids sized to the GPU)
};
std::string mx_quantize_launch(const QuantizeLaunch& q, cudaStream_t stream);

// The batched transpose of 1-byte elements (transpose8.cu, every built arch): x (batch, rows, cols) ->
// y (batch, cols, rows) (whole 32-bit words when rows and cols are multiples of 4, else a byte at a time).
std::string transpose8_launch(const void* x, void* y, int64_t batch, int64_t rows, int64_t cols, cudaStream_t stream);

}  // namespace jax_tmem
