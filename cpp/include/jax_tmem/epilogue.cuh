// jax_tmem: epilogue helpers shared by the GPU kernels: y = act(alpha * acc + bias) + c, cast, store.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "jax_tmem/epilogue_math.h"
#include "jax_tmem/gemm_problem.h"

namespace jax_tmem::epilogue {

struct Args {
  void* out;
  const void* c;       // same dtype/shape as out, or null
  const float* bias;   // [n] or null
  float alpha;
  const float* scale;  // null, or one float multiplying alpha: the `scale` operand (NVFP4's global scales)
  int32_t activation;  // Activation
  int32_t out_type;    // DType: kF32, kBF16, kF16
};

// The epilogue's arguments from the problem and its inputs by role (operands.def): a role the epilogue
// reads is taken here, next to the code that reads it.
inline Args make_args(const GemmProblem& p, void* out, const void* const (&in)[kNumRoles]) {
  return Args{out, in[static_cast<int>(Role::kC)], static_cast<const float*>(in[static_cast<int>(Role::kBias)]),
              p.alpha, static_cast<const float*>(in[static_cast<int>(Role::kScale)]), static_cast<int32_t>(p.activation),
              static_cast<int32_t>(p.out_type)};
}

// What every GEMM kernel receives besides its two tensor maps (identical for sm_90a and sm_100a).
struct KernelParams {
  int m, n, k, batch;
  int a_batched, b_batched;  // 0: the operand is broadcast over the batch (tensor-map batch index 0)
  Args epi;
  // Split-K / swap-AB kernels only (kPartialOut): the f32 workspace, its row pitch (floats, even) and
  // the number of K splits. Null / 0 / 1 otherwise. A dense sm_90a entry whose last wave is shared out
  // along K (sched::TailSplit; menu.h plans it): the workspace (the sharing CTAs' f32 partial sums, then their
  // ready flags), the number of tiles left over after the whole waves (in ws_ld) and of sharing CTAs; a
  // swap-AB entry's (menu::swap_tail: one K split, finished in the kernel) the same, minus the tiles in ws_ld.
  // (No fields of their own: a larger struct made ptxas spill in the block-scaled kernel.)
  float* ws;
  int ws_ld;
  int splits;
  // Block-scaled kernels only (GemmProblem::sf_vec > 0): the UE8M0 scales of A and B, bytes between
  // batches, 4-column groups per 128 rows (ceil(K / sf_vec / 4)) and the layout (GemmProblem::sf_layout:
  // 0 plain, 1 the 128x4 tiles; the sm_100a kernel reads 1 only). Null / 0 otherwise.
  const uint8_t* sfa;
  const uint8_t* sfb;
  int64_t sfa_batch, sfb_batch;
  int sf_col_blocks;
  int sf_layout;
};

__device__ __forceinline__ float load_out(const void* base, int32_t t, int64_t idx) {
  if (t == static_cast<int32_t>(DType::kF32)) return static_cast<const float*>(base)[idx];
  if (t == static_cast<int32_t>(DType::kBF16)) return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[idx]);
  return __half2float(static_cast<const __half*>(base)[idx]);
}

// Applies the activation to every accumulator register. One uniform switch per tile, each case a
// straight unrolled loop: the epilogue stays small in the instruction cache.
template <int N>
__device__ __forceinline__ void activate(float (&v)[N], int32_t activation) {
  switch (static_cast<Activation>(activation)) {
    case Activation::kRelu:
#pragma unroll
      for (int i = 0; i < N; ++i) v[i] = apply_activation(v[i], Activation::kRelu);
      break;
    case Activation::kGelu:
#pragma unroll
      for (int i = 0; i < N; ++i) v[i] = apply_activation(v[i], Activation::kGelu);
      break;
    case Activation::kGeluTanh:
#pragma unroll
      for (int i = 0; i < N; ++i) v[i] = apply_activation(v[i], Activation::kGeluTanh);
      break;
    case Activation::kSilu:
#pragma unroll
      for (int i = 0; i < N; ++i) v[i] = apply_activation(v[i], Activation::kSilu);
      break;
    default:
      break;
  }
}

// Packs two floats into the 32-bit word of two 16-bit outputs.
template <typename T>
__device__ __forceinline__ uint32_t pack2(float a, float b);
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float a, float b) {
  __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<uint32_t*>(&h);
}
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float a, float b) {
  __half2 h = __floats2half2_rn(a, b);
  return *reinterpret_cast<uint32_t*>(&h);
}

