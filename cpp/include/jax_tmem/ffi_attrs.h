// jax_tmem: decoding of the GEMM attributes shared by the CPU and CUDA FFI handlers. The binding
// (attribute names and types) lives here once so both handlers stay identical; the Python side
// (jax_tmem/ops/gemm.py, _ffi_call) passes exactly these names with these numpy types.
#pragma once

#include <cstdint>

#include "jax_tmem/gemm_problem.h"
#include "xla/ffi/api/ffi.h"

namespace jax_tmem {

namespace ffi = xla::ffi;

// The jax_tmem type of an XLA buffer type (dtypes.def's FFI column); kInvalid if it has none.
inline DType to_dtype(ffi::DataType t) {
  if (t == ffi::DataType::INVALID) return DType::kInvalid;
#define JT_DTYPE(id, name, ffi_t, tma, bits, op, out, sc, f16, tf32, f8, i8, mxf4) \
  if (t == ffi::DataType::ffi_t) return DType::id;
#include "jax_tmem/dtypes.def"
#undef JT_DTYPE
  return DType::kInvalid;
}

// Binding shared by both handlers: a, b, then [bias][c] as remaining args; results: the output and an
// f32 workspace (split-K / swap-AB partial sums; one element when the plan needs none).
#define JAX_TMEM_GEMM_BINDING(ctx_binding)                                                      \
  ::xla::ffi::Ffi::Bind()                                                                            \
      ctx_binding                                                                               \
      .Arg<::xla::ffi::AnyBuffer>()        /* a */                                                   \
      .Arg<::xla::ffi::AnyBuffer>()        /* b */                                                   \
      .RemainingArgs()                /* [bias f32 (n,)] [c (batch, m, n), aliased to out] */   \
      .Ret<::xla::ffi::AnyBuffer>()        /* out (batch, m, n) */                                   \
      .Ret<::xla::ffi::AnyBuffer>()        /* workspace, f32 */                                      \
      .Attr<int64_t>("batch")                                                                   \
      .Attr<int64_t>("m")                                                                       \
      .Attr<int64_t>("n")                                                                       \
      .Attr<int64_t>("k")                                                                       \
      .Attr<bool>("a_mn_major")                                                                 \
      .Attr<bool>("b_mn_major")                                                                 \
      .Attr<int64_t>("lda")                                                                     \
      .Attr<int64_t>("ldb")                                                                     \
      .Attr<int64_t>("stride_a")                                                                \
      .Attr<int64_t>("stride_b")                                                                \
      .Attr<int32_t>("activation")                                                              \
      .Attr<float>("alpha")                                                                     \
      .Attr<bool>("has_bias")                                                                   \
      .Attr<bool>("has_c")                                                                      \
      .Attr<int32_t>("config")                                                                  \
      .Attr<int32_t>("splits")

// The attribute part of a handler's signature, in binding order.
#define JAX_TMEM_GEMM_ATTR_PARAMS                                                               \
  int64_t batch, int64_t m, int64_t n, int64_t k, bool a_mn_major, bool b_mn_major,            \
      int64_t lda, int64_t ldb, int64_t stride_a, int64_t stride_b, int32_t activation,         \
      float alpha, bool has_bias, bool has_c, int32_t config, int32_t splits

// Fills a GemmProblem from decoded arguments and validates it against the buffers.
// On success returns Error::Success() and sets *bias/*c to the optional buffers (or null).
inline ffi::Error decode_problem(GemmProblem& p, ffi::AnyBuffer a, ffi::AnyBuffer b,
                                 ffi::RemainingArgs rest, ffi::Result<ffi::AnyBuffer>& out,
                                 JAX_TMEM_GEMM_ATTR_PARAMS, const void** bias_ptr,
                                 const void** c_ptr) {
  p.batch = batch; p.m = m; p.n = n; p.k = k;
  p.a_mn_major = a_mn_major; p.b_mn_major = b_mn_major;
  p.lda = lda; p.ldb = ldb; p.stride_a = stride_a; p.stride_b = stride_b;
  p.activation = static_cast<Activation>(activation);
  p.alpha = alpha; p.has_bias = has_bias; p.has_c = has_c; p.config = config; p.splits = splits;
  p.a_type = to_dtype(a.element_type());
  p.b_type = to_dtype(b.element_type());
  p.out_type = to_dtype(out->element_type());
  size_t expected_rest = (has_bias ? 1 : 0) + (has_c ? 1 : 0);
  if (rest.size() != expected_rest)
    return ffi::Error::InvalidArgument("jax_tmem gemm: expected " + std::to_string(expected_rest) +
                                       " optional buffers (bias/c), got " + std::to_string(rest.size()));
  int64_t bias_count = 0, c_count = 0;
  *bias_ptr = nullptr; *c_ptr = nullptr;
  size_t idx = 0;
  if (has_bias) {
    auto bias = rest.get<ffi::AnyBuffer>(idx++);
    if (bias.has_error()) return bias.error();
    if (bias->element_type() != ffi::DataType::F32)
      return ffi::Error::InvalidArgument("jax_tmem gemm: bias must be float32");
    bias_count = static_cast<int64_t>(bias->element_count());
    *bias_ptr = bias->untyped_data();
  }
  if (has_c) {
    auto c = rest.get<ffi::AnyBuffer>(idx++);
    if (c.has_error()) return c.error();
    if (c->element_type() != out->element_type())
      return ffi::Error::InvalidArgument("jax_tmem gemm: c must have the output dtype");
    c_count = static_cast<int64_t>(c->element_count());
    *c_ptr = c->untyped_data();
  }
  std::string msg = validate(p, static_cast<int64_t>(a.element_count()),
                             static_cast<int64_t>(b.element_count()),
                             static_cast<int64_t>(out->element_count()), bias_count, c_count);
  if (!msg.empty()) return ffi::Error::InvalidArgument("jax_tmem gemm: " + msg);
  return ffi::Error::Success();
}

}  // namespace jax_tmem
