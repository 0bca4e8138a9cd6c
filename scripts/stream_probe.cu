// jax_tmem diagnostic (not part of the package): how fast can one weight matrix be streamed from HBM into
// shared memory by TMA, in the tile shapes a decode GEMM uses? No math: a consumer warp only hands each
// ring slot back. Compares the swap-AB kernels' box (128 rows x 128 bytes per k-block) with boxes that
// bring 512 contiguous bytes of each row per stage, for 32-264 CTAs, against a plain coalesced read, and
// times our real swap-AB kernels (sm90::run on the same weights) next to them: the gap between the two
// is the kernel's own cost (docs/PERF.md, 2026-11-24: it was the epilogue's cold code). Every variant is
// captured 200 times in one CUDA graph. `stream_probe N K splits` runs only our two kernels, for ncu.
// `stream_probe o64`: the 64- and 16-token 4096-wide GEMMs against K (64 .. 14336) on our swap-AB entries, K
// splits by the reduce pass or summed in a cluster (splits < 0), next to the pure stream (fixed cost vs per-k-block).
// `stream_probe sp`: the plans whose K splits are summed in a cluster (17 / 13 / 41 / 38 at 64-192 tokens, 1, 2 and 4
// splits; 48 / 39, 41 / 38 in weight-multicast pairs), each captured in a CUDA graph: the A/B of a change to that sum
// (docs/PERF.md, 2026-12-01 04:28).
// `stream_probe tl` (built with -DJT_TIMELINE): one launch of each, warm and after an L2 flush, with the kernel's
// %globaltimer stamps per CTA (kernels/sm90_gemm.cuh JT_MARK): kernel entry, barriers initialised, start (after
// the CTA's barrier), the producer's first steps (setmaxnreg, the first unit's coordinates, empty wait, expect_tx,
// A loads, B load = first TMA issued), first / last data, MMAs retired, epilogue done; us after the first CTA's
// start (the kernel entry comes before it: negative).
//
//   nvcc -std=c++17 -O3 -arch=sm_90a -Icpp/include -Icpp/src -o /tmp/stream_probe scripts/stream_probe.cu && /tmp/stream_probe
#include <cuda.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "jax_tmem/pipeline.cuh"
#include "jax_tmem/ptx/common.cuh"
#include "jax_tmem/ptx/mbarrier.cuh"
#include "jax_tmem/ptx/tma.cuh"
#include "sm90_launch.cuh"
#include "jax_tmem/kernels/dense_decode.cuh"
#include <functional>
#include <random>

// The package's launches go through record.h (XLA FFI's record stage, record.cc); this probe launches for real.
namespace jax_tmem::record {
Sink* active() { return nullptr; }
cudaError_t record_launch(Sink*, const void*, const cudaLaunchConfig_t&, void* const*, const size_t*, int) {
  return cudaErrorNotSupported;
}
cudaError_t record_zero(Sink*, void*, size_t, cudaStream_t) { return cudaErrorNotSupported; }
}  // namespace jax_tmem::record
// The launchers take the workspaces of pair / last-wave plans from the package's pool (flag_pool.h): so does this
// probe (reserved in main), so that its pair plans run without the memset, as in the package.
#include "../cpp/src/flag_pool.cc"

using namespace jax_tmem;
using namespace jax_tmem::ptx;
using Sm90 = jax_tmem::menu::Sm90;

#define CK(x)                                                                  \
  do {                                                                         \
    cudaError_t e = (x);                                                       \
    if (e != cudaSuccess) {                                                    \
      printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

__device__ __forceinline__ void tma_load_4d(void* dst, const void* map, uint64_t* bar, int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2];" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// MODE 0: one {64 k, 128 rows} box per stage (the swap-AB kernels' A tile, 16 KB).
// MODE 1: one {64 k, 8 rows, 4 k-chunks, 16 row-groups} box per stage (64 KB; each row's 512 bytes are
//         requested 8 requests apart; the shared-memory image is four canonical K-major tiles with SBO 4 KB).
// MODE 2: four MODE-0 boxes per stage, back to back (64 KB).
// FEAT bits (the GEMM kernel's launch, one at a time): 1 = 256 threads, 2 = 206 KB of shared memory,
// 4 = prefetch.tensormap + griddepcontrol.launch_dependents at the start; 8 = each unit walks its K range
// from a different start (tile x 7 k-blocks on, wrapping round), so that concurrent CTAs read different
// columns of the weight (`stream_probe rot`: does the DRAM rate depend on every CTA reading the same columns?).
template <int MODE, int STAGES, int FEAT = 0>
__global__ void __launch_bounds__(256) stream_kernel(const __grid_constant__ CUtensorMap map, int n_tiles, int splits,
                                                    int k_elems, unsigned long long* sink) {
  constexpr int STAGE_BYTES = MODE == 0 ? 16384 : MODE >= 3 ? 32768 : 65536;
  constexpr int KS = MODE == 0 ? 64 : 256;  // k elements per stage
  int prev = -1;
  uint8_t* smem = aligned_dynamic_smem();
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + STAGES * STAGE_BYTES);
  uint64_t* empty = full + STAGES;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) mbarrier_init(&full[s], 1), mbarrier_init(&empty[s], 1);
    fence_barrier_init();
  }
  __syncthreads();
  if constexpr ((FEAT & 4) != 0) {
    if (threadIdx.x == 0) prefetch_tensormap(&map);
    griddep_launch_dependents();
  }
  const int units = n_tiles * splits;
  const int kst = (k_elems + KS - 1) / KS;
  PipelineState<STAGES> st;
  unsigned long long acc = 0;
  for (int u = blockIdx.x; u < units; u += gridDim.x) {
    const int t = u / splits, s = u % splits;
    const int k0 = (int)((long long)kst * s / splits), k1 = (int)((long long)kst * (s + 1) / splits);
    for (int kb_ = k0; kb_ < k1; ++kb_) {
      const int kb = (FEAT & 8) ? k0 + (kb_ - k0 + t * 7) % (k1 - k0) : kb_;
      if (threadIdx.x == 0) {
        mbarrier_wait(&empty[st.stage], st.phase ^ 1u);
        uint8_t* dst = smem + st.stage * STAGE_BYTES;
        mbarrier_arrive_expect_tx(&full[st.stage], STAGE_BYTES);
        if constexpr (MODE == 0) tma_load_3d(dst, &map, &full[st.stage], kb * KS, t * 128, 0);
        if constexpr (MODE == 1) tma_load_4d(dst, &map, &full[st.stage], 0, 0, kb * 4, t * 16);
        if constexpr (MODE == 2)
          for (int j = 0; j < 4; ++j) tma_load_3d(dst + j * 16384, &map, &full[st.stage], kb * KS + 64 * j, t * 128, 0);
        if constexpr (MODE >= 3)
          for (int j = 0; j < 4; ++j) tma_load_3d(dst + j * 8192, &map, &full[st.stage], kb * KS + 64 * j, t * 64, 0);
      } else if (threadIdx.x == 32) {
        mbarrier_wait(&full[st.stage], st.phase);
        acc += *reinterpret_cast<volatile uint32_t*>(smem + st.stage * STAGE_BYTES + 4 * (kb & 31));
        if constexpr (MODE == 4) {  // as the GEMM consumers do: slot s goes back after the wait on s + 1
          if (prev >= 0) mbarrier_arrive(&empty[prev]);
          prev = st.stage;
        } else {
          mbarrier_arrive(&empty[st.stage]);
        }
      }
      st.advance();
    }
    if (MODE == 4 && threadIdx.x == 32 && prev >= 0) mbarrier_arrive(&empty[prev]), prev = -1;
  }
  if (threadIdx.x == 32 && acc == 0x1234567) sink[0] = acc;
}

