#!/usr/bin/env bash
# Issue 15, the next device session's second call (after run_s73a.sh on the same machine, ~5 min; a fresh machine
# builds first, entry 39 included): the 70B layer at 176 / 192 tokens (0.84-0.86 x XLA, H100, 2026-12-07: its QKV on
# the dense entry 2, its O / down on 38 with one split): the QKV on 37 (192 tokens wide, 4x1 clusters, 80 CTAs), the
# O / down on 39 (38's tiles in weight-multicast pairs, a pair per K split), both, the gate / up on 39 with one
# split (cuBLAS's form at 144 tokens: 128x80 1x2); then each kernel at 192 tokens.
#   bash docs/wip/run_s73b.sh        (logs under $OUT)
sed -i -E 's/(k128x96SwapABClusterN2, 39, .*kSwapAB, )kSweep/\1kCandidate/' cpp/include/jax_tmem/sm90_configs.def
Q=8192,10240; OP=8192,8192; D=28672,8192
V="q37=$Q:37:1;od39=$OP:39:-2/$D:39:-2;q37od39=$Q:37:1/$OP:39:-2/$D:39:-2;g39=8192,57344:39:1" TESTS= MS=192,176 \
  exec bash docs/wip/run_s72.sh
