// jax_tmem: the CUDA FFI handler of the canonical GEMM. It decodes and validates the attributes
// against the buffers (shared with the CPU handler), dispatches on the device's compute capability to
// the arch's launcher, and returns ffi::Error for anything it cannot run; it never aborts, allocates or
// synchronises, and launches the same kernel for the same attributes (command-buffer compatible).
#include <cuda_runtime.h>

#include <mutex>
#include <string>

#include "jax_tmem/ffi_attrs.h"
#include "jax_tmem/handlers.h"
#include "jax_tmem/launch.h"

namespace jax_tmem {
namespace {

struct DeviceInfo {
  int cc = -1;
  int num_sms = 0;
};

// Per-device properties, read once per device ordinal (XLA calls the handler for different devices
// from different threads at once).
DeviceInfo device_info(int dev) {
  static std::mutex mu;
  static DeviceInfo cache[kMaxDevices];
  std::lock_guard<std::mutex> lock(mu);
  if (dev < 0 || dev >= kMaxDevices) return {};
  DeviceInfo& d = cache[dev];
  if (d.cc < 0) {
    int major = 0, minor = 0, sms = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      return {};
    d.cc = major * 10 + minor;
    d.num_sms = sms;
  }
  return d;
}

ffi::Error cuda_gemm_handler(cudaStream_t stream, ffi::RemainingArgs args, ffi::Result<ffi::AnyBuffer> out,
                             ffi::Result<ffi::AnyBuffer> workspace, JAX_TMEM_GEMM_ATTR_PARAMS) {
  // The device is the one whose context XLA made current for this thunk (where cudaFuncSetAttribute and
  // the launch act). Every error names it. (No stream query here: during command-buffer capture a
  // query of the capturing stream, cudaStreamGetDevice included, invalidates the capture.)
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) return ffi::Error::Internal("jax_tmem gemm: cudaGetDevice failed");
  auto fail = [dev](ffi::ErrorCode code, const std::string& why) {  // built only on the error path
    return ffi::Error(code, "jax_tmem gemm on GPU " + std::to_string(dev) + ": " + why);
  };
  const DeviceInfo info = device_info(dev);
  if (info.cc < 0) return fail(ffi::ErrorCode::kInternal, "cannot read its compute capability");
  GemmLaunch L{};
  ffi::Error err = decode_problem(L.p, args, out, JAX_TMEM_GEMM_ATTR_ARGS, L.inputs);
  if (err.failure()) {
    std::string why = err.message();
    if (why.rfind("jax_tmem gemm: ", 0) == 0) why.erase(0, 15);  // the shared decoder's own prefix
    return fail(*err.errc(), why);
  }
  L.out = out->untyped_data();
  if (reinterpret_cast<uintptr_t>(L.out) % 16 != 0)  // (XLA aligns every buffer; the swap-AB store writes 16-B pieces)
    return fail(ffi::ErrorCode::kInvalidArgument, "the output buffer is not 16-byte aligned");
  // The derivative epilogue: in the kernel where the plan can (menu::act_grad_in_kernel), else a second pass after it.
  bool act_grad_in_kernel = false;
#if JAX_TMEM_HAS_SM90
  act_grad_in_kernel = L.p.act_grad && info.cc == 90 && sm90_act_grad_in_kernel(L);
#endif
  const bool act_grad_pass_after = L.p.act_grad && !act_grad_in_kernel;
  if (workspace->element_type() != ffi::DataType::F32)
    return fail(ffi::ErrorCode::kInvalidArgument, "the workspace result must be float32");
  L.ws = static_cast<float*>(workspace->untyped_data());
  L.ws_count = static_cast<int64_t>(workspace->element_count());
  L.num_sms = info.num_sms;
  L.cc = info.cc;
  L.device = dev;
  L.stream = stream;
  std::string msg;
  const GemmLaunch& K = act_grad_pass_after ? without_act_grad(L) : L;
  if (K.p.weight_only()) {  // plain CUDA (mma.sync), compiled for every built arch
    msg = w4_gemm_launch(K);
  } else if (info.cc == 90) {
#if JAX_TMEM_HAS_SM90
    msg = sm90_gemm_launch(K);
#else
    msg = "this build of jax_tmem has no sm_90a kernels";
#endif
  } else if (info.cc == 100 || info.cc == 103) {
#if JAX_TMEM_HAS_SM100
    msg = sm100_gemm_launch(K);
#else
    msg = "this build of jax_tmem has no sm_100a/sm_103a kernels";
#endif
  } else {
    msg = "no jax_tmem kernel for compute capability " + std::to_string(info.cc);
  }
  if (msg.empty() && act_grad_pass_after) msg = act_grad_pass(L);
  if (!msg.empty()) return fail(ffi::ErrorCode::kInvalidArgument, "(sm_" + std::to_string(info.cc) + ") " + msg);
  return ffi::Error::Success();
}

}  // namespace

int cuda_device_cc(int dev) { return device_info(dev).cc; }

int cuda_device_sms(int dev) { return device_info(dev).num_sms; }

}  // namespace jax_tmem

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxTmemCudaGemm, jax_tmem::cuda_gemm_handler,
                              JAX_TMEM_GEMM_BINDING(.Ctx<::xla::ffi::PlatformStream<cudaStream_t>>()),
                              {::xla::ffi::Traits::kCmdBufferCompatible});
