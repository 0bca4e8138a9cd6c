// jax_tmem: host launch of one sm_100a/sm_103a kernel instantiation: run_tile<A, B, AMN, BMN> runs every
// menu entry of one kernel family. The dispatcher (sm100_gemm.cu) only declares the families; they are
// instantiated in generated translation units (instances.def, CMakeLists.txt), built in parallel.
#pragma once

#include <string>

#include "jax_tmem/kernels/sm100_gemm.cuh"
#include "jax_tmem/kernels/sm100_gemm_2cta.cuh"
#include "jax_tmem/menu.h"
#include "launch_common.cuh"

namespace jax_tmem::sm100 {

template <class C>
std::string run(const GemmLaunch& L) {
  return launch_persistent<C, true>(sm100_gemm_kernel<C>, L);  // with tail maps (TailBoxes)
}

// The CTA-pair kernel (block_m 256): a (2,1,1) cluster, cta_group::2.
template <class C>
std::string run_2cta(const GemmLaunch& L) {
  return launch_persistent<C>(sm100_gemm_2cta_kernel<C>, L);
}

// One configuration (a line of jax_tmem/sm100_configs.def) of one kernel family, as a kernel Config.
template <DType A, DType B, bool AMN, bool BMN, int BM, int BN, int ST, menu::Epilogue EPI, menu::Split SPLIT>
std::string run_config(const GemmLaunch& L) {
  constexpr bool kTma = EPI == menu::Epilogue::kTmaStore;
  if constexpr (SPLIT != menu::Split::kNone && A == DType::kS8) {
    return "split-K / swap-AB entries take no int8 (exact s32 sums would be added in f32)";
  } else if constexpr (SPLIT == menu::Split::kSwapAB && BMN) {
    // The launcher swapped the operands: B is the activation, K-major, 16-64 rows a tile.
    return "swap-AB entries need a K-major lhs (the activation)";
  } else if constexpr (BM == 256 && A == DType::kS8) {
    return run<Config<A, B, 256, 4, AMN, BMN, kTma>>(L);  // no kind::i8 pair kernel: 128x256 1-CTA
  } else if constexpr (BM == 256) {
    return run_2cta<Config2Cta<A, B, BN, ST, AMN, BMN, kTma>>(L);
  } else {
    return run<Config<A, B, BN, ST, AMN, BMN, kTma, static_cast<int>(SPLIT)>>(L);
  }
}

// Every configuration of the family: one case per line of sm100_configs.def (see sm90_launch.cuh).
template <DType A, DType B, bool AMN, bool BMN>
std::string run_tile(const GemmLaunch& L, const menu::KernelConfig& c) {
  switch (static_cast<menu::Sm100>(c.id)) {
#define JT_SM100_CONFIG(entry, id, bm, bn, st, epi, split, build, name)                                        \
  case menu::Sm100::entry:                                                                                    \
    if constexpr (menu::built(menu::Build::build))                                                           \
      return run_config<A, B, AMN, BMN, bm, bn, st, menu::Epilogue::epi, menu::Split::split>(L);            \
    else                                                                                                      \
      return menu::not_built_message(c);
#include "jax_tmem/sm100_configs.def"
#undef JT_SM100_CONFIG
  }
  return "unknown sm_100a config " + std::to_string(c.id);
}

}  // namespace jax_tmem::sm100
