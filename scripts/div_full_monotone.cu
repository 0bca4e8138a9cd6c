// Dev check (issue 14, the NVFP4 quantize): is div.full.f32 (ptx::div_full_f32, what XLA's GPU programs
// use for float32 division) an odd, monotone function of its dividend for a fixed divisor? If so, the
// block amax of |x / g| equals |amax(|x|) / g|, and the fused quantize kernel needs one division per block
// for the amax instead of one per element. Exhaustive over every non-negative float dividend (2^31 values,
// NaNs included: they must stay NaN) for the divisors given on the command line.
//   nvcc -std=c++17 -arch=sm_90a -O3 -I cpp/include scripts/div_full_monotone.cu -o /tmp/dfm && /tmp/dfm 0.37 3e37 ...
#include <cstdio>
#include <cstdlib>

#include "jax_tmem/ptx/common.cuh"

__global__ void check(float g, unsigned long long* bad) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < 0x7fffffffull; i += stride) {
    const float a = __uint_as_float(static_cast<uint32_t>(i)), b = __uint_as_float(static_cast<uint32_t>(i + 1));
    const float qa = jax_tmem::ptx::div_full_f32(a, g), qb = jax_tmem::ptx::div_full_f32(b, g);
    const float na = jax_tmem::ptx::div_full_f32(-a, g);
    const bool nan_a = a != a, nan_b = b != b;
    bool ok = __float_as_uint(na) == (__float_as_uint(qa) ^ 0x80000000u) || (nan_a && na != na);  // odd
    if (!nan_a && !nan_b) ok = ok && fabsf(qa) <= fabsf(qb);  // monotone in |x| (g > 0)
    if (nan_a) ok = ok && qa != qa;
    if (!ok) atomicAdd(bad, 1ull);
  }
}

int main(int argc, char** argv) {
  unsigned long long* bad;
  cudaMallocManaged(&bad, sizeof(*bad));
  int fails = 0;
  for (int i = 1; i < argc; ++i) {
    const float g = std::strtof(argv[i], nullptr);
    *bad = 0;
    check<<<132 * 16, 256>>>(g, bad);
    cudaDeviceSynchronize();
    std::printf("g = %.9g: %llu violations over 2^31 dividends\n", g, *bad);
    fails += *bad != 0;
  }
  return fails;
}
