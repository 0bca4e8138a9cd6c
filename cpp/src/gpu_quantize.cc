// jax_tmem: the CUDA FFI handler of the fused MX quantize (kernels/mx_quantize.cuh): x (..., K) in bf16 /
// f16 / f32 -> data (..., K) in e4m3 / e5m2 and UE8M0 scales (..., K / 32). Validates every buffer and
// returns ffi::Error for anything it cannot run; never aborts, allocates or synchronises.
#include <cuda_runtime.h>

#include <string>

#include "jax_tmem/ffi_attrs.h"
#include "jax_tmem/handlers.h"
#include "jax_tmem/launch.h"

namespace jax_tmem {
namespace {

ffi::Error cuda_quantize_handler(cudaStream_t stream, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> data,
                                 ffi::Result<ffi::AnyBuffer> scales) {
  auto fail = [](const std::string& why) { return ffi::Error::InvalidArgument("jax_tmem quantize: " + why); };
  const auto xd = x.dimensions(), dd = data->dimensions(), sd = scales->dimensions();
  if (xd.size() < 1) return fail("x must have rank >= 1");
  const int64_t k = xd.back();
  if (k % 32) return fail("the last axis (" + std::to_string(k) + ") must be a multiple of 32");
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < xd.size(); ++i) rows *= xd[i];
  if (dd.size() != xd.size() || sd.size() != xd.size()) return fail("data and scales must have x's rank");
  for (size_t i = 0; i < xd.size(); ++i) {
    if (dd[i] != xd[i]) return fail("data must have x's shape");
    if (sd[i] != (i + 1 == xd.size() ? k / 32 : xd[i])) return fail("scales must have x's shape with the last axis / 32");
  }
  if (to_dtype(scales->element_type()) != DType::kE8M0) return fail("scales must be float8_e8m0fnu");
  const std::string why = mx_quantize_launch(x.untyped_data(), to_dtype(x.element_type()), data->untyped_data(),
                                             to_dtype(data->element_type()), scales->untyped_data(), rows, k, stream);
  return why.empty() ? ffi::Error::Success() : fail(why);
}

}  // namespace
}  // namespace jax_tmem

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxTmemCudaQuantize, jax_tmem::cuda_quantize_handler,
                              ::xla::ffi::Ffi::Bind()
                                  .Ctx<::xla::ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<::xla::ffi::AnyBuffer>()   // x
                                  .Ret<::xla::ffi::AnyBuffer>()   // data
                                  .Ret<::xla::ffi::AnyBuffer>(),  // scales
                              {::xla::ffi::Traits::kCmdBufferCompatible});
