#!/usr/bin/env bash
# One H200 call (~5 min): the swap-AB weight's TMA loads with an L2 evict-first policy (this tree) against the same tree
# without it (docs/wip/weight_evict_first.patch reversed): stream_probe tl160 graph-timed for both (the 8B QKV / O /
# down / gate-up kernels at 160 tokens, and the pair plans bitwise against the reduce pass); the package built
# (default configs); the swap-AB GPU tests; the 8B decode step (xla / ours).
#   bash docs/wip/run_evict.sh        (logs under $OUT; never a bare `wait` here)
set -u
O=${OUT:-/tmp/o}; mkdir -p "$O"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
PYSITE=$(python3 -c "import jaxlib,os;print(os.path.dirname(os.path.dirname(jaxlib.__file__)))")
( python3 -m pip install -v --no-build-isolation --no-deps --upgrade --target /tmp/jt_new -C build-dir=/tmp/b_new . \
    > "$O/build_new.log" 2>&1; echo "new rc=$?" >> "$O/build_new.log" ) &
pb=$!
rm -rf /tmp/t_base && mkdir -p /tmp/t_base && cp -r cpp /tmp/t_base/
(cd /tmp/t_base && patch -R -p1 < "$OLDPWD/docs/wip/weight_evict_first.patch") > "$O/unpatch.log" 2>&1 || { echo UNPATCH FAILED; cat "$O/unpatch.log"; exit 1; }
F="-std=c++17 -O3 -arch=sm_90a --expt-relaxed-constexpr -DJT_TIMELINE -I $PYSITE/jaxlib/include"
( nvcc $F -Icpp/include -Icpp/src -o /tmp/sp_new scripts/stream_probe.cu > "$O/build_sp_new.log" 2>&1 ) &
p1=$!
( nvcc $F -I/tmp/t_base/cpp/include -I/tmp/t_base/cpp/src -o /tmp/sp_base scripts/stream_probe.cu > "$O/build_sp_base.log" 2>&1 ) &
p2=$!
wait "$p1"; wait "$p2"
echo "probes built $(el)"
for r in 1 2; do for v in base new; do
  timeout 60 "/tmp/sp_$v" tl160 > "$O/tl160_${v}_$r.log" 2>&1
  echo "=== $v rc=$? $(el)"; grep -E "graph|bitwise|ours:" "$O/tl160_${v}_$r.log"
done; done
wait "$pb"
echo "package built $(el)"; tail -1 "$O/build_new.log"; grep -ih "spill" "$O/build_new.log" | grep -v " 0 bytes spill" | head -5
PYTHONPATH=/tmp/jt_new timeout 120 python3 -P -m pytest -q -p no:cacheprovider tests/test_gpu_gemm.py tests/test_decode_fp8.py \
  tests/test_splits_in_kernel.py -k "swap_ab_plain or wide_tokens or decode_runs_swap or pair or transpos" -x > "$O/tests.log" 2>&1
echo "tests rc=$? $(el)"; grep -E "passed|failed|^(FAILED|ERROR)|rel err|Error" "$O/tests.log" | head -20
B="python3 -P benchmarks/bench_decode.py --models 8b --dtypes bfloat16,float8_e4m3fn --layouts NK --ms 64,136,160,256 --rounds 3"
PYTHONPATH=/tmp/jt_new timeout 150 $B --out "$O/b_new" > "$O/bench.log" 2>&1
echo "bench rc=$? $(el)"; grep -v "^ *jax\|Warn" "$O/bench.log" | tail -10
