// jax_tmem: host-side TMA tensor-map encoding (cuTensorMapEncodeTiled through the runtime's driver
// entry point, so the extension does not link libcuda and imports on machines without a driver).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "jax_tmem/gemm_problem.h"

namespace jax_tmem::tma {

// The L2 promotion of an operand each CTA streams once (a decode GEMM's weight): none.
inline constexpr CUtensorMapL2promotion kStreamed = CU_TENSOR_MAP_L2_PROMOTION_NONE;

using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

inline EncodeTiledFn encode_fn() {
  static EncodeTiledFn fn = []() -> EncodeTiledFn {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      return nullptr;
    return reinterpret_cast<EncodeTiledFn>(ptr);
  }();
  return fn;
}

// dtypes.def's TMA column.
inline CUtensorMapDataType tma_dtype(DType t) {
  switch (t) {
#define JT_DTYPE(id, name, ffi, tma, bits, op, out, sc, f16, tf32, f8, i8, mxf4) \
    case DType::id: return CU_TENSOR_MAP_DATA_TYPE_##tma;
#include "jax_tmem/dtypes.def"
#undef JT_DTYPE
    default: return CU_TENSOR_MAP_DATA_TYPE_UINT8;
  }
}

// A 3-D view {cols (contiguous), rows, batch} of an operand, loaded in boxes {box_cols, box_rows, 1}
// with a 128-byte swizzle (or `swizzle`), each L2 miss widened to 256 bytes (or `promo`: kStreamed for a
// decode weight, read once: H200 2026-11-26, scripts/stream_probe.cu dd, 1 x 28672 x 4096 bf16 in 128-byte
// boxes 59.2 us with 256-byte promotion, 56.5 without; the 64-row swap-AB kernel 61.3 -> 57.9-59.4).
// `rows == 1` tolerates any row pitch (it is never stepped). A 4-bit operand
// (packed two per byte, element 2i in the low nibble: XLA's E(4) layout, what kind::mxf4/mxf4nvf4 read
// from shared memory) is mapped as bytes: cols, pitches and box_cols in elements, halved here.
inline std::string encode_operand(CUtensorMap* map, const void* base, DType t, int64_t cols, int64_t rows,
                                  int64_t batch, int64_t ld, int64_t batch_stride, uint32_t box_cols,
                                  uint32_t box_rows, CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B,
                                  CUtensorMapL2promotion promo = CU_TENSOR_MAP_L2_PROMOTION_L2_256B) {
  EncodeTiledFn fn = encode_fn();
  if (fn == nullptr) return "cuTensorMapEncodeTiled is not available from the CUDA driver";
  if (dtype_bits(t) == 4) {
    if (cols % 2 || ld % 2 || batch_stride % 2 || box_cols % 2)
      return "a packed 4-bit operand needs even row lengths, pitches and batch strides (two elements per byte)";
    cols /= 2, ld /= 2, batch_stride /= 2, box_cols /= 2;
    t = DType::kU8;
  }
  const int es = dtype_bytes(t);
  if (reinterpret_cast<uintptr_t>(base) % 16) return "operand base address is not 16-byte aligned (TMA)";
  auto round16 = [](int64_t v) { return (v + 15) / 16 * 16; };
  int64_t pitch = ld * es;
  if (rows == 1) pitch = round16(cols * es);
  int64_t bstride = batch_stride * es;
  if (batch <= 1) bstride = round16(pitch * rows);
  if (pitch % 16 || bstride % 16) return "operand row pitch or batch stride is not a multiple of 16 bytes (TMA)";
  cuuint64_t dims[3] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows),
                        static_cast<cuuint64_t>(batch < 1 ? 1 : batch)};
  cuuint64_t strides[2] = {static_cast<cuuint64_t>(pitch), static_cast<cuuint64_t>(bstride)};
  cuuint32_t box[3] = {box_cols, box_rows, 1};
  cuuint32_t estr[3] = {1, 1, 1};
  CUresult r = fn(map, tma_dtype(t), 3, const_cast<void*>(base), dims, strides, box, estr,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, promo,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) return "cuTensorMapEncodeTiled failed with CUresult " + std::to_string(static_cast<int>(r));
  return "";
}

}  // namespace jax_tmem::tma
