// jax_tmem: the one extension module. It hands the FFI handlers to Python as capsules (the Python
// package registers each target once, see jax_tmem/_ext.py) and reports how it was built, so a
// handler/jaxlib mismatch can be explained in plain words instead of "No FFI handler registered".
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <nanobind/stl/vector.h>

#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "jax_tmem/desc_sm100.h"
#include "jax_tmem/desc_sm90.h"
#include "jax_tmem/handlers.h"
#include "jax_tmem/menu.h"
#include "jax_tmem/tmem_plan.h"

namespace nb = nanobind;

namespace {

template <typename T>
nb::capsule encapsulate(T* fn) {
  static_assert(std::is_invocable_r_v<XLA_FFI_Error*, T, XLA_FFI_CallFrame*>,
                "an FFI handler must have type XLA_FFI_Error*(XLA_FFI_CallFrame*)");
  return nb::capsule(reinterpret_cast<void*>(fn));
}

// jax_tmem's dtype numbering from a numpy dtype name (kInvalid if none).
jax_tmem::DType dtype_from_name(const std::string& d) {
  for (auto t : {jax_tmem::DType::kF32, jax_tmem::DType::kBF16, jax_tmem::DType::kF16, jax_tmem::DType::kE4M3,
                 jax_tmem::DType::kE5M2, jax_tmem::DType::kS8})
    if (d == jax_tmem::dtype_name(t)) return t;
  return jax_tmem::DType::kInvalid;
}

// ---- jax_tmem.isa: the kernels' own encoders, with argument checks that raise ValueError ----------
using jax_tmem::desc::Elem;
using jax_tmem::desc::MmaKind;

MmaKind parse_kind(const std::string& k) {
  if (k == "f16") return MmaKind::kF16;
  if (k == "tf32") return MmaKind::kTF32;
  if (k == "f8f6f4") return MmaKind::kF8F6F4;
  if (k == "i8") return MmaKind::kI8;
  if (k == "mxf8f6f4") return MmaKind::kMXF8F6F4;
  if (k == "mxf4") return MmaKind::kMXF4;
  if (k == "mxf4nvf4") return MmaKind::kMXF4NVF4;
  throw std::invalid_argument("kind must be one of f16, tf32, f8f6f4, i8, mxf8f6f4, mxf4, mxf4nvf4; got '" + k + "'");
}

Elem parse_elem(const std::string& d) {
  if (d == "float16") return Elem::kF16;
  if (d == "bfloat16") return Elem::kBF16;
  if (d == "float32" || d == "tensorfloat32") return Elem::kTF32;
  if (d == "float8_e4m3fn") return Elem::kE4M3;
  if (d == "float8_e5m2") return Elem::kE5M2;
  if (d == "float6_e2m3fn") return Elem::kE2M3;
  if (d == "float6_e3m2fn") return Elem::kE3M2;
  if (d == "float4_e2m1fn") return Elem::kE2M1;
  if (d == "uint8") return Elem::kU8;
  if (d == "int8") return Elem::kS8;
  return Elem::kInvalid;
}

uint32_t elem_bits(Elem e) {
  switch (e) {
    case Elem::kTF32: return 32;
    case Elem::kF16: case Elem::kBF16: return 16;
    case Elem::kE2M3: case Elem::kE3M2: return 6;
    case Elem::kE2M1: return 4;
    default: return 8;
  }
}

bool parse_major(const std::string& s, const char* name) {
  if (s == "K") return false;
  if (s == "MN") return true;
  throw std::invalid_argument(std::string(name) + " must be 'K' or 'MN', got '" + s + "'");
}

uint32_t instr_desc(const std::string& kind_s, const std::string& a_dtype, const std::string& b_dtype,
                    const std::string& acc_dtype, uint32_t m, uint32_t n, const std::string& a_major,
                    const std::string& b_major, uint32_t sfa_id, uint32_t sfb_id, nb::object scale_dtype) {
  using namespace jax_tmem::desc;
  const MmaKind kind = parse_kind(kind_s);
  const Elem a = parse_elem(a_dtype), b = parse_elem(b_dtype);
  const int32_t fa = format_code(kind, a), fb = format_code(kind, b);
  if (fa < 0) throw std::invalid_argument("a_dtype " + a_dtype + " is not an operand type of kind::" + kind_s);
  if (fb < 0) throw std::invalid_argument("b_dtype " + b_dtype + " is not an operand type of kind::" + kind_s);
  if (kind == MmaKind::kF16 && a != b) throw std::invalid_argument("kind::f16 needs A and B of the same type (both float16 or both bfloat16)");
  const bool amn = parse_major(a_major, "a_major"), bmn = parse_major(b_major, "b_major");
  const uint32_t bits = elem_bits(a) < elem_bits(b) ? elem_bits(a) : elem_bits(b);
  if (const char* err = mma_shape_error(kind, m, n, amn, bmn, bits)) throw std::invalid_argument(err);
  if (is_block_scaled(kind)) {
    if (acc_dtype != "float32") throw std::invalid_argument("block-scaled kinds accumulate in float32 only");
    if (scale_dtype.is_none()) throw std::invalid_argument("block-scaled kinds need scale_dtype (float8_e8m0fnu, or float8_e4m3fn for mxf4nvf4)");
    const std::string sd = nb::cast<std::string>(scale_dtype);
    bool ue8m0;
    if (sd == "float8_e8m0fnu") ue8m0 = true;
    else if (sd == "float8_e4m3fn" && kind == MmaKind::kMXF4NVF4) ue8m0 = false;
    else throw std::invalid_argument("scale_dtype " + sd + " is not valid for kind::" + kind_s + " (UE8M0 everywhere; UE4M3 only for mxf4nvf4)");
    const uint32_t max_id = kind == MmaKind::kMXF8F6F4 ? 3 : 2;
    for (uint32_t id : {sfa_id, sfb_id}) {
      if (id > max_id) throw std::invalid_argument("sfa_id/sfb_id must be <= " + std::to_string(max_id) + " for kind::" + kind_s);
      if (kind != MmaKind::kMXF8F6F4 && (id % 2 != 0)) throw std::invalid_argument("sfa_id/sfb_id must be 0 or 2 for kind::" + kind_s);
      if (!ue8m0 && id != 0) throw std::invalid_argument("sfa_id/sfb_id must be 0 with UE4M3 scales (scale_vec::4X)");
    }
    return sm100_instr_desc_block_scaled(fa, fb, m, n, amn, bmn, ue8m0, sfa_id, sfb_id);
  }
  if (!scale_dtype.is_none()) throw std::invalid_argument("scale_dtype is only for block-scaled kinds");
  if (sfa_id || sfb_id) throw std::invalid_argument("sfa_id/sfb_id are only for block-scaled kinds");
  DFormat d;
  if (acc_dtype == "float32") d = DFormat::kF32;
  else if (acc_dtype == "float16") d = DFormat::kF16;
  else if (acc_dtype == "int32") d = DFormat::kS32;
  else throw std::invalid_argument("acc_dtype must be float32, float16 or int32, got " + acc_dtype);
  if (kind == MmaKind::kI8 ? d != DFormat::kS32 : d == DFormat::kS32)
    throw std::invalid_argument("kind::i8 accumulates in int32 and only kind::i8 does");
  if (kind == MmaKind::kTF32 && d != DFormat::kF32) throw std::invalid_argument("kind::tf32 accumulates in float32 only");
  return sm100_instr_desc(fa, fb, d, m, n, amn, bmn);
}

uint64_t smem_desc(uint32_t start_addr, uint32_t lbo, uint32_t sbo, uint32_t swizzle_bytes, const std::string& arch,
                   uint32_t base_offset) {
  using namespace jax_tmem::desc;
  for (auto [v, name] : {std::pair{start_addr, "start_addr"}, std::pair{lbo, "lbo"}, std::pair{sbo, "sbo"}}) {
    if (v % 16) throw std::invalid_argument(std::string(name) + " must be a multiple of 16 bytes");
    if (v >= (1u << 18)) throw std::invalid_argument(std::string(name) + " must be < 2^18 (shared memory window)");
  }
  if (base_offset > 7) throw std::invalid_argument("base_offset must be in [0, 7]");
  if (arch == "sm100") {
    Sm100Layout l;
    switch (swizzle_bytes) {
      case 0: l = Sm100Layout::kNone; break;
      case 32: l = Sm100Layout::k32B; break;
      case 64: l = Sm100Layout::k64B; break;
      case 128: l = Sm100Layout::k128B; break;
      default: throw std::invalid_argument("swizzle_bytes must be 0, 32, 64 or 128");
    }
    return sm100_smem_desc(start_addr, lbo, sbo, l, base_offset);
  }
  if (arch == "sm90") {
    Sm90Swizzle s;
    switch (swizzle_bytes) {
      case 0: s = Sm90Swizzle::kNone; break;
      case 32: s = Sm90Swizzle::k32B; break;
      case 64: s = Sm90Swizzle::k64B; break;
      case 128: s = Sm90Swizzle::k128B; break;
      default: throw std::invalid_argument("swizzle_bytes must be 0, 32, 64 or 128");
    }
    return sm90_smem_desc(start_addr, lbo, sbo, s, base_offset);
  }
  throw std::invalid_argument("arch must be 'sm100' or 'sm90', got '" + arch + "'");
}

nb::dict tmem_plan(uint32_t block_n, uint32_t acc_stages, uint32_t block_m, uint32_t k_tile, uint32_t sf_vec,
                   uint32_t sf_stages, uint32_t ctas_per_sm) {
  const jax_tmem::TmemPlan p =
      jax_tmem::make_tmem_plan(block_n, acc_stages, block_m, k_tile, sf_vec, sf_stages, ctas_per_sm);
  if (const char* err = p.error()) throw std::invalid_argument(err);
  nb::dict d;
  std::vector<uint32_t> acc, sfa, sfb;
  for (uint32_t s = 0; s < p.acc_stages; ++s) acc.push_back(p.acc_offset(s));
  for (uint32_t s = 0; s < p.sf_stages; ++s) { sfa.push_back(p.sfa_offset(s)); sfb.push_back(p.sfb_offset(s)); }
  d["acc_cols"] = p.acc_cols;
  d["acc_offsets"] = acc;
  d["sfa_cols"] = p.sfa_cols;
  d["sfb_cols"] = p.sfb_cols;
  d["sfa_offsets"] = sfa;
  d["sfb_offsets"] = sfb;
  d["used_cols"] = static_cast<uint32_t>(p.used_cols());
  d["alloc_cols"] = p.alloc_cols();
  d["ctas_per_sm"] = p.ctas_per_sm;
  return d;
}

}  // namespace

