// jax_tmem: host launch of one sm_90a kernel instantiation: run_tile<A, B, AMN, BMN> runs every menu entry
// of one kernel family. The dispatcher (sm90_gemm.cu) only declares the families; they are instantiated
// in generated translation units (instances.def, CMakeLists.txt), which the build compiles in parallel.
#pragma once

#include <algorithm>
#include <string>

#include "dense_decode_launch.cuh"
#include "jax_tmem/kernels/sm90_gemm.cuh"
#include "jax_tmem/menu.h"
#include "launch_common.cuh"

namespace jax_tmem::sm90 {

template <class C>
std::string run(const GemmLaunch& L) {
  if (L.p.act_grad) {  // the derivative epilogue in the kernel: the entry's twin (menu::act_grad_in_kernel)
    if constexpr (C::kHasActGradTwin) {
      using G = typename C::WithActGrad;
      return launch_persistent<G, true>(sm90_gemm_kernel<G>, L);
    } else {
      return "the activation-derivative epilogue: not this entry's (menu::act_grad_in_kernel)";
    }
  }
  if constexpr (C::kPartialOut != 0) {
    // The twin without the fused per-element epilogue (Config::kFusedFinish) unless this launch needs it: a
    // fused epilogue that the kernel finishes itself (one split, or K splits summed in the kernel).
    const bool kernel_finishes = menu::k_splits(L.p.splits) <= 1 || menu::splits_in_kernel(L.p.splits);
    if (!kernel_finishes || epilogue::plain(kernel_params(L).epi)) {
      using P = typename C::template WithFusedFinish<false>;
      return launch_persistent<P, true>(sm90_gemm_kernel<P>, L);
    }
  }
  return launch_persistent<C, true>(sm90_gemm_kernel<C>, L);
}

// One configuration (a line of jax_tmem/sm90_configs.def) of one kernel family, as a kernel Config.
template <DType A, DType B, bool AMN, bool BMN, int BM, int BN, int ST, menu::Schedule SCHED, menu::Epilogue EPI,
          int CM, menu::Split SPLIT>
std::string run_config(const GemmLaunch& L) {
  using menu::Epilogue;
  if constexpr (SPLIT == menu::Split::kDecode) {  // mma.sync, BM weight rows x BN tokens per CTA
    if constexpr (menu::mma_decode_reads(A, B, AMN, BMN, BM, SCHED == menu::Schedule::kWgmma, CM))
      return dd::launch<A, B, BMN, BN / 8, BM / 16, ST, SCHED == menu::Schedule::kWgmma, (CM > 1 ? CM : 1)>(L);
    else
      return menu::kMmaDecodeOperands;
  } else if constexpr (menu::mixed_decode_pair(A, B)) {
    return "16-bit x fp8 operands are read by the decode entries only (a K-major lhs of <= 64 rows)";
  } else if constexpr (SPLIT == menu::Split::kSwapAB && BMN) {
    // The launcher swapped the operands: B is the activation, read as wgmma's narrow B: K-major only.
    return "swap-AB entries need a K-major lhs (the activation)";
  } else if constexpr (menu::sm90_swap_only_family(A, AMN, BMN) && SPLIT != menu::Split::kSwapAB) {
    return "an MN-major 8-bit operand is read by the swap-AB entries only (a decode lhs of <= 64 rows)";
  } else if constexpr (CM < -1 && menu::sm90_swap_only_family(A, AMN, BMN)) {
    return "the weight-multicast swap-AB entries read a K-major or 16-bit weight (an 8-bit (K, N) one is transposed "
           "in shared memory, per CTA)";
  } else if constexpr (!menu::pair_reads_weight(BM, CM, AMN)) {  // (swapped: A is the weight)
    return menu::kPairMnWeight;
  } else if constexpr (BM != 128 && menu::sm90_swap_only_family(A, AMN, BMN)) {
    return "the 64- and 192-row swap-AB entries read a K-major or 16-bit weight (an MN-major 8-bit one: the 128-row "
           "entries)";
  } else {
    return run<Config<A, B, BN, ST, AMN, BMN, SCHED == menu::Schedule::kPingPong, EPI == Epilogue::kStaged, CM,
                      EPI == Epilogue::kTmaStore || EPI == Epilogue::kTmaStoreOverlap, static_cast<int>(SPLIT), BM,
                      EPI == Epilogue::kTmaStoreOverlap>>(L);
  }
}

// Every configuration of the family: one case per line of sm90_configs.def; an entry outside this
// build (build kSweep without JAX_TMEM_CONFIGS=all) is not instantiated and says how to get it.
template <DType A, DType B, bool AMN, bool BMN>
std::string run_tile(const GemmLaunch& L, const menu::KernelConfig& c) {
  switch (static_cast<menu::Sm90>(c.id)) {
#define JT_SM90_CONFIG(entry, id, bm, bn, st, sched, epi, cm, split, build, name)                             \
  case menu::Sm90::entry:                                                                                     \
    if constexpr (menu::built(menu::Build::build))                                                           \
      return run_config<A, B, AMN, BMN, bm, bn, st, menu::Schedule::sched, menu::Epilogue::epi, cm, menu::Split::split>(L); \
    else                                                                                                      \
      return menu::not_built_message(c);
#include "jax_tmem/sm90_configs.def"
#undef JT_SM90_CONFIG
  }
  return "unknown sm_90a config " + std::to_string(c.id);
}

}  // namespace jax_tmem::sm90
