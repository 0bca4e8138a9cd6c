#!/usr/bin/env bash
# Issue 15, one H200 call per dtype (~5-8 min; builds build/jt_new once, a warm machine reuses it): what each of
# the layer's four GEMMs costs or gains against XLA's inside the decode step: variants with one projection on
# XLA's dot (bench_decode.py's "K,N:xla"), the two narrow ones (QKV, O) together, and those two with the gate / up
# on the swap-AB 256-token entry 19; 8B and 70B, weights (N, K), 136-256 tokens ($MS).
#   bash docs/wip/run_hybrid.sh bfloat16|float8_e4m3fn [models]     (logs under $OUT)
set -u
dt=$1; models=${2:-8b,70b}
O=${OUT:-/tmp/o}; mkdir -p "$O"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
if [ ! -f build/jt_new/jax_tmem/__init__.py ]; then
  python3 -m pip install --no-build-isolation --no-deps --target build/jt_new -C build-dir=build/b_new --upgrade . \
    > "$O/build.log" 2>&1 || { echo BUILD FAILED; tail -30 "$O/build.log"; exit 1; }
  echo "built $(el)"
fi
Q="4096,6144:xla/8192,10240:xla"; OP="4096,4096:xla/8192,8192:xla"; G="4096,28672:xla/8192,57344:xla"
V="xq=$Q;xo=$OP;xg=$G;xqo=$Q/$OP;xqo_g19=$Q/$OP/4096,28672:19:1/8192,57344:19:1"
left=$(( 590 - ($(date +%s) - t0) ))
PYTHONPATH=build/jt_new timeout $left python3 -P benchmarks/bench_decode.py --models $models --layouts NK \
  --ms ${MS:-136,160,200,256} --rounds 2 --variants "$V" --dtypes $dt --out "$O/h_$dt" > "$O/hybrid_$dt.log" 2>&1
echo "bench $dt rc=$? $(el)"; grep -E "M=|variant|rc=|Error" "$O/hybrid_$dt.log" | cut -c1-140 | tail -100
