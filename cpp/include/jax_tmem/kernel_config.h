// jax_tmem: kernel configurations as data (host code, no CUDA). Each arch's configurations are listed
// once, in sm90_configs.def / sm100_configs.def; this header turns each list into an enum (the names the
// heuristic in menu.h uses) and a constexpr table of KernelConfig structs, which the dispatchers
// instantiate (cpp/src/sm90_launch.cuh, sm100_launch.cuh), the extension prints (isa.kernel_menu) and the
// GPU tests iterate. An id is only an identity: what an entry is (split-K, swap-AB, pair, epilogue) is
// read from its fields.
#pragma once

#include <cstdint>
#include <iterator>
#include <string>

#ifndef JAX_TMEM_ALL_CONFIGS
#define JAX_TMEM_ALL_CONFIGS 0  // CMake's JAX_TMEM_CONFIGS=all sets it to 1
#endif

namespace jax_tmem::menu {

// kWgmma (decode entries only): wgmma with the weight as its register A, one warpgroup per K chunk.
enum class Schedule : uint8_t { kCooperative, kPingPong, kWgmma };
enum class Epilogue : uint8_t { kRegister, kStaged, kTmaStore, kTmaStoreOverlap, kPartial };
// kSplitK / kSwapAB are the kernels' kPartialOut codes (1, 2). kDecode: sm_90a's mma.sync decode entries
// (kernels/dense_decode.cuh), K split over a CTA's warps and summed in it: no partials, no workspace.
enum class Split : uint8_t { kNone = 0, kSplitK = 1, kSwapAB = 2, kDecode = 3 };
// kCandidate: always compiled and forcible (config=), but the heuristic does not choose it: an entry whose plan is
// still to be measured against the heuristic's (bench_decode.py --variants) before a rule takes it. kRule: compiled
// and chosen like kHeuristic, but only by its own rule in menu.h, never by width (narrowest / widest).
enum class Build : uint8_t { kHeuristic, kSweep, kCandidate, kRule };

// sm_90a: 128-byte K chunks per ring slot. The 64-row entries (one consumer warpgroup) stage 4, so that
// each TMA request reads 512 contiguous bytes of a weight row; the 128-row entries one. (The kernel's
// Config::K_CHUNKS and the plan's K-split bound both read this.)
constexpr int sm90_k_chunks(int block_m) { return block_m == 64 ? 4 : 1; }

// kHeuristic and kCandidate entries are always compiled; kSweep ones with CMake's JAX_TMEM_CONFIGS=all.
constexpr bool built(Build b) { return b != Build::kSweep || JAX_TMEM_ALL_CONFIGS; }

struct KernelConfig {
  int id;
  const char* entry;  // the enum name, e.g. "k128x256TmaStore"
  const char* name;   // in words, for the decision log
  // cluster_m > 1: clusters of that many CTAs along M sharing B (multicast); < -1: of -cluster_m CTAs along N sharing
  // A (sm_90a swap-AB: token tiles sharing the weight tile); 1: none.
  int block_m, block_n, stages, cluster_m;
  Schedule schedule;
  Epilogue epilogue;
  Split split;
  Build build;
  int k_chunks;  // 128-byte K chunks per ring slot

