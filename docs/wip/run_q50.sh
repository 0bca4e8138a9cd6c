#!/usr/bin/env bash
# One H200 call (~8 min): entry 50 (192 weight rows x 80 tokens in weight-multicast pairs, a pair per K split:
# cuBLAS's QKV form at 160 tokens, nvjet 192x96 1x2, 128 CTAs) against the rule's 41 (96 CTAs, no split) for the 8B
# QKV projection; its tests, compute-sanitizer, a CUPTI trace of the chain, the decode benchmark.
#   bash docs/wip/run_q50.sh        (logs under $OUT; never a bare `wait` here)
set -u
O=${OUT:-/tmp/o}; mkdir -p "$O"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
python3 -m pip install --no-build-isolation . > "$O/build.log" 2>&1 || { echo BUILD FAILED; tail -40 "$O/build.log"; exit 1; }
echo "ext built $(el)"; grep -i "spill" "$O/build.log" | grep -v " 0 bytes spill" | head -5
timeout 150 python3 -P -m pytest -q -p no:cacheprovider tests/test_splits_in_kernel.py tests/test_gpu_gemm.py \
  -k "cfg50 or config50 or ready_flags" -rs > "$O/tests.log" 2>&1
echo "tests rc=$? $(el)"; grep -E "passed|failed|^(FAILED|ERROR)|rel err" "$O/tests.log" | head -20
XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 100 compute-sanitizer --tool memcheck python3 -P docs/wip/san_flags.py \
  > "$O/memcheck.log" 2>&1; echo "memcheck rc=$? $(el)"; tail -4 "$O/memcheck.log"
XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 100 compute-sanitizer --tool racecheck python3 -P docs/wip/san_flags.py \
  > "$O/racecheck.log" 2>&1; echo "racecheck rc=$? $(el)"; tail -3 "$O/racecheck.log"
P="python3 -P scripts/decode_probe.py --model 8b --dtype bfloat16 --layout NK --m 160 --layers 4 --trace"
timeout 80 $P --variants "q50=4096,6144:50:-2" > "$O/trace.log" 2>&1; echo "trace rc=$? $(el)"
grep -E "^==|gap" "$O/trace.log" | sed -n '1,9p;19,40p'
B="python3 -P benchmarks/bench_decode.py --layouts NK --rounds 3"
timeout 150 $B --models 8b --dtypes bfloat16,float8_e4m3fn --ms 136,160 --out "$O/b8" \
  --variants "q50=4096,6144:50:-2;q48=4096,6144:48:1;q50o48=4096,6144:50:-2/4096,4096:48:-2" > "$O/bench8.log" 2>&1
echo "bench 8b rc=$? $(el)"; grep -v "^ *jax\|Warn" "$O/bench8.log" | tail -14
