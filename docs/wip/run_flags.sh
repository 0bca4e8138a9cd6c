#!/usr/bin/env bash
# One H200 call (~8 min): workspaces with ready flags from the pool (no memset before the pair / last-wave launches), built with entries
# 48 / 49 as candidates (this copy only); GPU tests, compute-sanitizer, a CUPTI trace of the 8B chain with the down
# projection on 48, the decode benchmark with O / down on 48 and the 70B layer (the last-wave rule).
#   bash docs/wip/run_flags.sh        (logs under $OUT; never a bare `wait` here)
set -u
O=${OUT:-/tmp/o}; mkdir -p "$O"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
sed -i -E 's/(k128x80SwapABClusterN2, 48, .*kSwapAB, )kSweep/\1kCandidate/; s/(k192x80SwapAB, 49, .*kSwapAB, )kSweep/\1kCandidate/' \
  cpp/include/jax_tmem/sm90_configs.def
python3 -m pip install --no-build-isolation . > "$O/build.log" 2>&1 || { echo BUILD FAILED; tail -40 "$O/build.log"; exit 1; }
echo "ext built $(el)"; grep -i "spill" "$O/build.log" | grep -v " 0 bytes spill" | head -5
timeout 200 python3 -P -m pytest -q -p no:cacheprovider tests/test_splits_in_kernel.py tests/test_tail_split.py \
  tests/test_swap_tail.py -k "ready_flags or workspace_pool or command_buffers or cfg48 or cfg39 or cfg49 or last_wave or heuristic_shares or swap" \
  -rs > "$O/tests.log" 2>&1
echo "tests rc=$? $(el)"; grep -E "passed|failed|^(FAILED|ERROR)" "$O/tests.log" | head -20
XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 100 compute-sanitizer --tool memcheck python3 -P docs/wip/san_flags.py \
  > "$O/memcheck.log" 2>&1; echo "memcheck rc=$? $(el)"; tail -4 "$O/memcheck.log"
XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 100 compute-sanitizer --tool racecheck python3 -P docs/wip/san_flags.py \
  > "$O/racecheck.log" 2>&1; echo "racecheck rc=$? $(el)"; tail -3 "$O/racecheck.log"
P="python3 -P scripts/decode_probe.py --model 8b --dtype bfloat16 --layout NK --m 160 --layers 4 --trace"
timeout 80 $P --variants "d48=14336,4096:48:-2" > "$O/trace_cb.log" 2>&1; echo "trace rc=$? $(el)"
grep -E "^==|gap" "$O/trace_cb.log" | sed -n '1,9p;19,40p'
B="python3 -P benchmarks/bench_decode.py --layouts NK --rounds 3"
timeout 110 $B --models 8b --dtypes bfloat16,float8_e4m3fn --ms 136,160 --out "$O/b8" \
  --variants "d48=14336,4096:48:-2;od48=14336,4096:48:-2/4096,4096:48:-2" > "$O/bench8.log" 2>&1
echo "bench 8b rc=$? $(el)"; grep -v "^ *jax\|Warn" "$O/bench8.log" | tail -14
timeout 90 $B --models 70b --dtypes bfloat16,float8_e4m3fn --ms 168,192 --out "$O/b70" > "$O/bench70.log" 2>&1
echo "bench 70b rc=$? $(el)"; grep -v "^ *jax\|Warn" "$O/bench70.log" | tail -6
