// jax_tmem: element types, all derived from the one table in dtypes.def (see there). Host and device
// constexpr; the maps are switches, so they also work in device code at run time.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define JT_DTYPE_HD __host__ __device__ constexpr
#else
#define JT_DTYPE_HD constexpr
#endif

namespace jax_tmem {

// Element types as jax_tmem numbers them (the line order of dtypes.def).
enum class DType : int32_t {
#define JT_DTYPE(id, name, ffi, tma, bits, op, out, sc, f16, tf32, f8, i8, mxf4) id,
#include "jax_tmem/dtypes.def"
#undef JT_DTYPE
  kCount,
  kInvalid = -1
};

// One row of the table. fmt[]: the tcgen05 format codes, indexed by DTypeRow::Family.
struct DTypeRow {
  enum Family : int { kFmtF16 = 0, kFmtTF32 = 1, kFmtF8F6F4 = 2, kFmtI8 = 3, kFmtMXF4 = 4 };
  const char* name;
  int bits;
  bool operand, output, scale;  // the dense GEMM ops take it as A/B, write it; a block-scale type
  int8_t fmt[5];
};

JT_DTYPE_HD DTypeRow dtype_row(DType t) {
  switch (t) {
#define JT_DTYPE(id, name, ffi, tma, bits, op, out, sc, f16, tf32, f8, i8, mxf4) \
    case DType::id: return DTypeRow{#name, bits, op != 0, out != 0, sc != 0, {f16, tf32, f8, i8, mxf4}};
#include "jax_tmem/dtypes.def"
#undef JT_DTYPE
    default: return DTypeRow{"invalid", 0, false, false, false, {-1, -1, -1, -1, -1}};
  }
}

JT_DTYPE_HD int dtype_bits(DType t) { return dtype_row(t).bits; }
// Whole bytes per element (0 for sub-byte types, which are stored packed).
JT_DTYPE_HD int dtype_bytes(DType t) { return dtype_bits(t) % 8 == 0 ? dtype_bits(t) / 8 : 0; }
JT_DTYPE_HD const char* dtype_name(DType t) { return dtype_row(t).name; }
JT_DTYPE_HD bool dtype_is_operand(DType t) { return dtype_row(t).operand; }
JT_DTYPE_HD bool dtype_is_output(DType t) { return dtype_row(t).output; }

// The type of a numpy dtype name ("tensorfloat32" names float32 read as tf32); kInvalid if none.
inline DType dtype_from_name(const char* s) {
  if (std::strcmp(s, "tensorfloat32") == 0) return DType::kF32;
  for (int i = 0; i < static_cast<int>(DType::kCount); ++i)
    if (std::strcmp(s, dtype_name(static_cast<DType>(i))) == 0) return static_cast<DType>(i);
  return DType::kInvalid;
}

}  // namespace jax_tmem
