// jax_tmem: the one extension module. It hands the FFI handlers to Python as capsules (the Python
// package registers each target once, see jax_tmem/_ext.py) and reports how it was built, so a
// handler/jaxlib mismatch can be explained in plain words instead of "No FFI handler registered".
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <type_traits>

#include "jax_tmem/handlers.h"

namespace nb = nanobind;

namespace {

template <typename T>
nb::capsule encapsulate(T* fn) {
  static_assert(std::is_invocable_r_v<XLA_FFI_Error*, T, XLA_FFI_CallFrame*>,
                "an FFI handler must have type XLA_FFI_Error*(XLA_FFI_CallFrame*)");
  return nb::capsule(reinterpret_cast<void*>(fn));
}

}  // namespace

NB_MODULE(_jax_tmem, m) {
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

  m.def("cuda_device_cc", []() {
#if JAX_TMEM_HAS_CUDA
    return jax_tmem::cuda_device_cc();
#else
    return -1;
#endif
  }, "Compute capability (major*10+minor) of the current CUDA device, negative if none.");
}
