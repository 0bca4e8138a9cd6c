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

// Binding shared by both handlers: the inputs by role (operands.def; the "operands" mask says which
// are passed, in that order); results: the output and an f32 workspace (split-K / swap-AB partial sums;
// one element when the plan needs none).
#define JAX_TMEM_GEMM_BINDING(ctx_binding)                                                      \
  ::xla::ffi::Ffi::Bind()                                                                       \
      ctx_binding                                                                               \
      .RemainingArgs()                     /* the inputs, by role */                            \
      .Ret<::xla::ffi::AnyBuffer>()        /* out (batch, m, n) */                              \
      .Ret<::xla::ffi::AnyBuffer>()        /* workspace, f32 */                                 \
      .Attr<int64_t>("operands")                                                                \
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
      .Attr<int32_t>("config")                                                                  \
      .Attr<int32_t>("splits")                                                                  \
      .Attr<int32_t>("sf_vec")                                                                  \
      .Attr<int32_t>("sf_layout")

// The attribute part of a handler's signature, in binding order.
#define JAX_TMEM_GEMM_ATTR_PARAMS                                                               \
  int64_t operands, int64_t batch, int64_t m, int64_t n, int64_t k, bool a_mn_major,           \
      bool b_mn_major, int64_t lda, int64_t ldb, int64_t stride_a, int64_t stride_b,            \
      int32_t activation, float alpha, int32_t config, int32_t splits, int32_t sf_vec, int32_t sf_layout

// The attribute values, forwarded in the same order.
#define JAX_TMEM_GEMM_ATTR_ARGS \
  operands, batch, m, n, k, a_mn_major, b_mn_major, lda, ldb, stride_a, stride_b, activation, alpha, config, splits, \
      sf_vec, sf_layout

// Fills a GemmProblem from decoded arguments and validates it against the buffers. On success returns
// Error::Success() and sets in[role] to each passed input's data (null for roles not passed).
inline ffi::Error decode_problem(GemmProblem& p, ffi::RemainingArgs args, ffi::Result<ffi::AnyBuffer>& out,
                                 JAX_TMEM_GEMM_ATTR_PARAMS, const void* (&in)[kNumRoles]) {
  auto fail = [](const std::string& why) { return ffi::Error::InvalidArgument("jax_tmem gemm: " + why); };
  if (operands < 0 || operands > static_cast<int64_t>(kAllRoles) ||
      (static_cast<uint32_t>(operands) & kRequiredRoles) != kRequiredRoles)
    return fail("operands mask " + std::to_string(operands) + " must hold a and b and no unknown role");
  p.operands = static_cast<uint32_t>(operands);
  p.batch = batch; p.m = m; p.n = n; p.k = k;
  p.a_mn_major = a_mn_major; p.b_mn_major = b_mn_major;
  p.lda = lda; p.ldb = ldb; p.stride_a = stride_a; p.stride_b = stride_b;
  p.set_activation(activation);
  p.alpha = alpha; p.config = config; p.splits = splits; p.sf_vec = sf_vec;
  p.sf_layout = sf_layout;
  p.out_type = to_dtype(out->element_type());
  std::string names;
  size_t expected = 0;
  for (int i = 0; i < kNumRoles; ++i)
    if (p.has(static_cast<Role>(i))) {
      names += std::string(expected ? ", " : "") + role_name(static_cast<Role>(i));
      ++expected;
    }
  if (args.size() != expected)
    return fail("expected " + std::to_string(expected) + " input buffers (" + names + "), got " +
                std::to_string(args.size()));
  InputShapes shapes;
  size_t idx = 0;
  for (int i = 0; i < kNumRoles; ++i) {
    in[i] = nullptr;
    if (!p.has(static_cast<Role>(i))) continue;
    auto buf = args.get<ffi::AnyBuffer>(idx++);
    if (buf.has_error()) return buf.error();
    shapes.type[i] = to_dtype(buf->element_type());
    shapes.count[i] = static_cast<int64_t>(buf->element_count());
    in[i] = buf->untyped_data();
  }
  p.a_type = shapes.type[static_cast<int>(Role::kA)];
  p.b_type = shapes.type[static_cast<int>(Role::kB)];
  std::string msg = validate(p, shapes, static_cast<int64_t>(out->element_count()));
  if (!msg.empty()) return fail(msg);
  return ffi::Error::Success();
}

}  // namespace jax_tmem
