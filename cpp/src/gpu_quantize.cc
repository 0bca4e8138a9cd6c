// jax_tmem: the CUDA FFI handler of the fused block-scale quantize (kernels/mx_quantize.cuh): x (..., K)
// rowwise or (..., K, N) colwise in bf16 / f16 / f32 -> data of x's shape (e4m3 / e5m2, or packed e2m1)
// and scales per block along K (UE8M0 per 32; UE4M3 per 16 for NVFP4, with an optional float32 global
// scale as a second input), plain or in the 128x4 tiles; or (dequant) MXFP8's dequantize(quantize(x)) as
// bfloat16 data, rowwise. Validates every buffer and returns ffi::Error
// for anything it cannot run; never aborts, allocates or synchronises.
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

ffi::Error cuda_quantize_handler(cudaStream_t stream, ffi::RemainingArgs args, ffi::Result<ffi::AnyBuffer> data,
                                 ffi::Result<ffi::AnyBuffer> scales, bool colwise, bool swizzled, int64_t dequant) {
  auto fail = [](const std::string& why) { return ffi::Error::InvalidArgument("jax_tmem quantize: " + why); };
  if (args.size() != 1 && args.size() != 2) return fail("takes x and an optional float32 global scale");
  auto xb = args.get<ffi::AnyBuffer>(0);
  if (xb.has_error()) return fail("x is not a buffer");
  const ffi::AnyBuffer x = *xb;
  const float* gscale = nullptr;
  if (args.size() == 2) {
    auto g = args.get<ffi::AnyBuffer>(1);
    if (g.has_error() || g->element_type() != ffi::DataType::F32 || g->element_count() != 1)
      return fail("the global scale must be one float32 value");
    gscale = static_cast<const float*>(g->untyped_data());
  }
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
  const DType st = to_dtype(scales->element_type());
  const int64_t v = st == DType::kE4M3 ? 16 : 32;  // NVFP4's UE4M3 scales per 16, else UE8M0 per 32
  if (st != DType::kE8M0 && st != DType::kE4M3) return fail("scales must be float8_e8m0fnu or float8_e4m3fn (NVFP4)");
  if (q.k % v) return fail("the quantized axis (" + std::to_string(q.k) + ") must be a multiple of " + std::to_string(v));
  if (dd != xd) return fail("data must have x's shape " + dims_str(xd) + ", got " + dims_str(dd));
  if (dequant < 0 || dequant > 2) return fail("dequant must be 0 (quantize), 1 (e4m3) or 2 (e5m2)");
  if (dequant && (data->element_type() != ffi::DataType::BF16 || st != DType::kE8M0 || colwise))
    return fail("the quantize-dequantize (dequant " + std::to_string(dequant) + ") writes bfloat16 data along the "
                "last axis with float8_e8m0fnu scales (MXFP8, rowwise)");
  std::vector<int64_t> want(xd.begin(), xd.end() - (swizzled || colwise ? 2 : 1));
  if (swizzled) {
    for (int64_t d : {(q.rows + 127) / 128, (q.k / v + 3) / 4, int64_t(32), int64_t(16)}) want.push_back(d);
  } else if (colwise) {
    want.push_back(q.k / v);
    want.push_back(q.rows);
  } else {
    want.push_back(q.k / v);
  }
  if (sd != want) return fail("scales must have shape " + dims_str(want) + ", got " + dims_str(sd));
  q.x = x.untyped_data();
  q.in = to_dtype(x.element_type());
  q.data = data->untyped_data();
  q.out = dequant == 1 ? DType::kE4M3 : dequant == 2 ? DType::kE5M2 : to_dtype(data->element_type());
  q.dequant = dequant != 0;
  q.scales = scales->untyped_data();
  q.scale_type = st;
  q.gscale = gscale;
  q.scale_count = static_cast<int64_t>(scales->element_count());
  q.colwise = colwise;
  q.swizzled = swizzled;
  if (cudaGetDevice(&q.device) != cudaSuccess) return fail("cudaGetDevice failed");
  if (q.device < 0 || q.device >= kMaxDevices)
    return fail("device ordinal " + std::to_string(q.device) + " outside [0, " + std::to_string(kMaxDevices) + ")");
  q.num_sms = cuda_device_sms(q.device);
  const std::string why = mx_quantize_launch(q, stream);
  return why.empty() ? ffi::Error::Success() : fail(why);
}

}  // namespace
}  // namespace jax_tmem

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxTmemCudaQuantize, jax_tmem::cuda_quantize_handler,
                              ::xla::ffi::Ffi::Bind()
                                  .Ctx<::xla::ffi::PlatformStream<cudaStream_t>>()
                                  .RemainingArgs()                // x [, the float32 global scale]
                                  .Ret<::xla::ffi::AnyBuffer>()   // data
                                  .Ret<::xla::ffi::AnyBuffer>()   // scales
                                  .Attr<bool>("colwise")
                                  .Attr<bool>("swizzled")
                                  .Attr<int64_t>("dequant"),      // 0; 1 / 2: bf16 dequantize(quantize(x)), e4m3 / e5m2
                              {::xla::ffi::Traits::kCmdBufferCompatible});
