#!/usr/bin/env bash
# The fused quantize on one GPU, in one call (issue 14): the landed wheel's numbers first (when a wheel is
# given in $JT_BASE_WHEEL), then this tree built, its quantize GPU tests, the same benchmark, and Nsight
# Compute on the rowwise 4-bit kernels. Logs to $1 (default ./out).
#   JT_BASE_WHEEL=.whl/jax_tmem-*.whl bash scripts/gpu_quant_check.sh $OUT
# (JT_NEW_WHEEL: install that wheel instead of building; JT_TESTS=0, JT_NCU=0: skip those parts.)
set -u
OUT_DIR=${1:-out}
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1
bench() {  # $1: a name for the log
  timeout ${JT_BENCH_TIMEOUT:-150} python3 -P benchmarks/bench_block_scaled.py --parts quantize \
    --sizes ${JT_SIZES:-4096,8192} --out /tmp/jt_bench_$1 > "$OUT_DIR/bench_$1.log" 2>&1
  echo "== $1 $(date +%T)"; cat "$OUT_DIR/bench_$1.log"
}
if [ -n "${JT_BASE_WHEEL:-}" ]; then
  python3 -m pip install --no-deps --force-reinstall $JT_BASE_WHEEL > "$OUT_DIR/base_install.log" 2>&1 || echo "BASE INSTALL FAILED"
  bench base
fi
if [ -n "${JT_NEW_WHEEL:-}" ]; then  # a wheel of this tree built before (carried), instead of building
  mkdir -p /tmp/jt_wheel && cp $JT_NEW_WHEEL /tmp/jt_wheel/
else
  ( time python3 -m pip wheel --no-build-isolation --no-deps . -w /tmp/jt_wheel ) > "$OUT_DIR/build.log" 2>&1 \
    || { echo "BUILD FAILED"; tail -40 "$OUT_DIR/build.log"; exit 1; }
fi
python3 -m pip install --no-deps --force-reinstall /tmp/jt_wheel/jax_tmem-*.whl > "$OUT_DIR/install.log" 2>&1
echo "installed $(date +%T)"
status=0
if [ "${JT_TESTS:-1}" = 1 ]; then
  timeout ${JT_TEST_TIMEOUT:-200} python3 -P -m pytest tests/test_block_scale.py -q -m gpu -k "${JT_TEST_K:-quantize}" \
    -p no:cacheprovider > "$OUT_DIR/gpu_tests.log" 2>&1 || status=1
  tail -3 "$OUT_DIR/gpu_tests.log"
fi
bench new
if [ "${JT_SANITIZE:-0}" = 1 ]; then  # compute-sanitizer over scripts/sanitize_case.py (its quantize cases
  for tool in ${JT_SAN_TOOLS:-memcheck}; do  # come first)
    XLA_PYTHON_CLIENT_PREALLOCATE=false timeout ${JT_SAN_TIMEOUT:-180} compute-sanitizer --tool $tool \
      --target-processes all python3 -P scripts/sanitize_case.py > "$OUT_DIR/$tool.log" 2>&1
    echo "== $tool"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|quantize|Error|hazard" "$OUT_DIR/$tool.log" | tail -12
  done
fi
if [ "${JT_NCU:-1}" = 1 ]; then
  XLA_PYTHON_CLIENT_PREALLOCATE=false timeout ${JT_NCU_TIMEOUT:-120} ncu --clock-control none -k regex:mx_quantize \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats \
    --section ComputeWorkloadAnalysis --section LaunchStats \
    python3 -P scripts/quant_probe.py ${JT_NCU_FORMS:-nvfp4:-1 mxfp4:-1 mxfp8:-1} --shape 4096,4096 \
    > "$OUT_DIR/ncu.log" 2>&1 || status=1
  grep -E "mx_quantize|Duration|Throughput|Registers|Achieved Occupancy|Waves|Issue Slots|Eligible|Executed Ipc|Pipe|ALU is" \
    "$OUT_DIR/ncu.log" | head -80
fi
if [ "${JT_KEEP_WHEEL:-0}" = 1 ]; then  # the wheel, for later calls (reassembled and carried as .whl)
  mkdir -p "$OUT_DIR/wheel" && cp /tmp/jt_wheel/jax_tmem-*.whl "$OUT_DIR/wheel/" && \
    (cd "$OUT_DIR/wheel" && split -b 15M jax_tmem-*.whl part_ && rm jax_tmem-*.whl)
fi
exit $status