// The 16 bytes of output type T holding v[j .. j + 16 / sizeof(T)) (4 f32, or 8 packed 16-bit values).
template <typename T, int kCols>
__device__ __forceinline__ uint4 pack_unit(const float (&v)[kCols], int j) {
  uint32_t w[4];
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int q = 0; q < 4; ++q) w[q] = __float_as_uint(v[j + q]);
  } else {
#pragma unroll
    for (int q = 0; q < 4; ++q) w[q] = pack2<T>(v[j + 2 * q], v[j + 2 * q + 1]);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// Finishes and stores one row segment of kCols consecutive outputs (row, col0 .. col0 + kCols - 1),
// held by one thread (the tcgen05.ld 32x32b layout: a thread owns a row). 16-byte stores when the whole
// segment is in bounds and aligned, else masked element stores.
template <int kCols, typename T>
__device__ __forceinline__ void store_row_segment(const float (&v)[kCols], T* out_row, int col0, int n, bool vec_ok) {
  constexpr int kPerVec = 16 / sizeof(T);
  if (vec_ok && col0 + kCols <= n) {
#pragma unroll
    for (int j = 0; j < kCols; j += kPerVec) *reinterpret_cast<uint4*>(out_row + col0 + j) = pack_unit<T>(v, j);
  } else {
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      if (col0 + j < n) {
        if constexpr (sizeof(T) == 4) out_row[col0 + j] = v[j];
        else {
          const uint32_t w = pack2<T>(v[j], 0.f);
          out_row[col0 + j] = *reinterpret_cast<const T*>(&w);
        }
      }
    }
  }
}

// alpha times the `scale` operand when there is one: what every epilogue multiplies the accumulators by.
__device__ __forceinline__ float effective_alpha(const Args& e) { return e.scale != nullptr ? e.alpha * *e.scale : e.alpha; }

// The epilogue math for a row segment, in place: y = act(effective_alpha * acc + bias) + c. `c` is read only where the row is inside the output (`row_ok`)
// and the column < n.
template <int kCols>
__device__ __forceinline__ void row_segment_math(float (&v)[kCols], const Args& e, int64_t row_index, int col0,
                                                 int n, bool row_ok) {
  const float alpha = effective_alpha(e);
  if (alpha != 1.0f) {
#pragma unroll
    for (int j = 0; j < kCols; ++j) v[j] *= alpha;
  }
  if (e.bias != nullptr) {
#pragma unroll
    for (int j = 0; j < kCols; ++j) v[j] += (col0 + j < n) ? e.bias[col0 + j] : 0.f;
  }
  activate(v, e.activation);
  if (e.c != nullptr && row_ok) {
    const int64_t base = row_index * n;
#pragma unroll
    for (int j = 0; j < kCols; ++j)
      if (col0 + j < n) v[j] += load_out(e.c, e.out_type, base + col0 + j);
  }
}

// True when the epilogue is a plain cast (alpha 1, no scale, bias, activation or c), as in most decode
// GEMMs: the single-split swap-AB / split-K kernels then store without running the epilogue math's code,
// whose first execution in each CTA (eight inlined copies at the end of a decode tile) cost ~1.6 us per
// GEMM in instruction fetches (scripts/stream_probe.cu, H200, 2026-11-24: 16 x 4096 x 4096 13.0 us with
// the math, 11.4 with plain stores, 11.1 with none).
__host__ __device__ __forceinline__ bool plain(const Args& e) {
  return e.alpha == 1.0f && e.scale == nullptr && e.bias == nullptr && e.c == nullptr &&
         e.activation == static_cast<int32_t>(Activation::kNone);
}

// One output element stored as it is (a plain() epilogue).
__device__ __forceinline__ void store_element(float v, const Args& e, int64_t row_index, int col, int n) {
  const int64_t o = row_index * n + col;
  if (e.out_type == static_cast<int32_t>(DType::kF32)) static_cast<float*>(e.out)[o] = v;
  else if (e.out_type == static_cast<int32_t>(DType::kBF16)) static_cast<__nv_bfloat16*>(e.out)[o] = __float2bfloat16_rn(v);
  else static_cast<__half*>(e.out)[o] = __float2half_rn(v);
}

// One output element (row_index, col), finished and stored alone: the split-K / swap-AB kernels with a
// single split, whose accumulator layout runs across output rows (swap-AB: a thread holds an output
// column), finish the output themselves instead of writing partial sums for a reduce pass.
__device__ __forceinline__ void finish_element(float v, const Args& e, int64_t row_index, int col, int n) {
  float a[1] = {v};
  row_segment_math<1>(a, e, row_index, col, n, true);
  store_element(a[0], e, row_index, col, n);
}

// The whole epilogue for a row segment inside the output: row_segment_math, cast, store.
template <int kCols>
__device__ __forceinline__ void finish_row_segment(float (&v)[kCols], const Args& e, int64_t row_index, int col0,
                                                   int n) {
  if (!plain(e)) row_segment_math<kCols>(v, e, row_index, col0, n, true);  // (see plain())
  const int64_t base = row_index * n;
  if (e.out_type == static_cast<int32_t>(DType::kF32)) {
    float* o = static_cast<float*>(e.out) + base;
    store_row_segment<kCols>(v, o, col0, n, (n % 4) == 0 && (reinterpret_cast<uintptr_t>(e.out) % 16) == 0);
  } else if (e.out_type == static_cast<int32_t>(DType::kBF16)) {
    __nv_bfloat16* o = static_cast<__nv_bfloat16*>(e.out) + base;
    store_row_segment<kCols>(v, o, col0, n, (n % 8) == 0 && (reinterpret_cast<uintptr_t>(e.out) % 16) == 0);
  } else {
    __half* o = static_cast<__half*>(e.out) + base;
    store_row_segment<kCols>(v, o, col0, n, (n % 8) == 0 && (reinterpret_cast<uintptr_t>(e.out) % 16) == 0);
  }
}

}  // namespace jax_tmem::epilogue