__global__ void ldg_kernel(const uint4* p, long long n16, unsigned long long* sink) {
  uint32_t acc = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n16; i += (long long)gridDim.x * blockDim.x) {
    uint4 v = ldg_stream_v4(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x1234567) sink[0] = acc;
}

__global__ void empty_kernel() {}

// Reads with the default cache policy (allocating in L2): what a decode step's other GEMMs leave in L2.
__global__ void l2_flush_kernel(const uint4* p, long long n16, unsigned long long* sink) {
  uint32_t acc = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n16; i += (long long)gridDim.x * blockDim.x) {
    const uint4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x1234567) sink[0] = acc;
}

using EncodeFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*, const cuuint64_t*,
                              const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                              CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

static EncodeFn encode() {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q));
  return reinterpret_cast<EncodeFn>(p);
}

static CUtensorMap make_map(int mode, void* base, long long n, long long k, CUtensorMapL2promotion promo) {
  CUtensorMap m;
  CUresult r;
  if (mode == 1) {
    cuuint64_t dims[4] = {64, 8, (cuuint64_t)(k / 64), (cuuint64_t)(n / 8)};
    cuuint64_t strides[3] = {(cuuint64_t)(k * 2), 128, (cuuint64_t)(8 * k * 2)};
    cuuint32_t box[4] = {64, 8, 4, 16}, es[4] = {1, 1, 1, 1};
    r = encode()(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, base, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                 CU_TENSOR_MAP_SWIZZLE_128B, promo, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  } else {
    cuuint64_t dims[3] = {(cuuint64_t)k, (cuuint64_t)n, 1};
    cuuint64_t strides[2] = {(cuuint64_t)(k * 2), (cuuint64_t)(n * k * 2)};
    cuuint32_t box[3] = {64, mode >= 3 ? 64u : 128u, 1}, es[3] = {1, 1, 1};
    r = encode()(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, base, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                 CU_TENSOR_MAP_SWIZZLE_128B, promo, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  }
  if (r != CUDA_SUCCESS) {
    printf("encode failed (mode %d): %d\n", mode, (int)r);
    exit(1);
  }
  return m;
}

// Mean time per call of `launch(i)` (i = 0 .. iters - 1), the calls captured in one CUDA graph (no host
// launch cost between them, as under XLA's command buffers).
static float time_graph(const std::function<void(cudaStream_t, int)>& launch, int iters) {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < iters; ++i) launch(s, i);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaGraphLaunch(ge, s));
  CK(cudaStreamSynchronize(s));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  float best = 1e30f;
  for (int r = 0; r < 3; ++r) {
    CK(cudaEventRecord(e0, s));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (ms < best) best = ms;
  }
  CK(cudaGetLastError());
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  CK(cudaStreamDestroy(s));
  return best * 1000.f / iters;
}

template <int MODE, int STAGES, int FEAT = 0>
static float run(std::vector<void*>& bufs, long long n, long long k, int splits, int grid, CUtensorMapL2promotion promo,
                 unsigned long long* sink, int iters) {
  constexpr int STAGE_BYTES = MODE == 0 ? 16384 : MODE >= 3 ? 32768 : 65536;
  const int smem = (FEAT & 2) ? 206 * 1024 : STAGES * STAGE_BYTES + 1024 + 2 * STAGES * 8;
  const int threads = (FEAT & 1) ? 256 : 64;
  auto kern = stream_kernel<MODE, STAGES, FEAT>;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  std::vector<CUtensorMap> maps;
  for (void* b : bufs) maps.push_back(make_map(MODE, b, n, k, promo));
  const int n_tiles = (int)(n / (MODE >= 3 ? 64 : 128));
  if (grid <= 0) grid = n_tiles * splits;
  return time_graph([&](cudaStream_t st, int i) {
    kern<<<grid, threads, smem, st>>>(maps[i % maps.size()], n_tiles, splits, (int)k, sink);
  }, iters);
}

