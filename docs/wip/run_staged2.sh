#!/usr/bin/env bash
# Second call after run_staged.sh (reuses its /tmp/jt_new, /tmp/jt_base if the machine is still warm, else builds):
# the GPU tests, compute-sanitizer memcheck + racecheck of the staged store, the decode bench again (base first).
set -u
O=${OUT:-/tmp/o}; mkdir -p "$O"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
PI="python3 -m pip install -q --no-build-isolation --no-deps --upgrade"
[ -d /tmp/jt_new/jax_tmem ] || $PI --target /tmp/jt_new -C build-dir=/tmp/b_new . > "$O/build_new.log" 2>&1
echo "ext ready $(el)"
export PYTHONPATH=/tmp/jt_new
timeout 200 python3 -P -m pytest -q -p no:cacheprovider tests/test_gpu_gemm.py tests/test_splits_in_kernel.py \
  -k "swap_ab_plain or splits_summed or command_buffers or ready_flags or decode_runs_swap or wide_tokens" -rs > "$O/tests.log" 2>&1
echo "tests rc=$? $(el)"; grep -E "passed|failed|^(FAILED|ERROR)|rel err" "$O/tests.log" | head -20
export XLA_PYTHON_CLIENT_PREALLOCATE=false
timeout 120 compute-sanitizer --tool memcheck python3 -P docs/wip/san_staged.py > "$O/memcheck.log" 2>&1
echo "memcheck rc=$? $(el)"; tail -4 "$O/memcheck.log"
timeout 120 compute-sanitizer --tool racecheck python3 -P docs/wip/san_staged.py > "$O/racecheck.log" 2>&1
echo "racecheck rc=$? $(el)"; tail -3 "$O/racecheck.log"
unset XLA_PYTHON_CLIENT_PREALLOCATE
if [ -d /tmp/jt_base/jax_tmem ]; then
  B="python3 -P benchmarks/bench_decode.py --models 8b --dtypes bfloat16 --layouts NK --ms 32,64,160 --rounds 3"
  for v in base new; do
    PYTHONPATH=/tmp/jt_$v timeout 60 $B --out "$O/b2_$v" > "$O/bench2_$v.log" 2>&1
    echo "bench $v rc=$? $(el)"; grep "xla/ours" "$O/bench2_$v.log"
  done
fi
