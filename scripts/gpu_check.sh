#!/usr/bin/env bash
# The GPU check, in one call: build the package as the README says, report, GPU tests, sanitizers,
# benchmark. Logs and results go to $1 (default ./out). Used on the device machine (H200).
# The tests: `-m gpu`, the GPU-only ones (tests/test_markers.py checks that they carry the marker); the
# rest of the suite also runs on the CPU reference path and goes through the kernels on a GPU when run
# whole (the README's test command; JT_FULL_SUITE=1 here runs it in parallel processes, scripts/gpu_suite.sh).
set -u
OUT_DIR=${1:-out}
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1
status=0
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv
  python3 -c "import jax, jaxlib; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__)"
} > "$OUT_DIR/env.txt" 2>&1
( time python3 -m pip install --no-build-isolation ${JT_BUILD_ARGS:-} . ) > "$OUT_DIR/build.log" 2>&1 || { echo "BUILD FAILED"; tail -50 "$OUT_DIR/build.log"; exit 1; }
echo "build done $(date +%T)"
timeout 300 python3 -P -m jax_tmem > "$OUT_DIR/report.txt" 2>&1 || status=1
if [ "${JT_FULL_SUITE:-0}" = 1 ]; then  # the whole suite, as the README's test command runs it on a GPU
  bash scripts/gpu_suite.sh "$OUT_DIR" || status=1
else
  timeout ${JT_TEST_TIMEOUT:-300} python3 -P -m pytest tests -q --maxfail=20 -m gpu -p no:cacheprovider ${JT_PYTEST_ARGS:-} > "$OUT_DIR/gpu_tests.log" 2>&1 || status=1
  tail -5 "$OUT_DIR/gpu_tests.log"; echo "tests done $(date +%T)"
fi
if [ "${JT_SANITIZE:-1}" = 1 ]; then
  for tool in memcheck racecheck; do
    XLA_PYTHON_CLIENT_PREALLOCATE=false timeout ${JT_SAN_TIMEOUT:-120} compute-sanitizer --tool $tool --target-processes all python3 -P scripts/sanitize_case.py > "$OUT_DIR/sanitizer_$tool.log" 2>&1 || status=1
    grep -E "SUMMARY|sanitize sweep done|Error" "$OUT_DIR/sanitizer_$tool.log" | tail -8
  done
fi
if [ "${JT_BENCH:-1}" = 1 ]; then
  timeout ${JT_BENCH_TIMEOUT:-300} python3 -P benchmarks/bench_gemm.py --out "$OUT_DIR" ${JT_BENCH_ARGS:-} > "$OUT_DIR/bench.log" 2>&1 || status=1
  cat "$OUT_DIR/bench.log"
fi
if [ "${JT_BENCH_BS:-1}" = 1 ]; then  # the block-scaled GEMM against jax.nn.scaled_matmul / scaled_dot_general
  timeout ${JT_BENCH_BS_TIMEOUT:-150} python3 -P benchmarks/bench_block_scaled.py --out "$OUT_DIR" ${JT_BENCH_BS_ARGS:-} > "$OUT_DIR/bench_block_scaled.log" 2>&1 || status=1
  grep -v "^   jax" "$OUT_DIR/bench_block_scaled.log"
fi
if [ "${JT_BENCH_DECODE:-0}" = 1 ]; then  # decode steps of the 8B / 70B layer GEMMs (issue 15)
  timeout ${JT_BENCH_DECODE_TIMEOUT:-300} python3 -P benchmarks/bench_decode.py --out "$OUT_DIR" ${JT_BENCH_DECODE_ARGS:-} > "$OUT_DIR/bench_decode.log" 2>&1 || status=1
  cat "$OUT_DIR/bench_decode.log"
fi
if [ -n "${JT_CONFIG_SWEEP:-}" ]; then  # the kernel menu, paired with jnp.dot round by round
  timeout ${JT_SWEEP_TIMEOUT:-240} python3 -P benchmarks/sweep_configs.py --shapes "${JT_SWEEP_SHAPES:-0,1,2,4}" --configs "$JT_CONFIG_SWEEP" --rounds "${JT_SWEEP_ROUNDS:-5}" --out /tmp/jt_sweep > "$OUT_DIR/config_sweep.log" 2>&1 || status=1
  cat "$OUT_DIR/config_sweep.log"
fi
exit $status