// Our swap-AB decode kernel (menu entry 11: 128(N) x 16(M) tiles, partial sums + the reduce pass) on
// out (M x N, bf16) = act (M x K) . W^T, W (N x K) row-major: the launch the dispatcher makes.
// iters > 0: the mean time per call of `iters` calls in a CUDA graph; iters < 0: one call on `stream` (the
// timeline mode), returns 0.
// Any swap-AB menu entry (its tile, ring depth and cluster from sm90_configs.def), bf16 (N, K) weight.
template <Sm90 kEntry>
static float run_entry(std::vector<void*>& bufs, long long n, long long k, long long m, int splits, void* act,
                       void* out, float* ws, int iters, cudaStream_t stream = nullptr) {
  constexpr menu::KernelConfig E = menu::kSm90Table.at(kEntry);
  static_assert(E.split == menu::Split::kSwapAB, "run_entry times the swap-AB entries");
  using C = jax_tmem::sm90::Config<DType::kBF16, DType::kBF16, E.block_n, E.stages, false, false, false, false,
                                   E.cluster_m, false, 2, E.block_m>;
  GemmLaunch L = {};
  GemmProblem& p = L.p;
  p.m = n, p.n = m, p.k = k, p.lda = k, p.ldb = k;
  p.a_type = p.b_type = p.out_type = DType::kBF16;
  p.splits = splits;
  L.out = out;
  L.ws = ws;
  L.ws_count = (long long)std::abs(splits) * m * ((n + 3) / 4 * 4);
  L.num_sms = 132;
  L.cc = 90;
  L.device = 0;
  L.inputs[static_cast<int>(Role::kB)] = act;
  std::string err;
  const auto call = [&](cudaStream_t st, int i) {
    L.stream = st;
    L.inputs[static_cast<int>(Role::kA)] = bufs[i % bufs.size()];
    std::string e = jax_tmem::sm90::run<C>(L);
    if (!e.empty()) err = e;
  };
  const float us = iters > 0 ? time_graph(call, iters) : (call(stream, 0), 0.f);
  if (!err.empty()) printf("ours: %s\n", err.c_str());
  return us;
}

// The decode kernel (kernels/dense_decode.cuh) on out (M x N, bf16) = act (M x K) . W^T, W bf16 or e4m3 (then
// act e4m3 too), stored (N, K) or, KN, (K, N).
template <bool F8, int MT, int R, int KW, int ST, bool KN = false, int KS = 1>
static float run_dd(std::vector<void*>& bufs, long long n, long long k, long long m, void* act, void* out, int iters,
                    CUtensorMapL2promotion promo = CU_TENSOR_MAP_L2_PROMOTION_NONE) {
  constexpr DType T = F8 ? DType::kE4M3 : DType::kBF16;
  constexpr int es = F8 ? 1 : 2, chunk = 128 / es;
  using P = dd::Plan<R, KW, ST, MT, KS>;
  auto kern = dd::dense_decode_kernel<T, T, MT, R, KW, ST, KN, KS>;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, P::kSmemBytes));
  auto map3 = [](void* base, long long cols, long long rows, int box_cols, int box_rows, CUtensorMapL2promotion pr) {
    CUtensorMap mp;
    cuuint64_t dims[3] = {(cuuint64_t)cols, (cuuint64_t)rows, 1};
    cuuint64_t strides[2] = {(cuuint64_t)(cols * es), (cuuint64_t)(cols * rows * es)};
    cuuint32_t box[3] = {(cuuint32_t)box_cols, (cuuint32_t)box_rows, 1}, ones[3] = {1, 1, 1};
    const int rb = box_cols * es;
    const CUtensorMapSwizzle sw = rb == 32 ? CU_TENSOR_MAP_SWIZZLE_32B : rb == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                                            : CU_TENSOR_MAP_SWIZZLE_128B;
    if (encode()(&mp, F8 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, base, dims, strides,
                 box, ones, CU_TENSOR_MAP_INTERLEAVE_NONE, sw, pr, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
      printf("dd encode failed\n");
      exit(1);
    }
    return mp;
  };
  std::vector<CUtensorMap> wm;
  for (void* b : bufs) wm.push_back(KN ? map3(b, n, k, 16 * R, chunk, promo) : map3(b, k, n, chunk, 16 * R, promo));
  const int x_rows = (int)std::min<long long>(m, 8 * MT);
  const CUtensorMap xm = map3(act, k, m, chunk, x_rows, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
  dd::Params prm = {};
  prm.m = (int)m, prm.n = (int)n, prm.k = (int)k, prm.x_rows = x_rows;
  prm.e.out = out, prm.e.alpha = 1.0f, prm.e.out_type = static_cast<int32_t>(DType::kBF16);
  dim3 grid((unsigned)((n + 16 * R - 1) / (16 * R)), (unsigned)((m + 8 * MT - 1) / (8 * MT)), 1);
  return time_graph([&](cudaStream_t st, int i) {
    kern<<<grid, (KW * KS + 1) * 32, P::kSmemBytes, st>>>(wm[i % wm.size()], xm, prm);
  }, iters);
}

template <bool F8>
__device__ float ld_elem(const void* p, long long i) {
  if constexpr (F8) return float(reinterpret_cast<const __nv_fp8_e4m3*>(p)[i]);
  else return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(p)[i]);
}

