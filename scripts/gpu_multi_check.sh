#!/usr/bin/env bash
# The multi-GPU check (issues 11 and 17), in one call on a host with >= 2 GPUs: build, the multi-GPU
# test module and the sharding tests, the tensor-parallel MLP step against lax.dot_general, and the
# TP + DP Flax example (examples/tp_dp_mlp.py). Logs go to $1 (default ./out).
set -u
OUT_DIR=${1:-out}
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1
status=0
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv > "$OUT_DIR/env_multi.txt" 2>&1
if [ "${JT_SKIP_BUILD:-0}" != 1 ]; then
  ( time python3 -m pip install --no-build-isolation ${JT_BUILD_ARGS:-} . ) > "$OUT_DIR/build.log" 2>&1 || { echo "BUILD FAILED"; tail -50 "$OUT_DIR/build.log"; exit 1; }
  echo "build done $(date +%T)"
fi
timeout ${JT_MULTI_TIMEOUT:-240} python3 -P -m pytest tests/test_multi_gpu.py tests/test_sharding.py -v -rs -p no:cacheprovider > "$OUT_DIR/multi_gpu_tests.log" 2>&1 || status=1
grep -E "PASSED|FAILED|SKIPPED|ERROR|passed|failed" "$OUT_DIR/multi_gpu_tests.log" | tail -20; echo "multi-GPU tests done $(date +%T)"
timeout ${JT_TP_TIMEOUT:-180} python3 -P scripts/tp_mlp_step.py ${JT_TP_ARGS:-} > "$OUT_DIR/tp_mlp_step.log" 2>&1 || status=1
cat "$OUT_DIR/tp_mlp_step.log" | tail -15
if [ "${JT_EXAMPLE:-1}" = 1 ]; then
  timeout ${JT_EXAMPLE_TIMEOUT:-240} python3 -P examples/tp_dp_mlp.py ${JT_EXAMPLE_ARGS:-} > "$OUT_DIR/tp_dp_mlp.log" 2>&1 || status=1
  tail -25 "$OUT_DIR/tp_dp_mlp.log"
fi
exit $status
