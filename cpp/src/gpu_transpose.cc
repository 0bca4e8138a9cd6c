// jax_tmem: the CUDA FFI handler of the batched 1-byte transpose (kernels/transpose8.cuh): x of a 1-byte
// type -> y = transpose(x) swapping the dim blocks [lead, split) and [split, rank) (attributes).
// Validates every buffer and returns ffi::Error for anything it cannot run; never aborts, allocates or
// synchronises.
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "jax_tmem/handlers.h"
#include "jax_tmem/launch.h"

namespace ffi = xla::ffi;

namespace jax_tmem {
namespace {

ffi::Error cuda_transpose8_handler(cudaStream_t stream, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y, int64_t lead,
                                   int64_t split) {
  auto fail = [](const std::string& why) { return ffi::Error::InvalidArgument("jax_tmem transpose: " + why); };
  const auto xs = x.dimensions(), ys = y->dimensions();
  const std::vector<int64_t> xd(xs.begin(), xs.end()), yd(ys.begin(), ys.end());
  const int64_t rank = static_cast<int64_t>(xd.size());
  if (!(0 <= lead && lead < split && split < rank)) return fail("needs 0 <= lead < split < rank(x)");
  if (ffi::ByteWidth(x.element_type()) != 1 || y->element_type() != x.element_type())
    return fail("x and y must have one 1-byte element type");
  // y = transpose(x, [0, lead) + [split, rank) + [lead, split)) of the (batch, rows, cols) view
  std::vector<int64_t> want(xd.begin(), xd.begin() + lead);
  want.insert(want.end(), xd.begin() + split, xd.end());
  want.insert(want.end(), xd.begin() + lead, xd.begin() + split);
  if (yd != want) return fail("y's shape is not x's permuted");
  int64_t batch = 1, rows = 1, cols = 1;
  for (int64_t i = 0; i < rank; ++i) (i < lead ? batch : i < split ? rows : cols) *= xd[i];
  const std::string why = transpose8_launch(x.untyped_data(), y->untyped_data(), batch, rows, cols, stream);
  return why.empty() ? ffi::Error::Success() : fail(why);
}

}  // namespace
}  // namespace jax_tmem

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxTmemCudaTranspose8, jax_tmem::cuda_transpose8_handler,
                              ::xla::ffi::Ffi::Bind()
                                  .Ctx<::xla::ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<::xla::ffi::AnyBuffer>()   // x
                                  .Ret<::xla::ffi::AnyBuffer>()   // y
                                  .Attr<int64_t>("lead")          // dims [0, lead) stay
                                  .Attr<int64_t>("split"),        // [lead, split) and [split, rank) swap
                              {::xla::ffi::Traits::kCmdBufferCompatible});
