// jax_tmem: what the CUDA kernels can take beyond the operand families, defined once (host code, no
// CUDA): the launchers refuse a problem with this message, and Python asks the same function through
// the extension (_core/arch.check) to route the problem to XLA at trace time.
#pragma once

#include <cstdint>
#include <string>

#include "jax_tmem/gemm_problem.h"

namespace jax_tmem {

// "" if the problem's views fit the kernels' TMA loads and 32-bit tile indices, else why not:
//  * each operand's row pitch is a multiple of 16 bytes (unless it has a single row), and so is its
//    batch stride when the batch is really strided (batch > 1, stride != 0);
//  * M, N, K and the batch are < 2^31.
inline std::string kernel_legality(const GemmProblem& p) {
  struct View { const char* name; DType type; int64_t ld, stride, rows; };
  const View views[2] = {{"lhs", p.a_type, p.lda, p.stride_a, p.a_rows()},
                         {"rhs", p.b_type, p.ldb, p.stride_b, p.b_rows()}};
  for (const View& v : views) {
    const int64_t bits = dtype_bits(v.type);
    if (v.rows > 1 && (v.ld * bits) % 128)
      return std::string(v.name) + " row pitch of " + std::to_string(v.ld * bits / 8) +
             " bytes is not a multiple of 16 (TMA)";
    if (p.batch > 1 && v.stride != 0 && (v.stride * bits) % 128)
      return std::string(v.name) + " batch stride of " + std::to_string(v.stride * bits / 8) +
             " bytes is not a multiple of 16 (TMA)";
  }
  const int64_t kMax = int64_t(1) << 31;
  if (p.m >= kMax || p.n >= kMax || p.k >= kMax || p.batch >= kMax) return "a dimension is >= 2^31";
  return "";
}

}  // namespace jax_tmem
