#!/usr/bin/env bash
# Issue 15, one H200 call per dtype (~5-8 min; builds build/jt_new once, a warm machine reuses it): what each of
# the layer's four GEMMs costs or gains against XLA's inside the decode step: variants with one projection on
# XLA's dot (bench_decode.py's "K,N:xla"), the two narrow ones (QKV, O) together, and those two with the gate / up
# on the swap-AB 256-token entry 19; 8B and 70B, weights (N, K), 136-256 tokens ($MS).
#   bash docs/wip/run_hybrid.sh bfloat16|float8_e4m3fn [models]     (logs under $OUT)
set -u
dt=$1; models=${2:-8b,70b}
. docs/wip/build_new.sh
Q="4096,6144:xla/8192,10240:xla"; OP="4096,4096:xla/8192,8192:xla"; G="4096,28672:xla/8192,57344:xla"
V="xq=$Q;xo=$OP;xg=$G;xqo=$Q/$OP;xqo_g19=$Q/$OP/4096,28672:19:1/8192,57344:19:1"
left=$(( 590 - ($(date +%s) - t0) ))
PYTHONPATH=build/jt_new timeout $left python3 -P benchmarks/bench_decode.py --models $models --layouts NK \
  --ms ${MS:-136,160,200,256} --rounds 2 --variants "$V" --dtypes $dt --out "$O/h_$dt" > "$O/hybrid_$dt.log" 2>&1
echo "bench $dt rc=$? $(el)"; grep -E "M=|variant|rc=|Error" "$O/hybrid_$dt.log" | cut -c1-140 | tail -100
