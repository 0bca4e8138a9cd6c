// jax_tmem: sm_90a's decode entries (Split::kDecode: the mma.sync kernel and its wgmma form,
// kernels/dense_decode.cuh): which operand families they read, and when the heuristic takes them (host
// code, no CUDA; included by menu.h, whose sm90_plan asks these first).
#pragma once

#include <cstdint>

#include "jax_tmem/gemm_problem.h"
#include "jax_tmem/kernel_config.h"

namespace jax_tmem::menu {

inline constexpr bool fp8_type(DType t) { return t == DType::kE4M3 || t == DType::kE5M2; }

// 16-bit activations x an fp8 weight (bf16 or f16 x e4m3 or e5m2): only the decode entries read the mix,
// the weight in place at one byte per element, widened on chip (exactly) to the activations' type.
inline constexpr bool mixed_decode_pair(DType a, DType b) {
  return (a == DType::kBF16 || a == DType::kF16) && fp8_type(b);
}

// sm_90a's decode entries (Split::kDecode, kernels/dense_decode.cuh) read K-major activations and a
// weight stored either way ((N, K) or (K, N)): two 16-bit operands of one type, fp8 (e4m3 / e5m2, any
// mix), or a mixed_decode_pair. An entry of block_m weight rows reads a weight stored (K, N) in k-rows of
// block_m elements, which must be 32 to 128 bytes (its TMA swizzle), and one stored (N, K) with at most 64
// rows (128 spill registers). The wgmma form (wg) takes a mixed pair's weight stored (K, N) only (its
// fragments in wgmma's own K order: the kernel's kMix comment).
inline constexpr bool mma_decode_family(DType a, DType b, bool amn, bool /*bmn*/) {
  const bool fp8 = fp8_type(a) && fp8_type(b);
  return !amn && ((a == b && (a == DType::kBF16 || a == DType::kF16)) || fp8 || mixed_decode_pair(a, b));
}
inline constexpr bool mma_decode_reads(DType a, DType b, bool amn, bool bmn, int block_m, bool wg = false,
                                       int cluster = 1) {
  const int row_bytes = block_m * dtype_bytes(b);
  return mma_decode_family(a, b, amn, bmn) && (bmn ? row_bytes >= 32 && row_bytes <= 128 : block_m <= 64) &&
         !(wg && !bmn && mixed_decode_pair(a, b)) && (cluster <= 1 || wg || bmn);
}
inline constexpr const char* kMmaDecodeOperands =
    "the decode entries (mma.sync and its wgmma form) read a K-major lhs (the activations) and bfloat16 x bfloat16, "
    "float16 x float16, fp8 x fp8 or 16-bit x fp8; per entry, a weight stored (N, K) in CTAs of up to 64 weight rows "
    "(16-bit x fp8: mma.sync entries only), and one stored (K, N) in k-rows of 32 to 128 bytes (16-bit: 16-64 weight "
    "rows per CTA, fp8: 32-128; the mma.sync entry with K split over a cluster, 54: a (K, N) weight only)";

// A weight-multicast pair (cluster_m < -1: entries 39, 48, 50) multicasts block_m / 2 weight rows from each CTA; an
// MN-major (16-bit) weight comes in 64-row pieces, so the 192-row pair (50) reads a K-major weight only.
inline constexpr bool pair_reads_weight(int block_m, int cluster_m, bool weight_mn_major) {
  return cluster_m >= -1 || !weight_mn_major || (block_m / -cluster_m) % 64 == 0;
}
inline constexpr const char* kPairMnWeight =
    "the 192-row weight-multicast entry reads a K-major weight (each CTA of its pair multicasts 96 rows; an MN-major "
    "weight is loaded in 64-row pieces)";
// Why a forced entry cannot read the problem's operands (nullptr: it can): the forced plan's check at trace time.
inline const char* forced_entry_refusal(const KernelConfig& c, const GemmProblem& p) {
  if (c.split == Split::kDecode && !mma_decode_reads(p.a_type, p.b_type, p.a_mn_major, p.b_mn_major, c.block_m,
                                                     c.schedule == Schedule::kWgmma, c.cluster_m))
    return kMmaDecodeOperands;
  if (c.swap_ab() && !pair_reads_weight(c.block_m, c.cluster_m, p.b_mn_major)) return kPairMnWeight;
  return nullptr;
}


// Up to 8 tokens (kSm90MmaDecodeMaxM; the 16-token entries 26, 27, 29 are sweep-only, see below) with a
// 16-bit weight, or fp8 stored (N, K): the mma.sync decode entries (Split::kDecode), K split over the CTA's
// warps. Measured first in a probe, bf16. A weight stored (N, K): 16 weight rows per CTA (a 4096-row weight: 256 CTAs, two or more per SM,
// where the 64-row wgmma tiles make 64 and need K splits and a reduce pass to fill the GPU). H200,
// 2026-11-26, scripts/stream_probe.cu dd (each GEMM 200 times in a CUDA graph, 6 weights in turn), us
// against the 64-row swap-AB entry at 1 split (both with the weight's L2 promotion off): M = 1: 4096 x 4096
// 10.3 / 11.5, 6144 x 4096 13.9 / 15.4, 28672 x 4096 56.6 / 57.9-59.4, 4096 x 14336 28.9 / 30.6; M = 16
// (two 8-token tiles): 10.8 / 11.5, 14.8 / 15.6, 59.7 with 32-row CTAs (60.6 with 16) / 58.8-59.7, 29.7 / 30.4.
// A weight stored (K, N) (Flax's): 64 weight rows per CTA, 128 contiguous bytes of each k-row per TMA box
// (16 and 32 rows read 32- and 64-byte pieces: 28672 x 4096 at M = 1 78.7 / 66.1 us against 57.0 with 64;
// M = 1 / 16, us, 64 rows with 4 / 3 stages: 4096 x 4096 10.6 / 11.3 and 11.2 / 12.0, 6144 x 4096 14.5 / 14.2
// and 15.9 / 15.1, 28672 x 4096 59.8 / 57.0 and 63.9 / 66.1, 4096 x 14336 29.3 / 31.5 and 30.4 / 33.0).
// In the decode step (bench_decode.py, 8B / 70B layers, bf16, 3 rounds, H200 2026-11-26, x XLA, the landed code
// -> these entries): (N, K) M = 1 0.92 -> 1.01 / 0.92 -> 1.01, M = 8 0.93 -> 0.98 / 0.96 -> 1.00; (K, N) M = 1
// 0.90 -> 0.94 / 0.91 -> 0.96, M = 8 0.91 -> 0.91 / 0.93 -> 0.96. Two token tiles (M 9-16: 26, 27, 29) did not
// pay: (N, K) 0.95 -> 0.97 / 0.97 -> 0.96, (K, N) 0.92 -> 0.89 / 0.95 -> 0.95, so the heuristic takes them to
// M = 8 (the 16-token entries stay in the sweep build). fp8 weights stored (N, K) (entry 25 with m16n8k32;
// 05:28-05:31, e4m3, us per layer, the 64-row swap-AB entry -> 25): 8B M = 1 71.4 -> 68.3, M = 8 72.8 -> 70.3,
// 70B M = 1 217.2 -> 215.3, M = 8 219.5 -> 222.3.
inline constexpr int kSm90MmaDecodeMaxM = 8;
// 16-bit x fp8 (mixed_decode_pair): the weight stored (K, N) only; one stored (N, K) goes to XLA, whose GEMM
// widens it as well (bench_decode.py --dtypes w8a16, 3 rounds, H200 2026-11-27, xla / ours with entries 25 /
// 26 forced by the plan of the time: 8B M = 1 / 8 / 16 / 64 1.00 / 0.88 / 0.74 / 0.28, 70B 0.89 / 0.86 / 0.79 /
// 0.26; the widening's conversions bound the 16-row CTAs, and 26 reads the weight once per 16 tokens).
inline bool sm90_mma_decode(const GemmProblem& p) {
  return p.m <= kSm90MmaDecodeMaxM && mma_decode_family(p.a_type, p.b_type, p.a_mn_major, p.b_mn_major) &&
         !(mixed_decode_pair(p.a_type, p.b_type) && !p.b_mn_major);
}
// A weight stored (K, N) (2026-11-26 07:40, stream_probe.cu dd, H200, us at M = 1, (N, K) in brackets; 4 / 3
// stages of 64 rows, 2 of 128): bf16 4096 x 4096 10.06 / 10.92 (10.39), 6144 x 4096 14.28 / 13.75 (14.00),
// 28672 x 4096 58.24 / 56.93 (56.68), 4096 x 14336 28.78 / 31.36 (28.88); e4m3 7.19 / 7.90 / 11.03 (6.06),
// 9.56 / 8.89 / 12.00 (8.08), 37.89 / 36.93 / 33.38 (31.58), 16.94 / 19.78 / 28.79 (15.82): 128-row CTAs (fp8
// only: 128-byte k-rows) once they fill the SMs, 4 stages while the 64-row CTAs fill half of them (a deeper
// ring for the few), else 3 (two CTAs per SM).
inline Sm90 sm90_mma_decode_entry(const GemmProblem& p, int num_sms) {
  if (!p.b_mn_major) return Sm90::k16x8Decode;
  if (dtype_bytes(p.b_type) == 1 && p.n >= int64_t(128) * num_sms) return Sm90::k128x8DecodeMN;
  return (p.n + 63) / 64 * 2 <= num_sms ? Sm90::k64x8DecodeMN : Sm90::k64x8DecodeMN3;
}

// An fp8 weight stored (K, N) at 9-64 tokens: the same kernel's wgmma form (entries 32-34: the weight's A
// fragments built in registers as above, wgmma m64 n16-n64 with A from registers, a warpgroup per K chunk;
// no shared-memory transpose), at 17-64 tokens only while its 64-row CTAs fit in about 2 waves: each CTA
// reads all the activations again, as many bytes as its weight rows at M = 64. sweep_configs.py, e4m3,
// weight (K, N), TFLOP/s of the transposing swap-AB entry (11 / 13, their K splits) / the wgmma entry (32 /
// 34), H200 2026-11-26 08:04: M = 16: 4096 x 4096 43 / 68, 28672 x 4096 94 / 94, 4096 x 14336 81 / 106; M =
// 64: 142 / 192, 342 / 297, 285 / 305. (Weights stored (N, K): the wgmma form lost to the swap-AB
// entries 15 / 17 at M = 64, 350-405 against 319, and tied at M = 16: not taken.)
// 16-bit x fp8 (K, N) at 9-32 tokens where the 64-row CTAs fill >= 90 % of the SMs, else XLA's GEMM (which widens
// the weight too): bench_decode.py --dtypes w8a16, xla / ours, M = 16 / 32 / 64, H200 2026-11-27: this form on every
// GEMM: 70B (N 8192-57344: 128-896 CTAs) 1.17 / 1.20 / 1.03, 8B (N 4096 / 6144: 64 / 96 CTAs, and 28672) 0.99 /
// 0.94 / 0.78; where it fills: 70B 1.17 / 1.20 / 1.04, 8B 1.00 / 1.01 / 0.89; the same on an H100: 70B 0.98 / 0.97
// / 0.99, 8B 0.95 / 0.94 / 0.89 (each CTA reads every token again: 64 of them cost what its weight rows do).
inline constexpr int kSm90WgDecodeMaxM = 64, kSm90MixedWgMaxM = 32;
inline bool sm90_wg_decode(const GemmProblem& p, int num_sms) {
  const bool fills = (p.n + 63) / 64 * 10 >= int64_t(num_sms) * 9 && p.m <= kSm90MixedWgMaxM;
  return p.m > kSm90MmaDecodeMaxM && p.m <= kSm90WgDecodeMaxM && p.b_mn_major && dtype_bytes(p.b_type) == 1 &&
         mma_decode_family(p.a_type, p.b_type, p.a_mn_major, p.b_mn_major) &&
         (mixed_decode_pair(p.a_type, p.b_type) ? fills : p.m <= 16 || p.n <= int64_t(128) * num_sms);
}
inline Sm90 sm90_wg_decode_entry(const GemmProblem& p) {
  return p.m <= 16 ? Sm90::k64x16DecodeWg : p.m <= 32 ? Sm90::k64x32DecodeWg : Sm90::k64x64DecodeWg;
}

}  // namespace jax_tmem::menu
