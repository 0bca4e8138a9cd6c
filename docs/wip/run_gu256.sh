#!/usr/bin/env bash
# One H200 call (~8 min): entry 51 (swap-AB 256x160, two m64 blocks per consumer warpgroup, cuBLAS's gate / up tile
# at 160 tokens) against 40: stream_probe tlgu (per-CTA marks, graph-timed, bitwise 51 vs 40 at 1 and 2 splits), the
# package built (default configs), entry 51's GPU tests, and the 8B decode step with the gate / up forced onto 51.
#   bash docs/wip/run_gu256.sh        (logs under $OUT; never a bare `wait` here)
set -u
O=${OUT:-/tmp/o}; mkdir -p "$O"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
PYSITE=$(python3 -c "import jaxlib,os;print(os.path.dirname(os.path.dirname(jaxlib.__file__)))")
( python3 -m pip install -v --no-build-isolation --no-deps --upgrade --target /tmp/jt_new -C build-dir=/tmp/b_new . \
    > "$O/build_new.log" 2>&1; echo "new rc=$?" >> "$O/build_new.log" ) &
p1=$!
nvcc -std=c++17 -O3 -arch=sm_90a --expt-relaxed-constexpr -DJT_TIMELINE -I $PYSITE/jaxlib/include -Icpp/include \
  -Icpp/src -o /tmp/sp scripts/stream_probe.cu > "$O/build_sp.log" 2>&1
echo "stream_probe built rc=$? $(el)"
timeout 60 /tmp/sp tlgu > "$O/tlgu.log" 2>&1
echo "tlgu rc=$? $(el)"; grep -E "cold|warm|MMAs retired|epilogue done|graph|bitwise|ours" "$O/tlgu.log"
wait "$p1"
echo "built $(el)"; tail -1 "$O/build_new.log"; grep -ih "spill" "$O/build_new.log" | grep -v " 0 bytes spill" | head -5
PYTHONPATH=/tmp/jt_new timeout 150 python3 -P -m pytest -q -p no:cacheprovider tests/test_gpu_gemm.py \
  -k "swap256x160c4 or (swap_ab_plain and config51) or (every_menu_config and config51) or wide_tokens" -rs > "$O/tests.log" 2>&1
echo "tests rc=$? $(el)"; grep -E "passed|failed|^(FAILED|ERROR)|rel err|Error" "$O/tests.log" | head -20
B="python3 -P benchmarks/bench_decode.py --models 8b --dtypes bfloat16 --layouts NK,KN --ms 136,160 --rounds 3"
PYTHONPATH=/tmp/jt_new timeout 200 $B --variants "g51=4096,28672:51:1" --out "$O/b_new" > "$O/bench.log" 2>&1
echo "bench rc=$? $(el)"; grep -v "^ *jax\|Warn" "$O/bench.log" | tail -14
