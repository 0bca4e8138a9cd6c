#!/usr/bin/env bash
# One H200 call (~6 min): the 8B down projection at 129-160 tokens on entry 48 by rule (menu.h sm90_token_tiles), its
# workspace in the pool (flag_pool.h): build (39 flipped to a candidate in this copy, for the sanitizer), plan / GPU
# tests, compute-sanitizer, the decode benchmark against the old plan (41, 2 splits in a cluster) forced.
#   bash docs/wip/run_rule48.sh        (logs under $OUT; never a bare `wait` here)
set -u
O=${OUT:-/tmp/o}; mkdir -p "$O"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
sed -i -E 's/(k128x96SwapABClusterN2, 39, .*kSwapAB, )kSweep/\1kCandidate/' cpp/include/jax_tmem/sm90_configs.def
python3 -m pip install --no-build-isolation . > "$O/build.log" 2>&1 || { echo BUILD FAILED; tail -40 "$O/build.log"; exit 1; }
echo "ext built $(el)"
timeout 150 python3 -P -m pytest -q -p no:cacheprovider tests/test_isa.py tests/test_gpu_gemm.py tests/test_splits_in_kernel.py \
  -k "token_tiles or 129_192 or ready_flags or workspace_pool or command_buffers or cfg48 or cfg39 or heuristic_sums" \
  -rs > "$O/tests.log" 2>&1
echo "tests rc=$? $(el)"; grep -E "passed|failed|^(FAILED|ERROR)" "$O/tests.log" | head -20
XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 100 compute-sanitizer --tool memcheck python3 -P docs/wip/san_flags.py \
  > "$O/memcheck.log" 2>&1; echo "memcheck rc=$? $(el)"; grep -E "rel err|pool|SUMMARY" "$O/memcheck.log" | tail -10
XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 100 compute-sanitizer --tool racecheck python3 -P docs/wip/san_flags.py \
  > "$O/racecheck.log" 2>&1; echo "racecheck rc=$? $(el)"; grep -E "pool|SUMMARY" "$O/racecheck.log" | tail -3
B="python3 -P benchmarks/bench_decode.py --models 8b --rounds 3 --ms 136,160"
timeout 150 $B --layouts NK,KN --dtypes bfloat16,float8_e4m3fn --out "$O/b8" --variants "d41=14336,4096:41:-2" \
  > "$O/bench8.log" 2>&1
echo "bench 8b rc=$? $(el)"; grep -v "^ *jax\|Warn" "$O/bench8.log" | tail -18
timeout 100 python3 -P -m jax_tmem 2>&1 | grep -iE "pool|RESULT" > "$O/report.log"; cat "$O/report.log"
