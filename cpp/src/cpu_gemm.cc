// jax_tmem: the CPU FFI handler of the canonical GEMM (see gemm_problem.h). It is the reference the
// GPU kernels are tested against and lets CPU CI exercise the real FFI plumbing (attributes,
// majorness, strides, broadcast batches, the fused epilogue). Operands are converted to f32 panels
// and multiplied with a cache-blocked loop nest that the compiler vectorises; accumulation is f32.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "jax_tmem/epilogue_math.h"
#include "jax_tmem/ffi_attrs.h"
#include "jax_tmem/host_convert.h"

namespace jax_tmem {

// An element of any table type as float, through the generic decoder of host_convert.h (which reads
// the format from the type's name, once per operand); float32 and bfloat16 directly. 4-bit types are
// packed two per byte, element 2i in the low nibble (XLA's E(4) layout, on the CPU as on the GPU).
float load_as_float(const void* base, const host::Format& f, int64_t idx) {
  switch (f.bits) {
    case 4: return host::decode(f, (static_cast<const uint8_t*>(base)[idx / 2] >> (4 * (idx & 1))) & 0xF);
    case 8: return host::decode(f, static_cast<const uint8_t*>(base)[idx]);
    case 16:
      if (f.kind == host::Format::kIeee && f.e == 8) return host::bf16_to_float(static_cast<const uint16_t*>(base)[idx]);
      return host::decode(f, static_cast<const uint16_t*>(base)[idx]);
    case 32: return static_cast<const float*>(base)[idx];
    default: return NAN;
  }
}

void store_from_float(void* base, DType t, int64_t idx, float v) {
  switch (t) {
    case DType::kF32: static_cast<float*>(base)[idx] = v; break;
    case DType::kBF16: static_cast<uint16_t*>(base)[idx] = host::float_to_bf16(v); break;
    case DType::kF16: static_cast<uint16_t*>(base)[idx] = host::float_to_f16(v); break;
    default: break;
  }
}

constexpr int64_t kBlockM = 64, kBlockN = 256, kBlockK = 256;

// Loads an element as the accumulation type: float for floating operands, exact int32 for int8.
template <typename Acc>
Acc load_as(const void* base, const host::Format& f, int64_t idx) {
  if constexpr (std::is_same_v<Acc, int32_t>) return static_cast<const int8_t*>(base)[idx];
  else return load_as_float(base, f, idx);
}

// Acc = float (f32 accumulation of any float type) or int32_t (int8 x int8, exact like the kernels).
// Block scales of the block-scaled GEMM (p.sf_vec > 0; null otherwise): element (row, kk) of an operand
// is multiplied by its block's scale (operands.def; layout p.sf_layout, GemmProblem::sf_index).
struct BlockScales {
  const void* sfa = nullptr;
  const void* sfb = nullptr;
  float global = 1.0f;  // the scale operand (NVFP4's global scale)
};

template <typename Acc>
void cpu_gemm(const GemmProblem& p, const void* a, const void* b, const float* bias, const void* c,
              void* out, BlockScales sf = {}) {
  std::vector<Acc> pa(kBlockM * kBlockK), pb(kBlockK * kBlockN), acc(kBlockM * kBlockN);
  const host::Format fa = host::format_of(p.a_type), fb = host::format_of(p.b_type), fo = host::format_of(p.out_type);
  // Block scales: element (row, kk) of an operand in batch bi is multiplied by its block's scale.
  const host::Format fs = host::format_of(p.sf_type());
  const int64_t sfa_batch = sf.sfa ? p.sf_per_batch(p.m) : 0, sfb_batch = sf.sfb ? p.sf_per_batch(p.n) : 0;
  auto scale = [&](const void* sfp, int64_t batch_offset, int64_t row, int64_t kk) {
    return load_as_float(sfp, fs, batch_offset + p.sf_index(row, kk / p.sf_vec));
  };
  for (int64_t bi = 0; bi < p.batch; ++bi) {
    const int64_t a_off = bi * p.stride_a, b_off = bi * p.stride_b;
    const int64_t sfa_off = (p.stride_a != 0 ? bi : 0) * sfa_batch, sfb_off = (p.stride_b != 0 ? bi : 0) * sfb_batch;
    for (int64_t m0 = 0; m0 < p.m; m0 += kBlockM) {
      const int64_t mb = std::min(kBlockM, p.m - m0);
      for (int64_t n0 = 0; n0 < p.n; n0 += kBlockN) {
        const int64_t nb = std::min(kBlockN, p.n - n0);
        std::fill(acc.begin(), acc.end(), Acc(0));
        for (int64_t k0 = 0; k0 < p.k; k0 += kBlockK) {
          const int64_t kb = std::min(kBlockK, p.k - k0);
          // Pack A[m0:m0+mb, k0:k0+kb] row-major (mb x kb) and B[k0.., n0..] as (kb x nb).
          for (int64_t i = 0; i < mb; ++i)
            for (int64_t kk = 0; kk < kb; ++kk) {
              int64_t idx = p.a_mn_major ? (k0 + kk) * p.lda + (m0 + i) : (m0 + i) * p.lda + (k0 + kk);
              pa[i * kBlockK + kk] = load_as<Acc>(a, fa, a_off + idx);
              if (sf.sfa) pa[i * kBlockK + kk] *= scale(sf.sfa, sfa_off, m0 + i, k0 + kk);
            }
          for (int64_t kk = 0; kk < kb; ++kk)
            for (int64_t j = 0; j < nb; ++j) {
              int64_t idx = p.b_mn_major ? (k0 + kk) * p.ldb + (n0 + j) : (n0 + j) * p.ldb + (k0 + kk);
              pb[kk * kBlockN + j] = load_as<Acc>(b, fb, b_off + idx);
              if (sf.sfb) pb[kk * kBlockN + j] *= scale(sf.sfb, sfb_off, n0 + j, k0 + kk);
            }
          for (int64_t i = 0; i < mb; ++i) {
            Acc* __restrict__ arow = &acc[i * kBlockN];
            for (int64_t kk = 0; kk < kb; ++kk) {
              const Acc av = pa[i * kBlockK + kk];
              const Acc* __restrict__ brow = &pb[kk * kBlockN];
              for (int64_t j = 0; j < nb; ++j) arow[j] += av * brow[j];
            }
          }
        }
        // Epilogue: y = act(alpha * acc + bias) + c, or (act_grad) (alpha * acc + bias) * act'(c)
        for (int64_t i = 0; i < mb; ++i)
          for (int64_t j = 0; j < nb; ++j) {
            float v = p.alpha * sf.global * static_cast<float>(acc[i * kBlockN + j]);
            if (bias) v += bias[n0 + j];
            const int64_t o = (bi * p.m + m0 + i) * p.n + n0 + j;
            if (p.act_grad) {
              v *= apply_activation_grad(load_as_float(c, fo, o), p.activation);
            } else {
              v = apply_activation(v, p.activation);
              if (c) v += load_as_float(c, fo, o);
            }
            store_from_float(out, p.out_type, o, v);
          }
      }
    }
  }
}

ffi::Error cpu_gemm_handler(ffi::RemainingArgs args, ffi::Result<ffi::AnyBuffer> out,
                            ffi::Result<ffi::AnyBuffer> workspace, JAX_TMEM_GEMM_ATTR_PARAMS) {
  (void)workspace;  // the CPU loop nest needs no split-K workspace
  GemmProblem p;
  const void* in[kNumRoles];
  ffi::Error err = decode_problem(p, args, out, JAX_TMEM_GEMM_ATTR_ARGS, in);
  if (err.failure()) return err;
  const void* a = in[static_cast<int>(Role::kA)];
  const void* b = in[static_cast<int>(Role::kB)];
  const float* bias = static_cast<const float*>(in[static_cast<int>(Role::kBias)]);
  const void* c = in[static_cast<int>(Role::kC)];
  const float* gs = static_cast<const float*>(in[static_cast<int>(Role::kScale)]);
  const BlockScales sf{in[static_cast<int>(Role::kSFA)], in[static_cast<int>(Role::kSFB)], gs ? *gs : 1.0f};
  if (p.a_type == DType::kS8)
    cpu_gemm<int32_t>(p, a, b, bias, c, out->untyped_data(), BlockScales{nullptr, nullptr, sf.global});  // no block scales (validate)
  else
    cpu_gemm<float>(p, a, b, bias, c, out->untyped_data(), sf);
  return ffi::Error::Success();
}

}  // namespace jax_tmem

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxTmemCpuGemm, jax_tmem::cpu_gemm_handler,
                              JAX_TMEM_GEMM_BINDING());
