#!/usr/bin/env bash
# Issue 15 (one call, ~5 min with the build): the 70B layer at 144 / 160 tokens is 0.79-0.84 x XLA (H100,
# 2026-12-07, XLA at 94-98 % of copy): other plans per projection inside the step. Today: QKV on the dense 128x64
# entry 2 (two 128-row token tiles, the last wave shared), O / down on 41 (one split, 128 CTAs), gate / up on 40
# (448 tiles: 3.4 waves run as 4). Variants: the gate / up on 35 with its last wave (and the one before) shared,
# the QKV on swap-AB 41 / 40 / 48-pairs, O / down on 48 pairs or 41 with 2 in-kernel splits; then each kernel of
# one execution (dispatch_probe --kernels), ours and XLA's (docs/wip/run_s72.sh runs them).
#   bash docs/wip/run_plans70.sh        (logs under $OUT)
G=8192,57344; Q=8192,10240; OP=8192,8192; D=28672,8192
V="g35=$G:35:-232;g35w=$G:35:-364;q41=$Q:41:1;q40=$Q:40:1;q48=$Q:48:-2;od48=$OP:48:-2/$D:48:-2;od41=$OP:41:-2/$D:41:-2"
V="$V;xqo=$Q:xla/$OP:xla;xqo_g35=$Q:xla/$OP:xla/$G:35:-232"
V="$V" TESTS= MS=144,160 exec bash docs/wip/run_s72.sh
