// jax_tmem: the FFI handlers the extension module exposes (extern "C" symbols).
#pragma once

#include <string>

#include "xla/ffi/api/ffi.h"

XLA_FFI_DECLARE_HANDLER_SYMBOL(JaxTmemCpuGemm);   // cpu_gemm.cc
#if JAX_TMEM_HAS_CUDA
XLA_FFI_DECLARE_HANDLER_SYMBOL(JaxTmemCudaGemm);  // gpu_gemm.cc
namespace jax_tmem {
// Compute capability of the current device as major*10+minor, or a negative CUDA error code.
int cuda_device_cc();
int cuda_device_sms();  // SM count of the current device, 0 if unknown
}  // namespace jax_tmem
#endif
