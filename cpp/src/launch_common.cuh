// jax_tmem: host launch code shared by the sm_90a and sm_100a kernels: TMA tensor maps for A and B in
// the layout both kernels use (128B-swizzled boxes: BLOCK_K x rows for a K-major operand, MN_CHUNK x
// BLOCK_K for an MN-major one), kernel parameters, and the persistent launch.
#pragma once

#include <algorithm>
#include <atomic>
#include <string>
#include <type_traits>
#include <utility>

#include "jax_tmem/epilogue.cuh"
#include "jax_tmem/flag_pool.h"
#include "jax_tmem/kernels/splitk_reduce.cuh"
#include "jax_tmem/launch.h"
#include "jax_tmem/legality.h"
#include "jax_tmem/menu.h"
#include "jax_tmem/tail_boxes.h"
#include "jax_tmem/tma_desc.h"

namespace jax_tmem {

// The maps of A and B (null: not that one). A K-major operand's box holds a_rows / b_rows rows (a tail box:
// TailBoxes), by default the kernel's whole block.
template <class C>
std::string encode_ab_maps(const GemmLaunch& L, CUtensorMap* map_a, CUtensorMap* map_b, int a_rows = C::BOX_M,
                           int b_rows = C::BOX_N) {
  const GemmProblem& p = L.p;
  constexpr int kChunk = 1024 / dtype_bits(C::kA);  // elements of one 128-byte swizzle atom (MN-major)
  const bool a_batched = p.batch > 1 && p.stride_a != 0, b_batched = p.batch > 1 && p.stride_b != 0;
  std::string err;
  // swap-AB: A is the decode weight, read once (tma::kStreamed)
  constexpr CUtensorMapL2promotion kPromoA = C::kPartialOut == 2 ? tma::kStreamed : CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
  if (map_a != nullptr && C::kAMN)
    err = tma::encode_operand(map_a, L.in(Role::kA), p.a_type, p.m, p.k, a_batched ? p.batch : 1, p.lda, p.stride_a, kChunk, C::BLOCK_K,
                              CU_TENSOR_MAP_SWIZZLE_128B, kPromoA);
  else if (map_a != nullptr)
    err = tma::encode_operand(map_a, L.in(Role::kA), p.a_type, p.k, p.m, a_batched ? p.batch : 1, p.lda, p.stride_a, C::BLOCK_K, a_rows,
                              CU_TENSOR_MAP_SWIZZLE_128B, kPromoA);
  if (!err.empty()) return "operand a: " + err;
  if (map_b != nullptr && C::kBMN)
    err = tma::encode_operand(map_b, L.in(Role::kB), p.b_type, p.n, p.k, b_batched ? p.batch : 1, p.ldb, p.stride_b, kChunk, C::BLOCK_K);
  else if (map_b != nullptr)
    err = tma::encode_operand(map_b, L.in(Role::kB), p.b_type, p.k, p.n, b_batched ? p.batch : 1, p.ldb, p.stride_b, C::BLOCK_K, b_rows);
  if (!err.empty()) return "operand b: " + err;
  return "";
}

// The workspace of a launch whose pieces meet through ready flags (`flags` words from float `flags_at` on, `need`
// floats in all): the device pool's region for this call, its flags zero and left zero by the kernel (flag_pool.h),
// else XLA's, its flags cleared by a memset (a second node in a captured call: ~5 us before a decode GEMM).
inline std::string ready_workspace(const GemmLaunch& L, epilogue::KernelParams& prm, int64_t need, int64_t flags_at,
                                   int64_t flags) {
  prm.ws = flag_pool::region(L.device, L.ws, need, flags_at, flags);
  if (prm.ws != nullptr) return "";
  prm.ws = L.ws;
  const cudaError_t e = zero_async(L.ws + flags_at, sizeof(unsigned int) * flags, L.stream);
  return e == cudaSuccess ? "" : std::string("clearing the ready flags: ") + cudaGetErrorString(e);
}

inline epilogue::KernelParams kernel_params(const GemmLaunch& L) {
  const GemmProblem& p = L.p;
  epilogue::KernelParams prm;
  prm.m = static_cast<int>(p.m);
  prm.n = static_cast<int>(p.n);
  prm.k = static_cast<int>(p.k);
  prm.batch = static_cast<int>(p.batch);
  prm.a_batched = p.batch > 1 && p.stride_a != 0;
  prm.b_batched = p.batch > 1 && p.stride_b != 0;
  prm.epi = epilogue::make_args(p, L.out, L.inputs);
  prm.ws = nullptr;
  prm.ws_ld = 0;
  prm.splits = 1;
  prm.sfa = static_cast<const uint8_t*>(L.in(Role::kSFA));
  prm.sfb = static_cast<const uint8_t*>(L.in(Role::kSFB));
  prm.sfa_batch = p.sf_vec ? p.sf_per_batch(p.m) : 0;
  prm.sfb_batch = p.sf_vec ? p.sf_per_batch(p.n) : 0;
  prm.sf_col_blocks = p.sf_vec ? static_cast<int>((p.k / p.sf_vec + 3) / 4) : 0;
  prm.sf_layout = p.sf_layout;
  return prm;
}

// The swap-AB view of a launch: out^T = B A^T, i.e. the kernel's A is the problem's B (the weight) and
// its B the problem's A; M and N, the majorness flags, pitches and batch strides trade places. The
// epilogue arguments stay in the output's orientation (the reduce pass runs them).
inline GemmLaunch swap_ab(const GemmLaunch& L) {
  GemmLaunch S = L;
  GemmProblem& q = S.p;
  const GemmProblem& p = L.p;
  q.m = p.n; q.n = p.m;
  q.a_mn_major = p.b_mn_major; q.b_mn_major = p.a_mn_major;
  q.lda = p.ldb; q.ldb = p.lda;
  q.stride_a = p.stride_b; q.stride_b = p.stride_a;
  q.a_type = p.b_type; q.b_type = p.a_type;
  std::swap(S.inputs[static_cast<int>(Role::kA)], S.inputs[static_cast<int>(Role::kB)]);
  return S;
}

// The reduce pass of a split-K / swap-AB plan (splitk_reduce.cuh) over rows x n outputs.
inline std::string launch_splitk_reduce(const GemmLaunch& L, int splits, int64_t rows, int n, int ws_ld) {
  const int64_t threads = rows * ((n + kReduceCols - 1) / kReduceCols);
  const int64_t blocks = (threads + kReduceThreads - 1) / kReduceThreads;
  if (blocks >= (int64_t(1) << 31)) return "the split-K reduce grid is too large";
  const epilogue::Args e = kernel_params(L).epi;  // the output's orientation (swap-AB leaves it alone)
  // A programmatic dependent launch (the GEMM kernels trigger it once all their CTAs are resident);
  // correctness does not depend on it: the reduce kernel starts with griddepcontrol.wait.
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.gridDim = dim3(static_cast<unsigned>(blocks), 1, 1);
  cfg.blockDim = dim3(kReduceThreads, 1, 1);
  cfg.stream = L.stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  cudaError_t err = launch_kernel(cfg, splitk_reduce_kernel<kReduceCols>, static_cast<const float*>(L.ws),
                                       splits, rows, n, ws_ld, e);
  if (err == cudaSuccess) err = cudaGetLastError();
  if (err != cudaSuccess) return std::string("split-K reduce launch failed: ") + cudaGetErrorString(err);
  return "";
}

// Flags that only some kernels' configs have, false where C lacks the member: the sm_90a Config's kTailSplit
// (its last wave shared along K) and kSplitsInKernel (K splits summed in the kernel, menu::k_splits).
#define JT_CONFIG_FLAG(fn, member)                                                    \
  template <class C, class = void>                                                    \
  struct fn##_t : std::false_type {};                                                 \
  template <class C>                                                                  \
  struct fn##_t<C, std::void_t<decltype(C::member)>> : std::bool_constant<C::member> {}; \
  template <class C>                                                                  \
  constexpr bool fn() { return fn##_t<C>::value; }
JT_CONFIG_FLAG(tail_split_of, kTailSplit)
JT_CONFIG_FLAG(splits_in_kernel_of, kSplitsInKernel)
JT_CONFIG_FLAG(pair_splits_of, kPairSplits)
JT_CONFIG_FLAG(swap_tail_of, kSwapTail)
JT_CONFIG_FLAG(c_map_of, kCMap)  // the sm_90a kernel's sixth tensor map (c, for its derivative epilogue)
JT_CONFIG_FLAG(act_grad_of, kActGrad)  // ... which its kActGrad twins read
#undef JT_CONFIG_FLAG

// Builds the maps and launches `kernel` on a persistent grid: one CTA (or one cluster of
// CTAS_PER_TILE CTAs, launched with that cluster shape) per tile, at most as many as can be resident
// at once (#SMs, or the number of clusters the GPU can co-schedule, which can be fewer than
// #SMs / cluster size when a GPC has an odd number of SMs).
// kTails: the kernel takes two more maps after the output's, A and B again in boxes of their last row block's
// rows (TailBoxes; zeroed and unused where that operand has no tail).
template <class C, bool kTails = false, typename Kernel>
std::string launch_persistent(Kernel kernel, const GemmLaunch& L) {
  CUtensorMap map_a, map_b;
  std::string err = encode_ab_maps<C>(L, &map_a, &map_b);
  if (!err.empty()) return err;
  // Per-device state (see DeviceSlots): the dynamic shared-memory limit is raised on each device before
  // its first launch there, and the cluster occupancy is asked per device.
  static DeviceSlots state;  // one per instantiation, zero-initialised (no guard, no lock)
  err = raise_smem_limit(kernel, C::SMEM_BYTES, L.device, state.ready);
  if (!err.empty()) return err;
  constexpr int kCluster = C::CTAS_PER_TILE;
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  cfg.blockDim = dim3(C::NUM_THREADS, 1, 1);
  cfg.dynamicSmemBytes = C::SMEM_BYTES;
  cfg.stream = L.stream;
  if constexpr (kCluster > 1) set_cluster_x(cfg, attr, kCluster);
  int resident = L.num_sms / kCluster;
  if constexpr (kCluster > 1) {
    int clusters = 0;
    err = resident_clusters(kernel, cfg, kCluster, L.num_sms, L.device, state.clusters, clusters);
    if (!err.empty()) return err;
    resident = std::min(resident, clusters);
  }
  const GemmProblem& p = L.p;
  const int64_t tiles = p.batch * ((p.m + C::TILE_M - 1) / C::TILE_M) * ((p.n + C::TILE_N - 1) / C::TILE_N);
  epilogue::KernelParams prm = kernel_params(L);
  int64_t units = tiles;
  // Split-K / swap-AB: the partial sums go to the workspace in the output's orientation (for swap-AB
  // the launcher swapped the operands, so the output is the kernel's n x m), then the reduce pass.
  const int64_t out_rows = p.batch * (C::kPartialOut == 2 ? p.n : p.m);
  const int64_t out_cols = C::kPartialOut == 2 ? p.m : p.n;
  // menu::k_splits: splits < -1 are summed inside the kernel (each tile's splits one cluster, one unit per CTA,
  // the sums meeting in distributed shared memory: split_fixup; a weight-multicast pair entry's through the workspace,
  // pair_fixup), else by the reduce pass (one split: the kernel finishes the output itself).
  const bool in_kernel = menu::splits_in_kernel(p.splits);
  if (in_kernel && !splits_in_kernel_of<C>() && !pair_splits_of<C>())
    return "K splits summed inside the kernel (splits " + std::to_string(p.splits) + "): not this kernel's";
  if constexpr (C::kPartialOut != 0) {
    const int64_t k_blocks = (p.k + C::STAGE_K - 1) / C::STAGE_K, s = menu::k_splits(p.splits);  // ring slots
    if (s < 1 || s > k_blocks)
      return "split-K: splits " + std::to_string(s) + " outside [1, " + std::to_string(k_blocks) + "] K blocks";
    if (tiles * s >= (int64_t(1) << 31)) return "split-K: too many work units";
    units = tiles * s;
    const bool pair = in_kernel && pair_splits_of<C>();  // a pair's splits meet through the workspace (pair_fixup)
    if (in_kernel && !pair) {  // clusters of s CTAs, one unit per CTA: a grid of every unit (menu::in_kernel_refusal)
      if (s > menu::kMaxClusterSplits)
        return "K splits summed inside the kernel: at most " + std::to_string(menu::kMaxClusterSplits) + ", not " +
               std::to_string(s);
      if (kCluster != 1) return "K splits summed inside the kernel: not for an entry with clusters of its own";
      set_cluster_x(cfg, attr, static_cast<int>(s));
      resident = static_cast<int>(units);  // a CTA meets only its cluster: beyond what the GPU holds, waves
    }
    const int64_t ld = !in_kernel && s > 1 ? menu::workspace_ld(out_cols) : 0;  // ws_ld 0: finished in the kernel
    const int64_t tile_floats = int64_t(C::BLOCK_M) * C::BLOCK_N;
    const int64_t need = pair ? menu::pair_split_ws_floats(tiles, s, kCluster, tile_floats) : s * out_rows * ld;
    if (need > 0 && (L.ws == nullptr || L.ws_count < need))
      return "split-K: the workspace has " + std::to_string(L.ws_count) + " floats, the plan needs " +
             std::to_string(need);
    if (pair && resident < s) return "K splits of a weight-multicast pair: fewer resident pairs than splits";
    prm.ws = need > 0 ? L.ws : nullptr;
    prm.ws_ld = static_cast<int>(ld);
    prm.splits = static_cast<int>(s);
    if (pair && s > 1) {  // the ready flags after the slots
      const int64_t slots = tiles * (s - 1) * kCluster;
      err = ready_workspace(L, prm, need, slots * tile_floats, slots);
      if (!err.empty()) return "pair splits: " + err;
    }
  }
  cfg.gridDim = dim3(kCluster * static_cast<int>(std::min<int64_t>(units, resident)), 1, 1);
  if constexpr (tail_split_of<C>() || swap_tail_of<C>()) {
    // The last, partial wave (and the share's whole waves before it) shared out along K by the share's CTAs
    // (menu::tail_share; sched::TailSplit; the plan's choice, forced or menu::tail_split_default): a dense
    // entry's share is p.splits, a swap-AB entry's menu::swap_tail_share (ws_ld then carries minus the tiles);
    // where the grid does not fit the plan or the workspace is short, the tiles run whole.
    const int64_t share = tail_split_of<C>() ? p.splits : menu::swap_tail_share(p.splits);
    const int64_t grid = cfg.gridDim.x, ctas = menu::tail_share(share, grid).ctas;
    const int64_t k_blocks = (p.k + C::STAGE_K - 1) / C::STAGE_K;
    if (share > 0 && menu::tail_split_ok(tiles, grid, share, k_blocks) && L.ws != nullptr &&
        L.ws_count >= menu::tail_ws_floats(ctas, int64_t(C::TILE_M) * C::BLOCK_N)) {
      const int64_t dealt = menu::tail_tiles(tiles, grid, share);  // the tiles dealt out (sched::TailSplit)
      prm.ws = L.ws;
      prm.splits = static_cast<int>(ctas);
      prm.ws_ld = static_cast<int>(tail_split_of<C>() ? dealt : -dealt);
      err = ready_workspace(L, prm, menu::tail_ws_floats(ctas, int64_t(C::TILE_M) * C::BLOCK_N),
                            ctas * int64_t(C::TILE_M) * C::BLOCK_N, ctas);  // the ready flags after the slots
      if (!err.empty()) return "tail split: " + err;
    }
  }
  // Every kernel takes a third map, for the TMA-store epilogue (zeroed and unused otherwise).
  CUtensorMap map_out = {};
  if constexpr (C::kTmaStore) {
    // The output [batch, m, n] (row-major, contiguous) in boxes of OUT_BOX_ROWS rows x 128 bytes.
    err = tma::encode_operand(&map_out, L.out, p.out_type, p.n, p.m, p.batch, p.n, p.m * p.n,
                              128 / dtype_bytes(p.out_type), C::OUT_BOX_ROWS);
    if (!err.empty()) return "output (TMA store epilogue): " + err;
  }
  // The derivative epilogue in the kernel (menu::act_grad_in_kernel; the handler asked sm90_act_grad_in_kernel): c, the
  // output's shape and type, through a map of the output's geometry (kernels/sm90_act_grad.cuh), not added to the
  // product (epi.c null); the flag tells the kernel. Nowhere else: the handler's second pass runs it.
  CUtensorMap map_c = {};
  if (p.act_grad) {
    if constexpr (act_grad_of<C>()) {
      if (p.out_type != DType::kBF16 || L.in(Role::kC) == nullptr)
        return "the activation-derivative epilogue: a bf16 output and c (menu::act_grad_in_kernel)";
      err = tma::encode_operand(&map_c, L.in(Role::kC), p.out_type, p.n, p.m, p.batch, p.n, p.m * p.n,
                                128 / dtype_bytes(p.out_type), C::OUT_BOX_ROWS);
      if (!err.empty()) return "c (the activation-derivative epilogue): " + err;
      prm.epi.c = nullptr;
      prm.epi.activation |= kActGradFlag;
    } else {
      return "the activation-derivative epilogue: not this kernel's (menu::act_grad_in_kernel)";
    }
  }
  cudaError_t e;
  if constexpr (kTails) {
    const TailBoxes<C> tails(p.m, p.n);
    CUtensorMap map_a_tail = {}, map_b_tail = {};
    err = encode_ab_maps<C>(L, tails.a_rows ? &map_a_tail : nullptr, tails.b_rows ? &map_b_tail : nullptr,
                            tails.a_rows, tails.b_rows);
    if (!err.empty()) return "last row block's box: " + err;
    if constexpr (c_map_of<C>())
      e = launch_kernel(cfg, kernel, map_a, map_b, map_out, map_a_tail, map_b_tail, map_c, prm);
    else
      e = launch_kernel(cfg, kernel, map_a, map_b, map_out, map_a_tail, map_b_tail, prm);
  } else {
    e = launch_kernel(cfg, kernel, map_a, map_b, map_out, prm);
  }
  if (e == cudaSuccess) e = cudaGetLastError();
  if (e != cudaSuccess) return std::string("kernel launch failed: ") + cudaGetErrorString(e);
  if constexpr (C::kPartialOut != 0)
    if (p.splits > 1 && !in_kernel) return launch_splitk_reduce(L, p.splits, out_rows, static_cast<int>(out_cols), prm.ws_ld);
  return "";
}

// The block-scaled launchers' operand types: calls run(DTypeTag<A>{}, DTypeTag<B>{}) for an 8-bit MX pair
// (e4m3 / e5m2, any mix), else says what is missing.
template <DType T>
struct DTypeTag {
  static constexpr DType value = T;
};
template <class Run>
std::string dispatch_mx8(const GemmProblem& p, const char* arch, Run&& run) {
  using D = DType;
  if (p.a_type == D::kE4M3 && p.b_type == D::kE4M3) return run(DTypeTag<D::kE4M3>{}, DTypeTag<D::kE4M3>{});
  if (p.a_type == D::kE4M3 && p.b_type == D::kE5M2) return run(DTypeTag<D::kE4M3>{}, DTypeTag<D::kE5M2>{});
  if (p.a_type == D::kE5M2 && p.b_type == D::kE4M3) return run(DTypeTag<D::kE5M2>{}, DTypeTag<D::kE4M3>{});
  if (p.a_type == D::kE5M2 && p.b_type == D::kE5M2) return run(DTypeTag<D::kE5M2>{}, DTypeTag<D::kE5M2>{});
  return std::string("no ") + arch + " block-scaled kernel for " + dtype_name(p.a_type) + " x " +
         dtype_name(p.b_type) + " (8-bit MX operands; 4-bit x 4-bit: the sm_100a/sm_103a kernel only)";
}

}  // namespace jax_tmem
