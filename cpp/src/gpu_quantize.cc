// jax_tmem: the CUDA FFI handler of the fused MX quantize (kernels/mx_quantize.cuh): x (..., K) rowwise
// or (..., K, N) colwise in bf16 / f16 / f32 -> data of x's shape in e4m3 / e5m2 and UE8M0 scales per 32
// along K, plain or in the 128x4 tiles. Validates every buffer and returns ffi::Error for anything it
// cannot run; never aborts, allocates or synchronises.
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "jax_tmem/ffi_attrs.h"
#include "jax_tmem/handlers.h"
#include "jax_tmem/launch.h"

namespace jax_tmem {
namespace {

std::string dims_str(const std::vector<int64_t>& d) {
  std::string s = "(";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + (d.size() == 1 ? ",)" : ")");
}

ffi::Error cuda_quantize_handler(cudaStream_t stream, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> data,
                                 ffi::Result<ffi::AnyBuffer> scales, bool colwise, bool swizzled) {
  auto fail = [](const std::string& why) { return ffi::Error::InvalidArgument("jax_tmem quantize: " + why); };
  const auto xs = x.dimensions(), ds = data->dimensions(), ss = scales->dimensions();
  const std::vector<int64_t> xd(xs.begin(), xs.end()), dd(ds.begin(), ds.end()), sd(ss.begin(), ss.end());
  const size_t rank = xd.size();
  if (rank < ((colwise || swizzled) ? 2u : 1u))
    return fail(std::string("x must have rank >= ") + ((colwise || swizzled) ? "2 (colwise or swizzled)" : "1"));
  QuantizeLaunch q{};
  q.k = colwise ? xd[rank - 2] : xd[rank - 1];
  q.rows = colwise ? xd[rank - 1] : (rank >= 2 ? xd[rank - 2] : 1);
  q.batch = 1;
  for (size_t i = 0; i + 2 < rank; ++i) q.batch *= xd[i];
  if (q.k % 32) return fail("the quantized axis (" + std::to_string(q.k) + ") must be a multiple of 32");
  if (dd != xd) return fail("data must have x's shape " + dims_str(xd) + ", got " + dims_str(dd));
  std::vector<int64_t> want(xd.begin(), xd.end() - (swizzled || colwise ? 2 : 1));
  if (swizzled) {
    for (int64_t v : {(q.rows + 127) / 128, (q.k / 32 + 3) / 4, int64_t(32), int64_t(16)}) want.push_back(v);
  } else if (colwise) {
    want.push_back(q.k / 32);
    want.push_back(q.rows);
  } else {
    want.push_back(q.k / 32);
  }
  if (sd != want) return fail("scales must have shape " + dims_str(want) + ", got " + dims_str(sd));
  if (to_dtype(scales->element_type()) != DType::kE8M0) return fail("scales must be float8_e8m0fnu");
  q.x = x.untyped_data();
  q.in = to_dtype(x.element_type());
  q.data = data->untyped_data();
  q.out = to_dtype(data->element_type());
  q.scales = scales->untyped_data();
  q.scale_count = static_cast<int64_t>(scales->element_count());
  q.colwise = colwise;
  q.swizzled = swizzled;
  const std::string why = mx_quantize_launch(q, stream);
  return why.empty() ? ffi::Error::Success() : fail(why);
}

}  // namespace
}  // namespace jax_tmem

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxTmemCudaQuantize, jax_tmem::cuda_quantize_handler,
                              ::xla::ffi::Ffi::Bind()
                                  .Ctx<::xla::ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<::xla::ffi::AnyBuffer>()   // x
                                  .Ret<::xla::ffi::AnyBuffer>()   // data
                                  .Ret<::xla::ffi::AnyBuffer>()   // scales
                                  .Attr<bool>("colwise")
                                  .Attr<bool>("swizzled"),
                              {::xla::ffi::Traits::kCmdBufferCompatible});
