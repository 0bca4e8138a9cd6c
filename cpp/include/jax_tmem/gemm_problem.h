// jax_tmem: the canonical GEMM problem shared by every handler (CPU reference, sm_90a, sm_100a).
//
//   out[b, i, j] = act(alpha * sum_k A[b, i, k] * B[b, j, k] + bias[j]) + c[b, i, j]
//
// A and B are strided 3-D views of the operand buffers (the Python side turns any lax.dot_general
// dimension numbers into this form with free reshapes only, never a transpose in memory):
//   A K-major : A[b, i, k] at b * stride_a + i * lda + k        (rows are M, contiguous K)
//   A MN-major: A[b, i, k] at b * stride_a + k * lda + i        (rows are K, contiguous M)
//   B K-major : B[b, j, k] at b * stride_b + j * ldb + k        (rows are N, contiguous K)
//   B MN-major: B[b, j, k] at b * stride_b + k * ldb + j        (rows are K, contiguous N)
// A batch stride of 0 broadcasts the operand over the batch (an unbatched weight under vmap).
// The output is always dense [batch, M, N]. The inputs are named by role (operands.def: a, b, and the
// optional bias f32 [N] and c, of the output's dtype and shape, aliased to the output); `operands` is the
// bit mask of the roles a call passes.
#pragma once

#include <cstdint>
#include <climits>
#include <initializer_list>
#include <string>

#include "jax_tmem/dtypes.h"

namespace jax_tmem {

enum class Activation : int32_t { kNone = 0, kRelu = 1, kGelu = 2, kGeluTanh = 3, kSilu = 4 };

// The "activation" attribute with this bit set asks for the activation's derivative epilogue instead: y = (alpha *
// acc + bias) * act'(c), c holding the activation's input (the backward GEMM of act(x) . w, whose product the chain
// rule multiplies by act'(x)); c is required and no activation is applied to the product. The CPU handler runs it;
// the GPU handler in the kernel where menu::act_grad_in_kernel holds, else after the product (launch.h act_grad_pass).
inline constexpr int32_t kActGradFlag = 16;

// The input roles, in operands.def's order (= the order of the custom call's arguments).
enum class Role : int {
#define JT_OPERAND(role, name, required, dtype, elements) role,
#include "jax_tmem/operands.def"
#undef JT_OPERAND
  kCount
};
constexpr int kNumRoles = static_cast<int>(Role::kCount);
constexpr uint32_t role_bit(Role r) { return 1u << static_cast<int>(r); }

inline const char* role_name(Role r) {
  switch (r) {
#define JT_OPERAND(role, name, required, dtype, elements) \
  case Role::role: return name;
#include "jax_tmem/operands.def"
#undef JT_OPERAND
    default: return "?";
  }
}

// The roles every call passes, and every role there is, as masks.
constexpr uint32_t kRequiredRoles = 0
#define JT_OPERAND(role, name, required, dtype, elements) | (required ? role_bit(Role::role) : 0u)
#include "jax_tmem/operands.def"
#undef JT_OPERAND
    ;
constexpr uint32_t kAllRoles = (1u << kNumRoles) - 1;

struct GemmProblem {
  int64_t batch = 1, m = 1, n = 1, k = 1;
  bool a_mn_major = false, b_mn_major = false;
  int64_t lda = 0, ldb = 0;            // row pitch, elements
  int64_t stride_a = 0, stride_b = 0;  // batch stride, elements (0 = broadcast)
  DType a_type = DType::kInvalid, b_type = DType::kInvalid, out_type = DType::kInvalid;
  Activation activation = Activation::kNone;
  bool act_grad = false;               // kActGradFlag: y = (alpha * acc + bias) * activation'(c)
  float alpha = 1.0f;
  uint32_t operands = kRequiredRoles;  // the roles passed (bit i: operands.def line i)
  int32_t config = -1;                 // index into the arch's kernel menu; -1 = heuristic
  int32_t splits = 0;                  // K splits of a split-K / swap-AB entry; 0 = heuristic
  int32_t sf_vec = 0;                  // K elements per block scale (32: MX, UE8M0; 16: NVFP4, UE4M3); 0 = none
  int32_t sf_layout = 0;               // 0: plain (rows, K / sf_vec); 1: the 128x4 tiles tcgen05 reads

