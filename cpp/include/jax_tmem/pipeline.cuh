// jax_tmem: pipeline state for mbarrier rings (shared by sm_90a and sm_100a kernels).
//
// A ring of kStages slots, each with a "full" barrier (data landed, signalled by TMA complete_tx) and
// an "empty" barrier (consumers are done with the slot). Producer and consumers each hold a
// PipelineState and advance it in lockstep over the same (tile, k-block) sequence.
// Phase convention: consumers wait full[s] with parity `phase`; the producer waits empty[s] with
// parity `phase ^ 1`, which passes immediately on a fresh barrier (ring starts empty).
#pragma once

#include <cstdint>

namespace jax_tmem {

// The kernel's dynamic shared memory rounded up to 1024 bytes: the 128B swizzle (TMA and the MMA
// descriptors) is a function of address bits [4, 10), so every swizzled tile must start 1024-aligned.
// Each kernel's SMEM_BYTES budgets the extra 1024 bytes.
__device__ __forceinline__ uint8_t* aligned_dynamic_smem() {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
}

template <int kStages>
struct PipelineState {
  int stage = 0;
  uint32_t phase = 0;

  __device__ __forceinline__ void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1u;
    }
  }

  // Skips n slots (another consumer's k-blocks in a ping-pong schedule).
  __device__ __forceinline__ void advance_by(int n) {
    const int next = stage + n;
    phase ^= static_cast<uint32_t>((next / kStages) & 1);
    stage = next % kStages;
  }
};

}  // namespace jax_tmem