  constexpr bool built() const { return menu::built(build); }
  constexpr bool partial() const { return split == Split::kSplitK || split == Split::kSwapAB; }
  constexpr bool swap_ab() const { return split == Split::kSwapAB; }
  constexpr int cluster_ctas() const { return cluster_m < 0 ? -cluster_m : cluster_m; }
};

inline const char* to_string(Schedule s) {
  return s == Schedule::kPingPong ? "ping-pong" : s == Schedule::kWgmma ? "wgmma" : "cooperative";
}
inline const char* to_string(Epilogue e) {
  switch (e) {
    case Epilogue::kRegister: return "register";
    case Epilogue::kStaged: return "staged";
    case Epilogue::kTmaStore: return "tma-store";
    case Epilogue::kTmaStoreOverlap: return "tma-store-overlap";
    case Epilogue::kPartial: return "partial";
  }
  return "?";
}
inline const char* to_string(Split s) {
  return s == Split::kSplitK ? "split-k" : s == Split::kSwapAB ? "swap-ab" : s == Split::kDecode ? "decode" : "none";
}

// ---- the tables ---------------------------------------------------------------------------------------
enum class Sm90 : int {
#define JT_SM90_CONFIG(entry, id, bm, bn, st, sched, epi, cm, split, build, name) entry = id,
#include "jax_tmem/sm90_configs.def"
#undef JT_SM90_CONFIG
};

inline constexpr KernelConfig kSm90Configs[] = {
#define JT_SM90_CONFIG(entry, id, bm, bn, st, sched, epi, cm, split, build, name) \
  {id, #entry, name, bm, bn, st, cm, Schedule::sched, Epilogue::epi, Split::split, Build::build, sm90_k_chunks(bm)},
#include "jax_tmem/sm90_configs.def"
#undef JT_SM90_CONFIG
};

enum class Sm100 : int {
#define JT_SM100_CONFIG(entry, id, bm, bn, st, epi, split, build, name) entry = id,
#include "jax_tmem/sm100_configs.def"
#undef JT_SM100_CONFIG
};

inline constexpr KernelConfig kSm100Configs[] = {
#define JT_SM100_CONFIG(entry, id, bm, bn, st, epi, split, build, name) \
  {id, #entry, name, bm, bn, st, bm / 128, Schedule::kCooperative, Epilogue::epi, Split::split, Build::build, 1},
#include "jax_tmem/sm100_configs.def"
#undef JT_SM100_CONFIG
};

// One arch's list as a range.
struct ConfigTable {
  const KernelConfig* begin_;
  const KernelConfig* end_;
  constexpr const KernelConfig* begin() const { return begin_; }
  constexpr const KernelConfig* end() const { return end_; }
  // The entry with this id, or null.
  constexpr const KernelConfig* find(int id) const {
    for (const KernelConfig& c : *this)
      if (c.id == id) return &c;
    return nullptr;
  }
  // The entry the heuristic names by its enum value (always present: the enum comes from the table).
  template <class E>
  constexpr const KernelConfig& at(E e) const { return *find(static_cast<int>(e)); }
  // The narrowest entry with this split whose block_n holds `cols` (null if none): swap-AB by M. With
  // `block_m` > 0, among the entries of that many rows only. Never a kCandidate or a kRule entry (sm_90a 37 / 38:
  // menu::sm90_wide_tokens / sm90_token_tiles), nor a swap-AB entry in clusters of its own.
  const KernelConfig* narrowest(Split split, int64_t cols, int block_m = 0) const {
    const KernelConfig* best = nullptr;
    for (const KernelConfig& c : *this)
      if (c.split == split && c.block_n >= cols && (block_m == 0 || c.block_m == block_m) &&
          c.build != Build::kCandidate && c.build != Build::kRule && c.cluster_m == 1 &&
          (!best || c.block_n < best->block_n))
        best = &c;
    return best;
  }
  // The widest block_n of the entries with this split (0 if none), kCandidate and kRule entries aside.
  constexpr int widest(Split split) const {
    int w = 0;
    for (const KernelConfig& c : *this)
      if (c.split == split && c.build != Build::kCandidate && c.build != Build::kRule && c.block_n > w) w = c.block_n;
    return w;
  }
  // "id (name), ..." of every entry: for the error on a config outside the menu.
  std::string list() const {
    std::string s;
    for (const KernelConfig& c : *this)
      s += (s.empty() ? "" : ", ") + std::to_string(c.id) + " (" + c.name + (c.built() ? "" : ", not built") + ")";
    return s;
  }
};

inline constexpr ConfigTable kSm90Table{std::begin(kSm90Configs), std::end(kSm90Configs)};
inline constexpr ConfigTable kSm100Table{std::begin(kSm100Configs), std::end(kSm100Configs)};

// The ids are identities: unique per arch, and -1 stays "heuristic".
constexpr bool ids_unique(const ConfigTable& t) {
  for (const KernelConfig* a = t.begin(); a != t.end(); ++a) {
    if (a->id < 0) return false;
    for (const KernelConfig* b = a + 1; b != t.end(); ++b)
      if (a->id == b->id) return false;
  }
  return true;
}
static_assert(ids_unique(kSm90Table) && ids_unique(kSm100Table), "kernel config ids must be unique and >= 0");

// What "not built" says, everywhere (launcher, trace time).
inline std::string not_built_message(const KernelConfig& c) {
  return "config " + std::to_string(c.id) + " (" + c.name +
         ") is not compiled in this build: rebuild with -C cmake.define.JAX_TMEM_CONFIGS=all";
}

}  // namespace jax_tmem::menu