template <bool F8>
__global__ void ref_kernel(const void* x, const void* w, float* out, int m, int n, int k, bool kn) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y;
  if (col >= n) return;
  float s = 0.f;
  for (int i = 0; i < k; ++i)
    s += ld_elem<F8>(x, (long long)row * k + i) * ld_elem<F8>(w, kn ? (long long)i * n + col : (long long)col * k + i);
  out[(long long)row * n + col] = s;
}

// Correctness of one configuration on random data (N, K with tails), against the f32 reference.
template <bool F8, int MT, int R, int KW, int ST, bool KN = false, int KS = 1>
static void check_dd(long long n, long long k, long long m) {
  const int es = F8 ? 1 : 2;
  std::vector<uint8_t> hx(m * k * es), hw(n * k * es);
  std::mt19937 rng(1234 + n + k + m);
  std::normal_distribution<float> nd;
  auto fill = [&](std::vector<uint8_t>& v) {
    for (size_t i = 0; i < v.size() / es; ++i) {
      if (F8) {
        const __nv_fp8_e4m3 f(nd(rng));
        memcpy(&v[i], &f, 1);
      } else {
        const __nv_bfloat16 f = __float2bfloat16(nd(rng));
        memcpy(&v[2 * i], &f, 2);
      }
    }
  };
  fill(hx), fill(hw);
  void *dx, *dw, *dout;
  float* dref;
  CK(cudaMalloc(&dx, hx.size()));
  CK(cudaMalloc(&dw, hw.size()));
  CK(cudaMalloc(&dout, m * n * 2));
  CK(cudaMalloc(&dref, m * n * 4));
  CK(cudaMemcpy(dx, hx.data(), hx.size(), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dw, hw.data(), hw.size(), cudaMemcpyHostToDevice));
  CK(cudaMemset(dout, 0xFF, m * n * 2));  // NaN poison
  std::vector<void*> one = {dw};
  run_dd<F8, MT, R, KW, ST, KN, KS>(one, n, k, m, dx, dout, 1);
  ref_kernel<F8><<<dim3((unsigned)((n + 127) / 128), (unsigned)m), 128>>>(dx, dw, dref, (int)m, (int)n, (int)k, KN);
  CK(cudaDeviceSynchronize());
  std::vector<__nv_bfloat16> ho(m * n);
  std::vector<float> hr(m * n);
  CK(cudaMemcpy(ho.data(), dout, m * n * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hr.data(), dref, m * n * 4, cudaMemcpyDeviceToHost));
  double worst = 0, mx = 0;
  for (long long i = 0; i < m * n; ++i) {
    const double o = __bfloat162float(ho[i]), r = hr[i];
    worst = std::max(worst, o != o ? 1e30 : std::fabs(o - r));
    mx = std::max(mx, std::fabs(r));
  }
  printf("  check dd<%s, MT %d, R %d, KW %d, ST %d, KN %d, KS %d> %lld x %lld x %lld: max |err| %.3g of max |ref| %.3g -> %s\n",
         F8 ? "e4m3" : "bf16", MT, R, KW, ST, (int)KN, KS, m, n, k, worst, mx, worst <= 1e-2 * mx ? "ok" : "WRONG");
  cudaFree(dx), cudaFree(dw), cudaFree(dout), cudaFree(dref);
}

static void dd_mode(std::vector<void*>& bufs, void* act, void* out, int iters) {
  check_dd<false, 1, 1, 4, 6>(4000, 4104, 1);
  check_dd<false, 1, 4, 4, 4, true>(4144, 1032, 5);
  check_dd<true, 1, 1, 4, 4>(4000, 4224, 1);
  check_dd<true, 1, 2, 4, 4, true>(1008, 4224, 3);
  check_dd<true, 1, 4, 4, 4, true>(4144, 1152, 8);
  check_dd<true, 2, 8, 4, 3, true>(1040, 2176, 13);
  check_dd<true, 1, 8, 4, 3, true, 2>(1040, 2176, 7);
  check_dd<true, 2, 4, 4, 4, true, 4>(1040 + 64, 2176 + 128, 11);
  check_dd<false, 1, 4, 4, 4, true, 2>(4144, 1032, 5);
  check_dd<false, 1, 2, 4, 4, true, 4>(4144, 1032 + 64, 3);
  struct Shape { long long n, k; };
  const Shape shapes[] = {{4096, 4096}, {6144, 4096}, {28672, 4096}, {4096, 14336}};
  const auto none = CU_TENSOR_MAP_L2_PROMOTION_NONE, p256 = CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
  for (const Shape& s : shapes) {
    for (long long m : {1LL, 8LL}) {
      for (bool f8 : {false, true}) {
        const double bytes = (double)s.n * s.k * (f8 ? 1 : 2);
        printf("== %lld x %lld x %lld %s (%.1f MB): us (TB/s)\n", m, s.n, s.k, f8 ? "e4m3" : "bf16", bytes / 1e6);
#define DD(F8, KN, R, ST, PR, KS)                                                                              \
  if (F8 == f8) {                                                                                              \
    const float t = run_dd<F8, 1, R, 4, ST, KN, KS>(bufs, s.n, s.k, m, act, out, iters, PR);                    \
    printf("  dd %s R %d ST %d KS %d %s: %.2f (%.2f)\n", KN ? "KN" : "NK", R, ST, KS, PR == none ? "none" : "256B", \
           t, bytes / t / 1e6);                                                                                \
  }
        DD(false, false, 1, 4, none, 1) DD(false, true, 4, 4, none, 1) DD(false, true, 4, 4, none, 2)
        DD(false, true, 2, 4, p256, 1) DD(false, true, 2, 4, p256, 2) DD(false, true, 2, 4, none, 2)
        DD(false, true, 4, 2, none, 2) DD(false, true, 4, 3, none, 2)
        DD(true, false, 1, 4, none, 1)
        DD(true, true, 2, 4, none, 1) DD(true, true, 2, 4, none, 2) DD(true, true, 2, 4, none, 4)
        DD(true, true, 4, 4, none, 1) DD(true, true, 4, 4, none, 2) DD(true, true, 4, 4, none, 4)
        DD(true, true, 4, 2, none, 2) DD(true, true, 4, 2, none, 4) DD(true, true, 4, 3, none, 4)
        DD(true, true, 8, 3, none, 1) DD(true, true, 8, 3, none, 2) DD(true, true, 8, 3, none, 4)
        DD(true, true, 8, 2, none, 4)
#undef DD
      }
    }
  }
}

