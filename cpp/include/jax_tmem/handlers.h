// jax_tmem: the FFI handlers the extension module exposes (extern "C" symbols).
#pragma once

#include <string>

#include "xla/ffi/api/ffi.h"

XLA_FFI_DECLARE_HANDLER_SYMBOL(JaxTmemCpuGemm);   // cpu_gemm.cc
#if JAX_TMEM_HAS_CUDA
XLA_FFI_DECLARE_HANDLER_SYMBOL(JaxTmemCudaGemm);      // gpu_gemm.cc
XLA_FFI_DECLARE_HANDLER_SYMBOL(JaxTmemCudaQuantize);  // gpu_quantize.cc
XLA_FFI_DECLARE_HANDLER_SYMBOL(JaxTmemCudaTranspose8);  // gpu_transpose.cc
namespace jax_tmem {
// Properties of CUDA device `dev` (an ordinal of this process's CUDA runtime, as XLA numbers its local
// GPUs): compute capability as major*10+minor (-1 if unknown) and SM count (0 if unknown).
int cuda_device_cc(int dev);
int cuda_device_sms(int dev);
}  // namespace jax_tmem
#endif
