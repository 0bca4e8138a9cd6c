#!/usr/bin/env bash
# Issue 15 (one call, ~8 min with the build): the 70B layer's plans raced inside the decode step, then each kernel of
# one execution (dispatch_probe --kernels), ours and XLA's. Defaults (2026-12-07 19:06): the landed 70B O / down rule
# (entry 48, -2 at 129-160 tokens, K >= 8192) with its GPU tests, against the old plan (41, one split) and with the QKV
# on 40. Env: V (bench_decode.py --variants), MS (tokens), MODELS (the first one is traced), TESTS (a pytest -k
# selection; empty: none).
#   bash docs/wip/run_s72.sh        (logs under $OUT)
set -u
MS=${MS:-144,160}; MODELS=${MODELS:-70b}
. docs/wip/build_new.sh
export PYTHONPATH=build/jt_new
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
Q=8192,10240; OP=8192,8192; D=28672,8192
V=${V-"od41=$OP:41:1/$D:41:1;q40=$Q:40:1"}
TESTS=${TESTS-"129_192 or two_token"}
if [ -n "$TESTS" ]; then
  timeout 200 python3 -P -m pytest -q -p no:cacheprovider tests/test_gpu_gemm.py tests/test_splits_in_kernel.py \
    -k "$TESTS" > "$O/tests.log" 2>&1
  echo "tests rc=$? $(el)"; tail -5 "$O/tests.log"
fi
for dt in bfloat16 float8_e4m3fn; do
  timeout 200 python3 -P benchmarks/bench_decode.py --models $MODELS --layouts NK --ms $MS --rounds 3 \
    --variants "$V" --dtypes $dt --out "$O/p_$dt" > "$O/plans_$dt.log" 2>&1
  echo "bench $dt rc=$? $(el)"; grep -E "M=|variant|Error" "$O/plans_$dt.log" | cut -c1-140
done
f="$O/kernels.log"
left=$(( 585 - ($(date +%s) - t0) ))
timeout $left python3 -P scripts/dispatch_probe.py --programs decode --model ${MODELS%%,*} --m ${MS%%,*} --layers 1 --kernels \
  --rounds 3 --traced 4 --top 0 > "$f" 2>&1
echo "== kernels rc=$? $(el)"; grep -E "^== |kernel +[0-9]+ " "$f" | cut -c1-150 | head -40