NB_MODULE(_jax_tmem, m) {
  m.def("isa_instr_desc", &instr_desc, nb::arg("kind"), nb::arg("a_dtype"), nb::arg("b_dtype"), nb::arg("acc_dtype"),
        nb::arg("m"), nb::arg("n"), nb::arg("a_major"), nb::arg("b_major"), nb::arg("sfa_id"), nb::arg("sfb_id"),
        nb::arg("scale_dtype").none());
  m.def("isa_smem_desc", &smem_desc, nb::arg("start_addr"), nb::arg("lbo"), nb::arg("sbo"), nb::arg("swizzle_bytes"),
        nb::arg("arch"), nb::arg("base_offset"));
  m.def("isa_tmem_plan", &tmem_plan, nb::arg("block_n"), nb::arg("acc_stages"), nb::arg("block_m"),
        nb::arg("k_tile"), nb::arg("sf_vec"), nb::arg("sf_stages"), nb::arg("ctas_per_sm"));

  m.def("registrations", []() {
    nb::dict cpu, cuda, d;
    cpu["jax_tmem_gemm"] = encapsulate(JaxTmemCpuGemm);
#if JAX_TMEM_HAS_CUDA
    cuda["jax_tmem_gemm"] = encapsulate(JaxTmemCudaGemm);
#endif
    d["cpu"] = cpu;
    d["cuda"] = cuda;
    return d;
  }, "FFI handler capsules by platform: {'cpu': {name: capsule}, 'cuda': {...}}.");

  m.def("build_info", []() {
    nb::dict d;
    d["jaxlib_version"] = JAX_TMEM_JAXLIB_BUILD_VERSION;
    d["ffi_api_version"] = nb::make_tuple(XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR);
    d["cuda"] = bool(JAX_TMEM_HAS_CUDA);
    d["cuda_reason"] = JAX_TMEM_CUDA_REASON;
    d["cuda_version"] = JAX_TMEM_CUDA_VERSION;
    d["cuda_archs"] = JAX_TMEM_CUDA_ARCHS_BUILT;
    return d;
  }, "How this extension was built: jaxlib/FFI API version of the headers, CUDA archs.");

  m.def("kernel_choice", [](const std::string& arch, int64_t batch, int64_t m_, int64_t n, int64_t k,
                            const std::string& a_dtype, int config, int num_sms, const std::string& out_dtype,
                            bool a_mn_major, int splits) {
    jax_tmem::GemmProblem p;
    p.batch = batch; p.m = m_; p.n = n; p.k = k; p.config = config; p.a_mn_major = a_mn_major; p.splits = splits;
    p.a_type = dtype_from_name(a_dtype);  // the element size sets the K blocks of a split
    p.out_type = dtype_from_name(out_dtype);  // its size decides whether rows allow the TMA-store epilogue
    if (p.a_type == jax_tmem::DType::kInvalid) throw std::invalid_argument("unknown a_dtype " + a_dtype);
    if (p.out_type != jax_tmem::DType::kF32 && p.out_type != jax_tmem::DType::kBF16 && p.out_type != jax_tmem::DType::kF16)
      throw std::invalid_argument("out_dtype must be float32, bfloat16 or float16");
    if (num_sms < 1) throw std::invalid_argument("num_sms must be >= 1");
    if (batch < 1 || m_ < 1 || n < 1 || k < 1) throw std::invalid_argument("batch, m, n, k must be >= 1");
    if (splits < 0 || splits > 64) throw std::invalid_argument("splits must be in [0, 64]");
    if (arch == "sm_90a") {
      if (!jax_tmem::menu::sm90_valid(config)) throw std::invalid_argument("not an sm_90a menu entry: " + std::to_string(config));
      const auto plan = jax_tmem::menu::sm90_plan(p, num_sms);
      return nb::make_tuple(plan.config, jax_tmem::menu::sm90_name(static_cast<jax_tmem::menu::Sm90>(plan.config)),
                            plan.splits, plan.ws_floats);
    }
    if (arch == "sm_100a" || arch == "sm_103a") {
      if (!jax_tmem::menu::sm100_valid(config)) throw std::invalid_argument("not an sm_100a menu entry: " + std::to_string(config));
      const auto plan = jax_tmem::menu::sm100_plan(p, num_sms);
      return nb::make_tuple(plan.config, jax_tmem::menu::sm100_name(static_cast<jax_tmem::menu::Sm100>(plan.config)),
                            plan.splits, plan.ws_floats);
    }
    throw std::invalid_argument("arch must be sm_90a, sm_100a or sm_103a, got " + arch);
  }, nb::arg("arch"), nb::arg("batch"), nb::arg("m"), nb::arg("n"), nb::arg("k"), nb::arg("a_dtype"),
     nb::arg("config"), nb::arg("num_sms"), nb::arg("out_dtype"), nb::arg("a_mn_major"), nb::arg("splits"),
     "The plan the CUDA dispatcher runs for this problem: (menu entry, its name, K splits, f32 workspace "
     "floats) - the same code (jax_tmem/menu.h) the launchers call.");

  m.def("cuda_device_count", []() {
#if JAX_TMEM_HAS_CUDA
    return jax_tmem::cuda_device_count();
#else
    return 0;
#endif
  }, "Number of CUDA devices this process's CUDA runtime sees, 0 if none.");

  m.def("cuda_device_sms", [](int dev) {
#if JAX_TMEM_HAS_CUDA
    return jax_tmem::cuda_device_sms(dev);
#else
    (void)dev;
    return 0;
#endif
  }, nb::arg("device"), "SM count of CUDA device `device` (ordinal), 0 if unknown.");

  m.def("cuda_device_cc", [](int dev) {
#if JAX_TMEM_HAS_CUDA
    return jax_tmem::cuda_device_cc(dev);
#else
    (void)dev;
    return -1;
#endif
  }, nb::arg("device"), "Compute capability (major*10+minor) of CUDA device `device`, -1 if unknown.");
}