  // Number of rows and columns of each operand's 2-D view.
  int64_t a_rows() const { return a_mn_major ? k : m; }
  int64_t a_cols() const { return a_mn_major ? m : k; }
  int64_t b_rows() const { return b_mn_major ? k : n; }
  int64_t b_cols() const { return b_mn_major ? n : k; }
  bool has(Role r) const { return (operands & role_bit(r)) != 0; }
  // The custom call's "activation" attribute (the activation's code, kActGradFlag for its derivative).
  void set_activation(int64_t attr) {
    act_grad = (attr & kActGradFlag) != 0;
    activation = static_cast<Activation>(attr & ~kActGradFlag);
  }
  // The block scales' element type and count (operands.def): UE8M0 for the MX block of 32, UE4M3 for
  // NVFP4's block of 16.
  DType sf_type() const { return sf_vec == 32 ? DType::kE8M0 : sf_vec == 16 ? DType::kE4M3 : DType::kInvalid; }
  // Block scales on b only: a high-precision lhs times 4-bit weights (the weight-only GEMM for decode).
  bool weight_only() const { return sf_vec != 0 && !has(Role::kSFA) && has(Role::kSFB); }
  // Block scales on both operands, both float4_e2m1fn (MXFP4 or NVFP4 x the same format).
  bool fp4_block_scaled() const {
    return sf_vec != 0 && has(Role::kSFA) && has(Role::kSFB) && a_type == DType::kE2M1 && b_type == DType::kE2M1;
  }
  // Scales per batch of an operand with `rows` rows: plain rows x (K / sf_vec), or the 128x4 layout's
  // rows padded to 128 and columns to 4.
  int64_t sf_per_batch(int64_t rows) const {
    const int64_t cols = k / sf_vec;
    return sf_layout == 0 ? rows * cols : (rows + 127) / 128 * 128 * ((cols + 3) / 4 * 4);
  }
  int64_t sf_count(int64_t stride, int64_t rows) const {
    return sf_vec > 0 ? (stride != 0 ? batch : 1) * sf_per_batch(rows) : -1;
  }
  // Where scale (row, col) of one batch lies: row-major, or in the 128x4 layout (cuBLAS / CUTLASS /
  // tcgen05; jax_tmem.swizzle_scales): tiles of 128 rows x 4 columns, 512 bytes each, row-major over
  // the tile grid, inside a tile byte (r % 32) * 16 + (r % 128 / 32) * 4 + c % 4.
  int64_t sf_index(int64_t r, int64_t c) const {
    const int64_t cols = k / sf_vec;
    if (sf_layout == 0) return r * cols + c;
    return ((r / 128) * ((cols + 3) / 4) + c / 4) * 512 + (r % 32) * 16 + (r % 128) / 32 * 4 + c % 4;
  }
};

// operands.def's rules for problem p: the element type a role must have (kInvalid: any operand type,
// checked below) and its element count (-1: a strided view, checked by its extent).
inline DType role_dtype(Role r, const GemmProblem& p) {
  switch (r) {
#define JT_OPERAND(role, name, required, dtype, elements) \
  case Role::role: return dtype;
#include "jax_tmem/operands.def"
#undef JT_OPERAND
    default: return DType::kInvalid;
  }
}
inline int64_t role_elements(Role r, const GemmProblem& p) {
  switch (r) {
#define JT_OPERAND(role, name, required, dtype, elements) \
  case Role::role: return elements;
#include "jax_tmem/operands.def"
#undef JT_OPERAND
    default: return -1;
  }
}

// The element type and count of each input buffer (unused for roles not passed).
struct InputShapes {
  DType type[kNumRoles] = {};
  int64_t count[kNumRoles] = {};
};

// Checks the problem against the buffers XLA handed us. Returns an empty string when consistent,
// else a message naming what is wrong. Every handler calls this before touching memory.
// `p.operands` is a valid mask here (the decoder checked it before reading the buffers).
inline std::string validate(const GemmProblem& p, const InputShapes& in, int64_t out_count) {
  auto s = [](int64_t v) { return std::to_string(v); };
  const int64_t a_count = in.count[static_cast<int>(Role::kA)], b_count = in.count[static_cast<int>(Role::kB)];
  if (p.batch < 1 || p.m < 1 || p.n < 1 || p.k < 1)
    return "batch, m, n, k must be >= 1 (got " + s(p.batch) + ", " + s(p.m) + ", " + s(p.n) + ", " + s(p.k) + ")";
  // float4_e2m1fn (packed two per byte, XLA's E(4) layout) is an operand of the block-scaled GEMMs only:
  // the weight-only one (b) and MXFP4 / NVFP4 x the same format (a and b).
  const bool w4 = p.weight_only() && p.b_type == DType::kE2M1;
  const bool fp4 = p.fp4_block_scaled();
  if (!(dtype_is_operand(p.a_type) || fp4) || !(dtype_is_operand(p.b_type) || w4 || fp4))
    return std::string("unsupported operand dtype ") + dtype_name(p.a_type) + " x " + dtype_name(p.b_type) +
           (p.a_type == DType::kE2M1 || p.b_type == DType::kE2M1
                ? " (float4_e2m1fn: block-scaled b of a bfloat16 a, or block-scaled on both operands)" : "");
  if ((p.a_type == DType::kS8) != (p.b_type == DType::kS8))
    return "int8 operands multiply int8 operands only (int32 accumulation)";
  if (!dtype_is_output(p.out_type)) {
    std::string names;
    for (int t = 0; t < static_cast<int>(DType::kCount); ++t)
      if (dtype_is_output(static_cast<DType>(t))) names += std::string(names.empty() ? "" : ", ") + dtype_name(static_cast<DType>(t));
    return "output dtype must be one of " + names + ", got " + dtype_name(p.out_type);
  }
  if (p.lda < p.a_cols() && p.a_rows() > 1) return "lda " + s(p.lda) + " < row length " + s(p.a_cols());
  if (p.ldb < p.b_cols() && p.b_rows() > 1) return "ldb " + s(p.ldb) + " < row length " + s(p.b_cols());
  if (p.stride_a < 0 || p.stride_b < 0 || p.lda < 0 || p.ldb < 0) return "negative stride";
  // Every size and stride below 2^40 elements keeps the extent arithmetic far from int64 overflow.
  const int64_t kMax = int64_t(1) << 40;
  for (int64_t v : {p.batch, p.m, p.n, p.k, p.lda, p.ldb, p.stride_a, p.stride_b})
    if (v >= kMax) return "a size or stride is >= 2^40 elements";
  if (p.batch * p.m >= kMax || p.batch * p.n >= kMax || p.m * p.n >= kMax)
    return "the output has >= 2^40 elements";
  // Extents in 128-bit arithmetic: products of two values < 2^40 cannot wrap.
  auto extent = [](int64_t batch, int64_t stride, int64_t rows, int64_t ld, int64_t cols) {
    return static_cast<__int128>(batch - 1) * stride + static_cast<__int128>(rows - 1) * ld + cols;
  };
  auto s128 = [&](__int128 v) { return v > INT64_MAX ? std::string(">= 2^63") : s(static_cast<int64_t>(v)); };
  const __int128 ea = extent(p.batch, p.stride_a, p.a_rows(), p.lda, p.a_cols());
  const __int128 eb = extent(p.batch, p.stride_b, p.b_rows(), p.ldb, p.b_cols());
  if (ea > a_count) return "operand a: view needs " + s128(ea) + " elements, buffer has " + s(a_count);
  if (eb > b_count) return "operand b: view needs " + s128(eb) + " elements, buffer has " + s(b_count);
  if (out_count != p.batch * p.m * p.n)
    return "output has " + s(out_count) + " elements, expected batch*m*n = " + s(p.batch * p.m * p.n);
  if (p.sf_vec != 0 || p.has(Role::kSFA) || p.has(Role::kSFB)) {  // the block-scaled GEMM
    if (p.sf_vec != 32 && p.sf_vec != 16)
      return "sf_vec must be 0 (no block scales), 32 (MX formats) or 16 (NVFP4), got " + s(p.sf_vec);
    if (p.sf_layout != 0 && p.sf_layout != 1)
      return "sf_layout must be 0 (plain) or 1 (128x4 tiles), got " + s(p.sf_layout);
    if (!p.has(Role::kSFB)) return "a block-scaled GEMM (sf_vec > 0) needs sfb (and sfa unless the weights alone are scaled)";
    if (p.k % p.sf_vec) return "k = " + s(p.k) + " must be a multiple of sf_vec = " + s(p.sf_vec);
    if (p.weight_only()) {  // bf16 activations x block-scaled 4-bit weights
      if (p.a_type != DType::kBF16 || p.b_type != DType::kE2M1)
        return std::string("block scales on b only (no sfa) take a bfloat16 a and float4_e2m1fn b, got ") +
               dtype_name(p.a_type) + " x " + dtype_name(p.b_type);
    } else {
      // MXFP8 (8-bit x 8-bit, any e4m3/e5m2 mix) or MXFP4 / NVFP4 (e2m1 x e2m1, K-major).
      if (!fp4) {
        for (DType t : {p.a_type, p.b_type})
          if (dtype_bits(t) != 8 || dtype_row(t).fmt[2] < 0)
            return std::string("block scales on both operands take 8-bit floats (MXFP8) or float4_e2m1fn on both "
                               "(MXFP4 / NVFP4), got ") + dtype_name(p.a_type) + " x " + dtype_name(p.b_type);
        if (p.sf_vec != 32) return "sf_vec 16 (NVFP4 scales) takes float4_e2m1fn operands";
      } else if (p.a_mn_major || p.b_mn_major) {
        return "float4_e2m1fn operands are K-major (two elements per byte along K)";
      }
    }
  }
  for (int i = 0; i < kNumRoles; ++i) {  // the rules of operands.def
    const Role r = static_cast<Role>(i);
    if (!p.has(r)) continue;
    const DType want = role_dtype(r, p);
    if (want != DType::kInvalid && in.type[i] != want)
      return std::string(role_name(r)) + " must be " + dtype_name(want) + ", got " +
             (in.type[i] == DType::kInvalid ? "a type outside jax_tmem's table" : dtype_name(in.type[i]));
    const int64_t elements = role_elements(r, p);
    if (elements >= 0 && in.count[i] != elements)
      return std::string(role_name(r)) + " has " + s(in.count[i]) + " elements, expected " + s(elements);
  }
  if (p.splits < -1024 || p.splits > 1024)
    return "splits must be in [-1024, 1024] (0 = heuristic; < 0: summed inside the kernel), got " + s(p.splits);
  int act = static_cast<int>(p.activation);
  if (act < 0 || act > 4) return "unknown activation code " + s(act);
  if (p.act_grad && (p.activation == Activation::kNone || !p.has(Role::kC)))
    return "the activation-derivative epilogue needs an activation and c (the activation's input)";
  return "";
}

}  // namespace jax_tmem