int main(int argc, char** argv) {
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  if (const std::string e = jax_tmem::flag_pool::reserve(0, 128); !e.empty()) std::printf("no flag pool: %s\n", e.c_str());
  unsigned long long* sink;
  CK(cudaMalloc(&sink, 8));
  const int iters = 200;
  struct Shape { long long n, k; };
  const Shape shapes[] = {{4096, 4096}, {6144, 4096}, {28672, 4096}, {4096, 14336}};
  // Rotate over enough distinct weights that none is still in L2 (50 MB) when it comes round again.
  const long long max_bytes = 28672LL * 4096 * 2;
  std::vector<void*> bufs(6);
  for (auto& b : bufs) {
    CK(cudaMalloc(&b, max_bytes));
    CK(cudaMemset(b, 0x3c, max_bytes));
  }
  void *act, *out;
  float* ws;
  CK(cudaMalloc(&act, 256LL * 14336 * 2));  // up to 256 tokens
  CK(cudaMemset(act, 0x3c, 256LL * 14336 * 2));
  CK(cudaMalloc(&out, 256LL * 28672 * 2));
  CK(cudaMalloc(&ws, 8LL * 64 * 28672 * 4));
  if (argc > 1 && std::string(argv[1]) == "rot") {  // 128-row boxes, the same or rotated K order per tile
    const CUtensorMapL2promotion P = CU_TENSOR_MAP_L2_PROMOTION_NONE;
    for (const Shape& s : shapes) {
      const double bytes = (double)s.n * s.k * 2;
      const int tiles = (int)(s.n / 128);
      for (int splits : {1, 2, 4}) {
        const int units = tiles * splits, grid = units < sms ? units : sms;
        const float a = run<0, 13>(bufs, s.n, s.k, splits, grid, P, sink, iters);
        const float b = run<0, 13, 8>(bufs, s.n, s.k, splits, grid, P, sink, iters);
        const float c = run<0, 9>(bufs, s.n, s.k, splits, grid, P, sink, iters);
        const float d = run<0, 9, 8>(bufs, s.n, s.k, splits, grid, P, sink, iters);
        printf("%lld x %lld, %d splits (%d CTAs): 13 stages %6.2f us (%.2f TB/s), rotated %6.2f (%.2f) | 9 stages "
               "%6.2f (%.2f), rotated %6.2f (%.2f)\n", s.n, s.k, splits, grid, a, bytes / a / 1e6, b, bytes / b / 1e6,
               c, bytes / c / 1e6, d, bytes / d / 1e6);
      }
    }
    return 0;
  }
#ifdef JT_TIMELINE
  if (argc > 1 && (std::string(argv[1]) == "tl" || std::string(argv[1]) == "tl160")) {
    // -DJT_TIMELINE: where one decode GEMM's time goes, CTA by CTA
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    const auto one = [&](const char* name, int ctas, const std::function<void(int)>& call) {
      for (int cold = 0; cold < 2; ++cold) {
        for (int w = 0; w < 3; ++w) call(w);  // warm: the same kernel just ran
        if (cold) {  // another kernel streams 200 MB through L2 first (as a decode step's other GEMMs do)
          l2_flush_kernel<<<264, 512, 0, st>>>((const uint4*)bufs[5], max_bytes / 16, sink);
        }
        CK(cudaStreamSynchronize(st));
        constexpr int kMarks = 16;  // kernels/sm90_gemm.cuh: jt_timeline[cta * 16 + mark]
        std::vector<unsigned long long> z(264 * kMarks, 0), t(264 * kMarks);
        CK(cudaMemcpyToSymbol(jt_timeline, z.data(), z.size() * 8));
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        CK(cudaEventRecord(e0, st));
        call(4);
        CK(cudaEventRecord(e1, st));
        CK(cudaStreamSynchronize(st));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        CK(cudaMemcpyFromSymbol(t.data(), jt_timeline, t.size() * 8));
        // A persistent grid launches fewer CTAs than `ctas` tiles: those never started leave their marks at 0.
        unsigned long long t0 = ~0ull;
        int started = 0;
        for (int c = 0; c < ctas; ++c)
          if (t[c * kMarks] != 0) t0 = std::min(t0, t[c * kMarks]), ++started;
        printf("%-34s %s: events %6.2f us | us after the first CTA's start (min / median / max over %d CTAs):\n", name,
               cold ? "cold" : "warm", ms * 1000.f, started);
        // in the order they happen on the producer's thread 0, then the consumers'
        const char* what[kMarks] = {"start (synced)", "first TMA issued", "first data", "last data", "MMAs retired",
                                    "epilogue done", "producer done", "producer setmaxnreg", "first unit's coords",
                                    "first empty wait", "first expect_tx", "first A loads", "kernel entry",
                                    "barriers initialised", "K splits summed", ""};
        const int order[] = {12, 13, 0, 7, 8, 9, 10, 11, 1, 2, 3, 4, 14, 5, 6};
        for (int i : order) {
          std::vector<double> v;
          for (int c = 0; c < ctas; ++c)
            if (t[c * kMarks + i] != 0) v.push_back((double(t[c * kMarks + i]) - double(t0)) / 1e3);
          if (v.empty()) continue;
          std::sort(v.begin(), v.end());
          printf("    %-18s %7.2f %7.2f %7.2f\n", what[i], v.front(), v[v.size() / 2], v.back());
        }
      }
    };
    if (std::string(argv[1]) == "tl") {
    one("13: 128x64, M 64, 1 split", 32,
        [&](int i) { run_entry<Sm90::k128x64SwapAB>(bufs, 4096, 4096, 64, 1, act, out, ws, -1, st); });
    one("17: 64x64, M 64, 2 splits (cluster)", 128,
        [&](int i) { run_entry<Sm90::k64x64SwapAB>(bufs, 4096, 4096, 64, -2, act, out, ws, -1, st); });
    one("13: 128x64, M 64, 2 splits (cluster)", 64,
        [&](int i) { run_entry<Sm90::k128x64SwapAB>(bufs, 4096, 4096, 64, -2, act, out, ws, -1, st); });
    one("11: 128x16, M 16, 1 split", 32,
        [&](int i) { run_entry<Sm90::k128x16SwapAB>(bufs, 4096, 4096, 16, 1, act, out, ws, -1, st); });
    one("15: 64x16, M 16, 1 split", 64,
        [&](int i) { run_entry<Sm90::k64x16SwapAB>(bufs, 4096, 4096, 16, 1, act, out, ws, -1, st); });
    // 129-160 tokens (menu.h sm90_token_tiles / sm90_wide_tokens): the 8B O projection at 136 tokens on 41 (two
    // 80-token tiles x 32 weight tiles x 2 splits in a cluster) and on 38 (two of 96); the gate / up on 40
    one("41: 128x80, M 136, 2 splits (cluster)", 128,
        [&](int i) { run_entry<Sm90::k128x80SwapAB>(bufs, 4096, 4096, 136, -2, act, out, ws, -1, st); });
    one("38: 128x96, M 136, 2 splits (cluster)", 128,
        [&](int i) { run_entry<Sm90::k128x96SwapAB>(bufs, 4096, 4096, 136, -2, act, out, ws, -1, st); });
    one("41: 128x80, M 136, 1 split", 64,
        [&](int i) { run_entry<Sm90::k128x80SwapAB>(bufs, 4096, 4096, 136, 1, act, out, ws, -1, st); });
    one("40: 128x160 4x1, M 136, N 28672", 224,
        [&](int i) { run_entry<Sm90::k128x160SwapABCluster4>(bufs, 28672, 4096, 136, 1, act, out, ws, -1, st); });
    return 0;
    }
    // tl160: the 8B layer's narrow projections at 160 tokens, in cuBLAS's forms
    one("41: QKV 128x80, M 160, 1 split", 96,
        [&](int i) { run_entry<Sm90::k128x80SwapAB>(bufs, 6144, 4096, 160, 1, act, out, ws, -1, st); });
    one("50: QKV 192x80 pairs, M 160, 2 splits", 128,
        [&](int i) { run_entry<Sm90::k192x80SwapABClusterN2>(bufs, 6144, 4096, 160, -2, act, out, ws, -1, st); });
    one("41: O 128x80, M 160, 2 splits (cluster)", 128,
        [&](int i) { run_entry<Sm90::k128x80SwapAB>(bufs, 4096, 4096, 160, -2, act, out, ws, -1, st); });
    one("48: O 128x80 pairs, M 160, 2 splits", 128,
        [&](int i) { run_entry<Sm90::k128x80SwapABClusterN2>(bufs, 4096, 4096, 160, -2, act, out, ws, -1, st); });
    one("48: down 128x80 pairs, M 160, 2 splits", 128,
        [&](int i) { run_entry<Sm90::k128x80SwapABClusterN2>(bufs, 4096, 14336, 160, -2, act, out, ws, -1, st); });
    for (long long m : {160LL}) {
      const float a = run_entry<Sm90::k128x80SwapAB>(bufs, 6144, 4096, m, 1, act, out, ws, iters);
      const float b = run_entry<Sm90::k192x80SwapABClusterN2>(bufs, 6144, 4096, m, -2, act, out, ws, iters);
      const float c = run_entry<Sm90::k128x80SwapAB>(bufs, 4096, 4096, m, -2, act, out, ws, iters);
      const float d = run_entry<Sm90::k128x80SwapABClusterN2>(bufs, 4096, 4096, m, -2, act, out, ws, iters);
      const float e = run_entry<Sm90::k128x80SwapABClusterN2>(bufs, 4096, 14336, m, -2, act, out, ws, iters);
      const float g = run_entry<Sm90::k128x160SwapABCluster4>(bufs, 28672, 4096, m, 1, act, out, ws, iters);
      printf("graph-timed, M=%lld: QKV 41 %6.2f us | QKV 50 %6.2f | O 41 %6.2f | O 48 %6.2f | down 48 %6.2f | gate/up 40 "
             "%6.2f\n", m, a, b, c, d, e, g);
    }
    // The pair plans against the reduce pass (the same sums in the same order: the same bits), on random operands.
    {
      std::mt19937 gen(7);
      std::uniform_real_distribution<float> u(-1.f, 1.f);
      const auto fill = [&](void* dst, long long count) {
        std::vector<uint16_t> h(count);
        for (auto& x : h) {
          const float f = u(gen);
          uint32_t bits;
          std::memcpy(&bits, &f, 4);
          x = static_cast<uint16_t>(bits >> 16);
        }
        CK(cudaMemcpy(dst, h.data(), count * 2, cudaMemcpyHostToDevice));
      };
      fill(bufs[0], 6144LL * 14336);
      fill(act, 160LL * 14336);
      void* out2;
      CK(cudaMalloc(&out2, 256LL * 28672 * 2));
      const auto same = [&](const char* name, long long n, long long k, const std::function<void(void*)>& pair,
                            const std::function<void(void*)>& reduce) {
        CK(cudaMemset(out, 0xff, n * 160 * 2));
        CK(cudaMemset(out2, 0x7f, n * 160 * 2));
        pair(out);
        reduce(out2);
        CK(cudaStreamSynchronize(st));
        std::vector<uint16_t> x(n * 160), y(n * 160);
        CK(cudaMemcpy(x.data(), out, n * 160 * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(y.data(), out2, n * 160 * 2, cudaMemcpyDeviceToHost));
        long long diff = 0;
        for (long long i = 0; i < n * 160; ++i) diff += x[i] != y[i];
        printf("bitwise %-40s %s (%lld of %lld differ)\n", name, diff ? "DIFFERENT" : "equal", diff, n * 160);
      };
      for (int s : {2, 3}) {
        same(s == 2 ? "48 down, 2 splits vs 41 reduce pass" : "48 down, 3 splits vs 41 reduce pass", 4096, 14336,
             [&](void* o) { run_entry<Sm90::k128x80SwapABClusterN2>(bufs, 4096, 14336, 160, -s, act, o, ws, -1, st); },
             [&](void* o) { run_entry<Sm90::k128x80SwapAB>(bufs, 4096, 14336, 160, s, act, o, ws, -1, st); });
        same(s == 2 ? "50 QKV, 2 splits vs 49 reduce pass" : "50 QKV, 3 splits vs 49 reduce pass", 6144, 4096,
             [&](void* o) { run_entry<Sm90::k192x80SwapABClusterN2>(bufs, 6144, 4096, 160, -s, act, o, ws, -1, st); },
             [&](void* o) { run_entry<Sm90::k192x80SwapAB>(bufs, 6144, 4096, 160, s, act, o, ws, -1, st); });
      }
    }
    return 0;
  }
#endif
  if (argc > 1 && std::string(argv[1]) == "o64") {  // 64 tokens x 4096 x K: our 128x64 swap-AB entry against K
    for (long long k : {64LL, 512LL, 1024LL, 2048LL, 4096LL, 14336LL}) {
      for (int splits : {1, 2, 3, 4, -2, -3, -4}) {  // < 0: summed in a cluster (the kernel), else the reduce pass
        if (k / 64 < std::abs(splits)) continue;
        const float pure = run<0, 9>(bufs, 4096, k, std::abs(splits), 32 * std::abs(splits),
                                     CU_TENSOR_MAP_L2_PROMOTION_NONE, sink, iters);
        const float o64 = run_entry<Sm90::k128x64SwapAB>(bufs, 4096, k, 64, splits, act, out, ws, iters);
        const float o64b = run_entry<Sm90::k64x64SwapAB>(bufs, 4096, k, 64, splits, act, out, ws, iters);
        const float o16 = run_entry<Sm90::k128x16SwapAB>(bufs, 4096, k, 16, splits, act, out, ws, iters);
        printf("4096 x %5lld, %2d splits: pure stream %6.2f us | ours M=64 128x64 (13) %6.2f | M=64 64x64 (17) %6.2f | "
               "M=16 128x16 (11) %6.2f\n", k, splits, pure, o64, o64b, o16);
      }
    }
    printf("empty kernel in a graph: %.2f us/launch\n",
           time_graph([&](cudaStream_t st, int) { empty_kernel<<<132, 64, 0, st>>>(); }, iters));
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "sp") {  // K splits summed in a cluster: the decode plans, graph-timed
    for (long long k : {4096LL, 14336LL}) {
      for (int splits : {1, -2, -4}) {
        const float a = run_entry<Sm90::k64x64SwapAB>(bufs, 4096, k, 64, splits, act, out, ws, iters);
        const float b = run_entry<Sm90::k128x64SwapAB>(bufs, 4096, k, 128, splits, act, out, ws, iters);
        const float c = run_entry<Sm90::k128x80SwapAB>(bufs, 4096, k, 136, splits, act, out, ws, iters);
        const float d = run_entry<Sm90::k128x96SwapAB>(bufs, 4096, k, 192, splits, act, out, ws, iters);
        // 41 / 38 in weight-multicast pairs (48 / 39): the pair's two token tiles read each weight byte once
        const float e = run_entry<Sm90::k128x80SwapABClusterN2>(bufs, 4096, k, 136, splits, act, out, ws, iters);
        const float f = run_entry<Sm90::k128x80SwapABClusterN2>(bufs, 4096, k, 160, splits, act, out, ws, iters);
        const float g = run_entry<Sm90::k128x96SwapABClusterN2>(bufs, 4096, k, 192, splits, act, out, ws, iters);
        printf("4096 x %5lld, %2d splits: M=64 64x64 (17) %6.2f us | M=128 128x64 (13) %6.2f | M=136 128x80 (41) %6.2f | "
               "M=192 128x96 (38) %6.2f || pairs: M=136 (48) %6.2f | M=160 (48) %6.2f | M=192 (39) %6.2f\n", k, splits,
               a, b, c, d, e, f, g);
      }
    }
    // The QKV projection (6144 weight rows): 41 with one split (the default plan at 129-160 tokens) against 49 (192
    // weight rows, cuBLAS's tile in the chain) with 2 K splits summed in a cluster
    for (long long m : {136LL, 160LL}) {
      const float a = run_entry<Sm90::k128x80SwapAB>(bufs, 6144, 4096, m, 1, act, out, ws, iters);
      const float b = run_entry<Sm90::k192x80SwapAB>(bufs, 6144, 4096, m, -2, act, out, ws, iters);
      const float c = run_entry<Sm90::k192x80SwapAB>(bufs, 6144, 4096, m, 1, act, out, ws, iters);
      printf("6144 x 4096, M=%lld: 41 1 split %6.2f us | 49 2 splits in a cluster %6.2f | 49 1 split %6.2f\n", m, a, b, c);
    }
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "dd") {  // the 16-bit decode kernel against ours
    dd_mode(bufs, act, out, iters);
    return 0;
  }
  if (argc > 1) {  // for Nsight Compute: our 64-row kernel on one shape, a few calls: N K splits
    const long long n = atoll(argv[1]), k = atoll(argv[2]);
    run_entry<Sm90::k64x16SwapAB>(bufs, n, k, 16, atoi(argv[3]), act, out, ws, 4);
    run_entry<Sm90::k128x16SwapAB>(bufs, n, k, 16, atoi(argv[3]), act, out, ws, 4);
    return 0;
  }
  printf("SMs %d; empty kernel in a graph: %.2f us/launch\n", sms,
         time_graph([&](cudaStream_t st, int) { empty_kernel<<<132, 64, 0, st>>>(); }, iters));
  for (const Shape& s : shapes) {
    const double bytes = (double)s.n * s.k * 2;
    printf("\n== weight %lld x %lld bf16 (%.1f MB): us per pass, TB/s ==\n", s.n, s.k, bytes / 1e6);
    {
      float best = 1e9;
      for (int g : {sms, 2 * sms, 4 * sms}) {
        const long long n16 = (long long)(bytes / 16);
        const float us = time_graph([&](cudaStream_t st, int i) {
          ldg_kernel<<<g, 512, 0, st>>>((const uint4*)bufs[i % bufs.size()], n16, sink);
        }, iters);
        if (us < best) best = us;
        printf("  ldg coalesced, grid %4d x 512       : %7.2f us  %.2f TB/s\n", g, us, bytes / us / 1e6);
      }
    }
    const int tiles = (int)(s.n / 128);
    for (int splits : {1, 2, 4, 8}) {
      const int units = tiles * splits;
      const int grid = units < sms ? units : sms;
      float t0 = run<0, 13>(bufs, s.n, s.k, splits, grid, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, sink, iters);
      float t0n = run<0, 13>(bufs, s.n, s.k, splits, grid, CU_TENSOR_MAP_L2_PROMOTION_NONE, sink, iters);
      float t0h = run<0, 6>(bufs, s.n, s.k, splits, units < 2 * sms ? units : 2 * sms,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, sink, iters);
      float t1 = run<1, 3>(bufs, s.n, s.k, splits, grid, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, sink, iters);
      float t2 = run<2, 3>(bufs, s.n, s.k, splits, grid, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, sink, iters);
      const float to = run_entry<Sm90::k128x16SwapAB>(bufs, s.n, s.k, 16, splits, act, out, ws, iters);
      const int u64 = tiles * 2 * splits;
      const float p64_5 = run<3, 5>(bufs, s.n, s.k, splits, u64 < sms ? u64 : sms, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, sink, iters);
      const float p64_6 = run<3, 6>(bufs, s.n, s.k, splits, u64 < sms ? u64 : sms, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, sink, iters);
      const float d64_5 = run<4, 5>(bufs, s.n, s.k, splits, u64 < sms ? u64 : sms, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, sink, iters);
      const float d64_6 = run<4, 6>(bufs, s.n, s.k, splits, u64 < sms ? u64 : sms, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, sink, iters);
      const int g64 = u64 < sms ? u64 : sms;
      const CUtensorMapL2promotion P = CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
      printf("  splits %d: 5-stage pure + 256 threads %6.2f | + 206 KB smem %6.2f | + prefetch/launch_dependents %6.2f | all %6.2f\n",
             splits, run<3, 5, 1>(bufs, s.n, s.k, splits, g64, P, sink, iters), run<3, 5, 2>(bufs, s.n, s.k, splits, g64, P, sink, iters),
             run<3, 5, 4>(bufs, s.n, s.k, splits, g64, P, sink, iters), run<3, 5, 7>(bufs, s.n, s.k, splits, g64, P, sink, iters));
      printf("  splits %d: pure 64 rows x 512 B stages (%d units): 5 stages %6.2f us, 6 stages %6.2f us | "
             "release one slot late: 5 stages %6.2f, 6 stages %6.2f\n", splits, u64, p64_5, p64_6, d64_5, d64_6);
      const float t64 = run_entry<Sm90::k64x16SwapAB>(bufs, s.n, s.k, 16, splits, act, out, ws, iters);
      printf("  splits %d: OURS (swap-AB 128x16, M = 16, + reduce) %6.2f us (%.2f TB/s) | 64x16, 512 B rows %6.2f us (%.2f TB/s)\n",
             splits, to, bytes / to / 1e6, t64, bytes / t64 / 1e6);
      printf("  splits %d (%4d units, grid %3d): box128x128B %6.2f (%.2f) | promo none %6.2f (%.2f) | "
             "2 CTA/SM x6 %6.2f (%.2f) | 4D 512B/row %6.2f (%.2f) | 4 boxes/stage %6.2f (%.2f)\n",
             splits, units, grid, t0, bytes / t0 / 1e6, t0n, bytes / t0n / 1e6, t0h, bytes / t0h / 1e6, t1,
             bytes / t1 / 1e6, t2, bytes / t2 / 1e6);
    }
  }
  return 0;
}
