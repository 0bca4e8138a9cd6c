// jax_tmem: every kernel launch and memset of the CUDA handlers goes through launch_kernel() / zero_async() here,
// so that one handler runs two ways:
//  - executed (XLA's execute stage, or traced into a command buffer by stream capture): cudaLaunchKernelEx /
//    cudaMemsetAsync on the call's stream, as before;
//  - recorded (XLA FFI's record stage, jaxlib >= 0.11.2, opt-in: JAX_TMEM_FFI_RECORD=1): each launch becomes
//    a kernel node of XLA's command buffer, created from the kernel's image (the cubin in this extension's
//    fatbinary) on the command buffer's first recording and updated with new arguments afterwards; no
//    stream capture, no child graph, a programmatic edge where the launch asks for one.
// record.cc holds the recording (a thread-local sink set around the execute handler by the record handler).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

namespace jax_tmem::record {

class Sink;

// The recording in progress on this thread, or null (executed: launch for real).
Sink* active();

// Records one launch of `func` (a __global__ function's host stub) with `cfg`'s grid, block, dynamic shared
// memory and attributes (cluster dims; programmatic stream serialization -> a PDL edge), arguments by value.
// Returns cudaSuccess, or an error with the reason kept in the sink (the record handler reports it).
cudaError_t record_launch(Sink* sink, const void* func, const cudaLaunchConfig_t& cfg, void* const* args,
                          const size_t* sizes, int num_args);

// Zeroes `bytes` bytes at `ptr` with a kernel (a graph has no memset node in the record API).
cudaError_t record_zero(Sink* sink, void* ptr, size_t bytes, cudaStream_t stream);

template <typename... Params, size_t... I>
cudaError_t record_tuple(Sink* sink, void (*kernel)(Params...), const cudaLaunchConfig_t& cfg,
                         std::tuple<std::remove_cv_t<std::remove_reference_t<Params>>...>& vals,
                         std::index_sequence<I...>) {
  void* const args[] = {static_cast<void*>(&std::get<I>(vals))..., nullptr};
  const size_t sizes[] = {sizeof(std::get<I>(vals))..., 0};
  return record_launch(sink, reinterpret_cast<const void*>(kernel), cfg, args, sizes,
                       static_cast<int>(sizeof...(Params)));
}

}  // namespace jax_tmem::record

namespace jax_tmem {

// cudaLaunchKernelEx(cfg, kernel, args...), or its recording as a kernel node (see above). The arguments are
// converted to the kernel's parameter types first, exactly as a launch converts them.
template <typename... Params, typename... Args>
cudaError_t launch_kernel(const cudaLaunchConfig_t& cfg, void (*kernel)(Params...), Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "launch_kernel: one argument per kernel parameter");
  if (record::Sink* sink = record::active()) {
    std::tuple<std::remove_cv_t<std::remove_reference_t<Params>>...> vals(std::forward<Args>(args)...);
    return record::record_tuple(sink, kernel, cfg, vals, std::index_sequence_for<Params...>{});
  }
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// A plain launch configuration: grid, block, dynamic shared memory, stream, no attributes.
inline cudaLaunchConfig_t launch_config(dim3 grid, dim3 block, size_t smem, cudaStream_t stream) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  return cfg;
}

// cudaMemsetAsync(ptr, 0, bytes, stream), or its recording as a kernel node.
inline cudaError_t zero_async(void* ptr, size_t bytes, cudaStream_t stream) {
  if (record::Sink* sink = record::active()) return record::record_zero(sink, ptr, bytes, stream);
  return cudaMemsetAsync(ptr, 0, bytes, stream);
}

}  // namespace jax_tmem
