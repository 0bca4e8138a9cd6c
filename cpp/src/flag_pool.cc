// jax_tmem: the per-device pools of workspaces whose ready flags stay lowered (flag_pool.h).
#include "jax_tmem/flag_pool.h"

#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <tuple>

#include "jax_tmem/launch.h"  // kMaxDevices, zero_async (no recording sink on this thread: a plain memset)

namespace jax_tmem::flag_pool {
namespace {

struct Pool {
  float* base = nullptr;
  int64_t words = 0, used = 0;
  std::map<std::tuple<const void*, int64_t, int64_t>, std::pair<int64_t, int64_t>> regions;  // -> (offset, words)
};

std::mutex mu;
Pool pools[kMaxDevices];
int64_t pool_bytes = 0, region_count = 0, miss_count = 0;
std::string last_error;

std::string fail(int device, const char* what, cudaError_t e) {
  last_error = "pool on GPU " + std::to_string(device) + ": " + what + ": " + cudaGetErrorString(e);
  return last_error;
}

}  // namespace

std::string reserve(int device, int64_t mib) {
  if (device < 0 || device >= kMaxDevices) return "device " + std::to_string(device) + " out of range";
  int major = 0, minor = 0;  // (sm_100a: the reduce pass; no pair or tail pieces)
  if (mib <= 0 || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess || major * 10 + minor != 90)
    return "";
  std::lock_guard<std::mutex> lock(mu);
  Pool& pool = pools[device];
  if (pool.base != nullptr) return "";
  int previous = 0;
  cudaError_t e = cudaGetDevice(&previous);
  if (e != cudaSuccess) return fail(device, "cudaGetDevice", e);
  if ((e = cudaSetDevice(device)) != cudaSuccess) return fail(device, "cudaSetDevice", e);
  void* p = nullptr;
  cudaStream_t s = nullptr;
  const size_t bytes = static_cast<size_t>(mib) << 20;
  std::string err;
  if ((e = cudaMalloc(&p, bytes)) != cudaSuccess) {
    err = fail(device, "cudaMalloc", e);
  } else if ((e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) != cudaSuccess ||
             (e = zero_async(p, bytes, s)) != cudaSuccess || (e = cudaStreamSynchronize(s)) != cudaSuccess) {
    err = fail(device, "zeroing", e);
    cudaFree(p);
  } else {
    pool.base = static_cast<float*>(p);
    pool.words = static_cast<int64_t>(bytes / sizeof(float));
    pool_bytes = static_cast<int64_t>(bytes);
  }
  if (s != nullptr) cudaStreamDestroy(s);
  cudaSetDevice(previous);
  return err;
}

float* region(int device, const void* key, int64_t words, int64_t flags_at, int64_t flags) {
  std::lock_guard<std::mutex> lock(mu);
  Pool* pool = device >= 0 && device < kMaxDevices ? &pools[device] : nullptr;
  if (pool == nullptr || pool->base == nullptr || words <= 0 || flags_at < 0 || flags_at + flags > words) {
    ++miss_count;
    return nullptr;
  }
  const auto id = std::make_tuple(key, flags_at, flags);
  auto it = pool->regions.find(id);
  if (it != pool->regions.end() && it->second.second >= words) return pool->base + it->second.first;
  const int64_t offset = (pool->used + 31) / 32 * 32;  // 128-byte aligned (float4 slots)
  if (offset + words > pool->words) {  // (an outgrown region stays: a captured graph may still use it)
    ++miss_count;
    return nullptr;
  }
  pool->used = offset + words;
  pool->regions[id] = {offset, words};
  ++region_count;
  return pool->base + offset;
}

Stats stats() {
  std::lock_guard<std::mutex> lock(mu);
  Stats s;
  for (int d = 0; d < kMaxDevices; ++d)
    if (pools[d].base != nullptr) {
      s.devices.push_back(d);
      s.used += pools[d].used;
    }
  s.bytes = pool_bytes, s.regions = region_count, s.misses = miss_count, s.error = last_error;
  return s;
}

}  // namespace jax_tmem::flag_pool
