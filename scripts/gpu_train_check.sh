#!/usr/bin/env bash
# The training check (issue 16), in one call on the device machine: build as the README says, the recipe /
# Flax drop-in / training-example tests on the GPU backend, the step-time comparison against plain Flax
# (examples/train.py, interleaved) and the loss curves. Writes few files to $1 (default ./out): build.log,
# tests.log, train.log (every example run) and the two loss-curve PNGs (JSON results stay in /tmp/jt_train).
set -u
OUT_DIR=${1:-out}
mkdir -p "$OUT_DIR" /tmp/jt_train
export PYTHONUNBUFFERED=1
status=0
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  python3 -c "import jax, jaxlib, flax, optax; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__, 'flax', flax.__version__, 'optax', optax.__version__)"
  time python3 -m pip install --no-build-isolation ${JT_BUILD_ARGS:-} .
} > "$OUT_DIR/build.log" 2>&1 || { echo "BUILD FAILED"; tail -50 "$OUT_DIR/build.log"; exit 1; }
echo "build done $(date +%T)"
if [ -n "${JT_PRE:-}" ]; then timeout 120 python3 -P $JT_PRE 2>&1 | tail -30; fi
if [ "${JT_TESTS:-1}" != 0 ]; then
  timeout ${JT_TEST_TIMEOUT:-240} python3 -P -m pytest -q -p no:cacheprovider ${JT_TEST_FILES:-tests/test_recipes.py tests/test_flax_dropins.py tests/test_train_example.py tests/test_weight_only.py} > "$OUT_DIR/tests.log" 2>&1 || status=1
  tail -15 "$OUT_DIR/tests.log"; echo "tests done $(date +%T)"
fi
run() { echo "\$ python3 -P examples/train.py $*"; timeout 200 python3 -P examples/train.py "$@" 2>&1 || status=1; }
{
  date -u
  if [ "${JT_TIME:-1}" = 1 ]; then
    # issue 16's MLP step: 2 residual blocks 4096 -> 16384 -> 4096, 8192 tokens, bf16
    run --model mlp --d 4096 --hidden 16384 --tokens 8192 --steps 0 --time-rounds ${JT_ROUNDS:-7} --quant-fraction \
      --recipes bf16,fp8,mxfp8 --out /tmp/jt_train/big
    run --model transformer --d 4096 --hidden 16384 --heads 32 --seq 2048 --tokens 8192 --steps 0 \
      --time-rounds ${JT_ROUNDS:-7} --quant-fraction --recipes bf16,fp8,mxfp8 --out /tmp/jt_train/big
  fi
  if [ "${JT_CURVES:-1}" = 1 ]; then
    for model in ${JT_CURVE_MODELS:-mlp transformer}; do
      run --model $model --d 1024 --hidden 4096 --heads 8 --seq 512 --tokens 4096 --steps ${JT_STEPS:-300} \
        --log-every 50 --time-rounds 5 --recipes bf16,fp8,mxfp8,nvfp4 --out /tmp/jt_train
      cp /tmp/jt_train/train_$model.png "$OUT_DIR/" 2>/dev/null
    done
  fi
} > "$OUT_DIR/train.log" 2>&1
cat "$OUT_DIR/train.log"
exit $status
