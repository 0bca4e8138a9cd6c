// jax_tmem: the zeroing kernel that stands for cudaMemsetAsync in a recorded call (the record API of XLA's FFI
// has no memset node; see jax_tmem/record.h).
#include <cstdint>

#include "jax_tmem/record.h"

namespace jax_tmem::record {

__global__ void zero_bytes_kernel(unsigned char* p, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    p[i] = 0;
}

cudaError_t record_zero(Sink* sink, void* ptr, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  const long long n = static_cast<long long>(bytes);
  const unsigned blocks = static_cast<unsigned>(n < 256LL * 1024 ? (n + 255) / 256 : 1024);
  const cudaLaunchConfig_t cfg = launch_config(dim3(blocks), dim3(256), 0, stream);
  std::tuple<unsigned char*, long long> vals(static_cast<unsigned char*>(ptr), n);
  return record_tuple(sink, zero_bytes_kernel, cfg, vals, std::index_sequence_for<unsigned char*, long long>{});
}

}  // namespace jax_tmem::record
