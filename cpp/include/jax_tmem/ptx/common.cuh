// jax_tmem: small PTX helpers shared by every arch. The only places with inline asm are ptx/*.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace jax_tmem::ptx {

// The global nanosecond timer (%globaltimer): scripts/stream_probe.cu's per-CTA timelines (JT_TIMELINE).
__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
  return t;
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Pins a value where it is computed: the empty volatile asm may have changed it, so the compiler keeps it live
// instead of rematerializing its computation later (e.g. in every iteration of a hot loop). Emits nothing.
__device__ __forceinline__ void pin(uint32_t& x) { asm volatile("" : "+r"(x)); }
__device__ __forceinline__ void pin(uint64_t& x) { asm volatile("" : "+l"(x)); }

// a / b as XLA's GPU programs divide float32 (LLVM NVPTX's default lowering of fdiv): div.full.f32, at
// most 2 ulp from the IEEE quotient (measured on the H200, 2026-11-23: 29 % of random quotients differ
// from IEEE, by <= 2 ulp; an exact 2.5 = (2.5 s) / s came out 2.5000002 for 8 % of e4m3 values s). Kernels
// that must reproduce XLA's rounding bit for bit (the NVFP4 quantizer) divide with this.
__device__ __forceinline__ float div_full_f32(float a, float b) {
  float q;
  asm("div.full.f32 %0, %1, %2;" : "=f"(q) : "f"(a), "f"(b));
  return q;
}

// 1 / b, MUFU.RCP (PTX rcp.approx.ftz.f32): what ptxas's expansion of div.full.f32(a, b) multiplies a by
// when 2^-126 <= |b| <= 2^126 (outside that range it first scales both operands: sm_90a SASS of CUDA
// 13.0, 2026-11-25). So for such b, a * rcp_approx_ftz(b) is div_full_f32(a, b) bit for bit, and a kernel
// dividing many values by one b takes the reciprocal once.
__device__ __forceinline__ float rcp_approx_ftz(float b) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(b));
  return r;
}

// tanh, MUFU.TANH (PTX tanh.approx.f32, sm_75+: maximum relative error ~2^-11, below a 16-bit output's rounding):
// the derivative epilogue's activations (kernels/sm90_act_grad.cuh).
__device__ __forceinline__ float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// max(a, b) that is NaN when either is (PTX ISA: max.NaN.f32, sm_80+): the fused quantize takes a block's
// amax and its NaN flag in one.
__device__ __forceinline__ float max_nan_f32(float a, float b) {
  float d;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
}

// One elected lane of the calling warp (PTX ISA: elect.sync, sm_90+).
// Shared-memory loads and stores by 32-bit shared address (a pointer computed from the dynamic shared
// memory's address has lost its address space: the compiler would emit generic LD/ST through L1TEX).
__device__ __forceinline__ float lds_f32(uint32_t addr) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ float2 lds_v2f32(uint32_t addr) {
  float2 v;
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ void sts_f32(uint32_t addr, float v) {
  asm volatile("st.shared.f32 [%0], %1;" ::"r"(addr), "f"(v) : "memory");
}
__device__ __forceinline__ uint32_t lds_u32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
  return v;
}
// (the weight-only 4-bit kernel reads weights, scales and activations from its TMA ring with these)
__device__ __forceinline__ uint4 lds_v4(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}
__device__ __forceinline__ uint32_t lds_u8(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.u8 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ uint32_t lds_u16(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.u16 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ void sts_v4_u32(uint32_t addr, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}

// Byte permute: byte i of the result is byte sel[4i + 3 : 4i] of {b, a} (0-3 from a, 4-7 from b).
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

// A 16-byte global load that bypasses L1 allocation (read-once streams, e.g. decode weights), through
// the non-coherent path: the data must not change during the kernel.
__device__ __forceinline__ uint4 ldg_stream_v4(const void* p) {
  uint4 r;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}

// mma.sync m16n8k16, bf16 inputs, f32 accumulators in place (sm_80+): a 4 registers (row-major 16x16),
// b 2 registers (column-major 16x8), d[0..3] = rows g / g + 8, columns 2q, 2q + 1 of the quad layout.
__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The same with f16 inputs.
__device__ __forceinline__ void mma_m16n8k16_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// mma.sync m16n8k32 with fp8 inputs (sm_89+): A e4m3 or (kAE5M2) e5m2, B likewise; the fragments hold four
// 8-bit elements per register where m16n8k16's hold two 16-bit ones.
template <bool kAE5M2, bool kBE5M2>
__device__ __forceinline__ void mma_m16n8k32_fp8(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#define JT_MMA_FP8(types)                                                                                        \
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32." types ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "     \
               "{%0,%1,%2,%3};"                                                                                  \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                                 \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))
  if constexpr (!kAE5M2 && !kBE5M2) JT_MMA_FP8("e4m3.e4m3");
  else if constexpr (!kAE5M2) JT_MMA_FP8("e4m3.e5m2");
  else if constexpr (!kBE5M2) JT_MMA_FP8("e5m2.e4m3");
  else JT_MMA_FP8("e5m2.e5m2");
#undef JT_MMA_FP8
}

__device__ __forceinline__ bool elect_one() {
  uint32_t pred = 0;
  asm volatile(
      "{\n.reg .b32 %%rx;\n.reg .pred %%px;\n"
      "elect.sync %%rx|%%px, %1;\n@%%px mov.s32 %0, 1;\n}\n"
      : "+r"(pred)
      : "r"(0xffffffffu));
  return pred != 0;
}

// Named barrier `id` (1..15; 0 is __syncthreads) over `count` threads (a multiple of 32).
__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}
// Arrives on named barrier `id` without waiting (the producer side of a bar.sync handshake).
__device__ __forceinline__ void named_barrier_arrive(uint32_t id, uint32_t count) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
}

// Orders generic-proxy shared-memory writes before later async-proxy (TMA/tensor core) reads.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Programmatic dependent launch (PTX ISA: griddepcontrol, sm_90+). launch_dependents: this CTA no
// longer holds back the launch of the grid that depends on ours (it may start and wait);
// wait: block until every prerequisite grid has completed and its memory operations are visible
// (a no-op when the grid was launched without a programmatic dependency).
__device__ __forceinline__ void griddep_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
__device__ __forceinline__ void griddep_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// stmatrix (PTX ISA, sm_90+): the warp stores four 8x8 matrices of 16-bit values; register ri of lane
// l holds row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 of matrix i (the mma / wgmma accumulator
// fragment layout), and lanes 8i .. 8i + 7 give the shared addresses of matrix i's 8 rows (16 bytes
// each). One instruction per 16 values a lane holds, where st.shared.b32 takes four.
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}

// The same, each matrix stored transposed: lanes 8i .. 8i + 7 give the addresses of matrix i's 8 columns.
__device__ __forceinline__ void stmatrix_x4_trans(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}

// ldmatrix (sm_75+): the warp loads four 8x8 matrices of 16-bit values, lanes 8i .. 8i + 7 giving the
// shared addresses of matrix i's 8 rows (16 bytes each); register i of lane l receives row l / 4, columns
// 2 (l % 4), + 1 of matrix i, or with .trans column l / 4, rows 2 (l % 4), + 1 (mma's A / B fragments of
// a tile stored the other way round).
template <bool kTrans>
__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t (&r)[4]) {
  if constexpr (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}

}  // namespace jax_tmem::ptx
