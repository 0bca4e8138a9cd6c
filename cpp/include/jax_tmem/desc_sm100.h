// jax_tmem: the sm_100 (tcgen05) instruction and shared-memory descriptors, host + device constexpr.
// The kernels build their descriptors with these functions and jax_tmem.isa exposes the same
// functions to Python, so the host tests check exactly what the kernels emit.
// Sources: PTX ISA 9.0 9.7.16.4.1 (Table 40) and 9.7.16.4.2 (Tables 42-44); CUTLASS mma_sm100_desc.hpp.
#pragma once

#include <cstdint>

#include "jax_tmem/dtypes.h"

#if defined(__CUDACC__)
#define JT_HD_CONSTEXPR_100 __host__ __device__ constexpr
#else
#define JT_HD_CONSTEXPR_100 constexpr
#endif

namespace jax_tmem::desc {

// tcgen05.mma kinds.
enum class MmaKind : uint32_t { kF16 = 0, kTF32 = 1, kF8F6F4 = 2, kI8 = 3, kMXF8F6F4 = 4, kMXF4 = 5, kMXF4NVF4 = 6 };

// Element formats as the instruction descriptor encodes them, per kind (Table 43/44):
//   kind::f16     A/B: F16 = 0, BF16 = 1                      D: F16 = 0, F32 = 1
//   kind::tf32    A/B: TF32 = 2                               D: F32 = 1
//   kind::f8f6f4  A/B: E4M3 = 0, E5M2 = 1, E2M3 = 3, E3M2 = 4, E2M1 = 5   D: F16 = 0, F32 = 1
//   kind::i8      A/B: U8 = 0, S8 = 1                         D: S32 = 2
//   kind::mxf8f6f4 as f8f6f4; kind::mxf4 / mxf4nvf4: E2M1 = 1 (bit 12 of B reserved)
enum class DFormat : uint32_t { kF16 = 0, kF32 = 1, kS32 = 2 };

constexpr bool is_block_scaled(MmaKind k) {
  return k == MmaKind::kMXF8F6F4 || k == MmaKind::kMXF4 || k == MmaKind::kMXF4NVF4;
}

// The A/B format field for element type `e` under `kind` (the format columns of dtypes.def), or -1 if
// the kind does not take that type (Tables 43/44). NOTE: E2M1 is 5 under f8f6f4/mxf8f6f4 but 1 under
// mxf4/mxf4nvf4; a float32 operand is tf32.
JT_HD_CONSTEXPR_100 int32_t format_code(MmaKind kind, DType e) {
  const DTypeRow r = dtype_row(e);
  switch (kind) {
    case MmaKind::kF16: return r.fmt[DTypeRow::kFmtF16];
    case MmaKind::kTF32: return r.fmt[DTypeRow::kFmtTF32];
    case MmaKind::kF8F6F4:
    case MmaKind::kMXF8F6F4: return r.fmt[DTypeRow::kFmtF8F6F4];
    case MmaKind::kI8: return r.fmt[DTypeRow::kFmtI8];
    case MmaKind::kMXF4:
    case MmaKind::kMXF4NVF4: return r.fmt[DTypeRow::kFmtMXF4];
  }
  return -1;
}

// Shape/major legality of one tcgen05.mma (PTX Table 39, Tables 49-52); nullptr when legal.
// m = 256 means the CTA-pair (cta_group::2) form. `elem_bits` is the operand width (4, 6, 8, 16, 32).
JT_HD_CONSTEXPR_100 const char* mma_shape_error(MmaKind kind, uint32_t m, uint32_t n, bool a_mn_major, bool b_mn_major,
                                                uint32_t elem_bits) {
  const bool pair = m == 256;
  if (is_block_scaled(kind)) {
    if (m != 128 && m != 256) return "M must be 128 (or 256 for the CTA pair) for block-scaled kinds";
  } else if (m != 64 && m != 128 && m != 256) {
    return "M must be 64 or 128 (or 256 for the CTA pair)";
  }
  if (n > 256) return "N must be <= 256";
  if (kind == MmaKind::kI8) {
    if (pair ? (n < 32 || n % 32 != 0) : !(n == 8 || n == 16 || n == 24 || n == 32 || (n >= 48 && n % 16 == 0)))
      return pair ? "N must be a multiple of 32 in [32, 256] for kind::i8 with M=256"
                  : "N must be 8, 16, 24, 32 or a multiple of 16 in [48, 256] for kind::i8";
  } else if (pair) {
    if (n < 16 || n % 16 != 0) return "N must be a multiple of 16 for M=256";
  } else if (n < 8 || n % 8 != 0) {
    return "N must be a multiple of 8 in [8, 256]";
  }
  if ((kind == MmaKind::kMXF4 || kind == MmaKind::kMXF4NVF4) && (a_mn_major || b_mn_major))
    return "kind::mxf4 and kind::mxf4nvf4 take K-major A and B only";
  if (elem_bits < 8 && (a_mn_major || b_mn_major)) return "4-bit and 6-bit operands must be K-major";
  if (elem_bits == 8 && b_mn_major && n % (pair ? 32 : 16) != 0)
    return pair ? "an MN-major 8-bit B needs N a multiple of 32 for M=256"
                : "an MN-major 8-bit B needs N a multiple of 16";
  return nullptr;
}

// Dense instruction descriptor (kinds f16, tf32, f8f6f4, i8):
//   bits 4-5 D format | 7-9 A format | 10-12 B format | 13/14 negate A/B | 15 A major (1 = MN)
//   16 B major (1 = MN) | 17-22 N >> 3 | 24-28 M >> 4 | 3 saturate (i8)
JT_HD_CONSTEXPR_100 uint32_t sm100_instr_desc(uint32_t a_fmt, uint32_t b_fmt, DFormat d_fmt, uint32_t m, uint32_t n,
                                             bool a_mn_major, bool b_mn_major, bool negate_a = false,
                                             bool negate_b = false, bool saturate = false) {
  return (static_cast<uint32_t>(saturate) << 3) | (static_cast<uint32_t>(d_fmt) << 4) | ((a_fmt & 7u) << 7) |
         ((b_fmt & 7u) << 10) | (static_cast<uint32_t>(negate_a) << 13) | (static_cast<uint32_t>(negate_b) << 14) |
         (static_cast<uint32_t>(a_mn_major) << 15) | (static_cast<uint32_t>(b_mn_major) << 16) |
         (((n >> 3) & 0x3fu) << 17) | (((m >> 4) & 0x1fu) << 24);
}

// Block-scaled instruction descriptor (kinds mxf8f6f4, mxf4, mxf4nvf4). D is implicitly F32; bits 4-5
// are the SF-B id (NOT the D format), bit 23 the scale type (UE8M0 = 1, UE4M3 = 0), 27-28 M >> 7,
// 29-30 the SF-A id. mxf4/mxf4nvf4 take K-major operands only.
JT_HD_CONSTEXPR_100 uint32_t sm100_instr_desc_block_scaled(uint32_t a_fmt, uint32_t b_fmt, uint32_t m, uint32_t n,
                                                          bool a_mn_major, bool b_mn_major, bool scale_ue8m0,
                                                          uint32_t sfa_id, uint32_t sfb_id) {
  return ((sfb_id & 3u) << 4) | ((a_fmt & 7u) << 7) | ((b_fmt & 7u) << 10) |
         (static_cast<uint32_t>(a_mn_major) << 15) | (static_cast<uint32_t>(b_mn_major) << 16) |
         (((n >> 3) & 0x3fu) << 17) | (static_cast<uint32_t>(scale_ue8m0) << 23) | (((m >> 7) & 3u) << 27) |
         ((sfa_id & 3u) << 29);
}

// sm_100 shared-memory matrix descriptor (Table 40):
//   bits 0-13 start >> 4 | 16-29 LBO >> 4 | 32-45 SBO >> 4 | 46 = 1 (fixed "version") | 49-51 base offset
//   52 LBO mode (0 relative) | 61-63 layout: 0 none, 1 128B with 32B atoms, 2 128B, 4 64B, 6 32B.
// LBO/SBO meaning with a swizzle: K-major: SBO = stride between 8-row groups along M/N (LBO unused, 1);
// MN-major: LBO = stride between swizzle-width atoms along M/N, SBO = stride between 8-deep K groups.
enum class Sm100Layout : uint32_t { kNone = 0, k128B_Base32B = 1, k128B = 2, k64B = 4, k32B = 6 };

JT_HD_CONSTEXPR_100 uint64_t sm100_smem_desc(uint32_t start_addr, uint32_t lbo, uint32_t sbo, Sm100Layout layout,
                                             uint32_t base_offset = 0) {
  return static_cast<uint64_t>((start_addr & 0x3ffffu) >> 4) | (static_cast<uint64_t>((lbo >> 4) & 0x3fffu) << 16) |
         (static_cast<uint64_t>((sbo >> 4) & 0x3fffu) << 32) | (uint64_t(1) << 46) |
         (static_cast<uint64_t>(base_offset & 7u) << 49) | (static_cast<uint64_t>(layout) << 61);
}

}  // namespace jax_tmem::desc
