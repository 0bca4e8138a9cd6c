#!/usr/bin/env bash
# Two H200 calls on one warm machine: the weight's L2 evict-first hint everywhere (this tree with
# docs/wip/decode_evict_first.patch applied: the swap-AB kernels, dense_decode.cuh, the 4-bit kernels) against the same
# tree without any hint (docs/wip/weight_evict_first.patch reversed; the same plans). Run 2026-12-02 18:44-18:56 with
# the 8B QKV on entry 50 by a rule (since withdrawn: `--variants "q50=4096,6144:50:-2"` times it now).
#   bash docs/wip/run_hint_step.sh build   (~9 min: both packages side by side into build/, GPU tests, bench_w4 A/B)
#   bash docs/wip/run_hint_step.sh bench   (~2 min: bench_decode 8B NK on each; this tree with the QKV forced to 41)
# Logs under $OUT; never a bare `wait` here. `bench` rebuilds what the machine no longer holds.
set -u
O=${OUT:-/tmp/o}; mkdir -p "$O"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
R=$(pwd)
PI="python3 -m pip install -v --no-build-isolation --no-deps --upgrade"
build() {
  if [ -f build/jt_new/jax_tmem/__init__.py ] && [ -f build/jt_base/jax_tmem/__init__.py ]; then echo "builds kept"; return; fi
  for v in base new; do
    rm -rf /tmp/src_$v && mkdir -p /tmp/src_$v && cp -r cpp jax_tmem tests pyproject.toml CMakeLists.txt README.md docs scripts /tmp/src_$v/ 2>/dev/null
  done
  (cd /tmp/src_base && patch -R -p1 < docs/wip/weight_evict_first.patch && cd /tmp/src_new && patch -p1 < docs/wip/decode_evict_first.patch) \
    > "$O/patch.log" 2>&1 || { echo PATCH FAILED; cat "$O/patch.log"; exit 1; }
  ( cd /tmp/src_new && $PI --target "$R/build/jt_new" -C build-dir="$R/build/b_new" . > "$O/build_new.log" 2>&1; echo "new rc=$?" >> "$O/build_new.log" ) &
  p1=$!
  ( cd /tmp/src_base && $PI --target "$R/build/jt_base" -C build-dir="$R/build/b_base" . > "$O/build_base.log" 2>&1; echo "base rc=$?" >> "$O/build_base.log" ) &
  p2=$!
  wait "$p1"; wait "$p2"
  echo "built $(el)"; tail -1 "$O/build_new.log" "$O/build_base.log"; grep -ih "spill" "$O"/build_*.log | grep -v " 0 bytes spill" | head -5
}
build
if [ "${1:-build}" = build ]; then
  PYTHONPATH=build/jt_new timeout 230 python3 -P -m pytest -q -p no:cacheprovider tests/test_gpu_gemm.py tests/test_splits_in_kernel.py \
    tests/test_weight_only.py tests/test_decode_mma.py tests/test_decode_fp8.py \
    -k "129_192 or wide_tokens or swap_ab_plain or decode_runs_swap or splits_summed or ready_flags or 192_row or weight_only or mma_decode or decode_heuristic or fp8_kn" \
    -rs > "$O/tests.log" 2>&1
  echo "tests rc=$? $(el)"; grep -E "passed|failed|^(FAILED|ERROR)|rel err|Error" "$O/tests.log" | head -20
  for v in new base; do
    PYTHONPATH=build/jt_$v timeout 80 python3 -P benchmarks/bench_w4.py --hidden 4096 --ms 1,16,64,160 --rounds 3 \
      --out "$O/w4_$v" > "$O/w4_$v.log" 2>&1
    echo "bench_w4 $v rc=$? $(el)"; grep -v "^ *jax\|Warn" "$O/w4_$v.log" | tail -8
  done
else
  B="python3 -P benchmarks/bench_decode.py --models 8b --dtypes bfloat16,float8_e4m3fn --layouts NK --ms 1,16,64,136,160,256 --rounds 3"
  PYTHONPATH=build/jt_new timeout 250 $B --variants "q41=4096,6144:41:1" --out "$O/b_new" > "$O/bench_new.log" 2>&1
  echo "bench new rc=$? $(el)"; grep -v "^ *jax\|Warn" "$O/bench_new.log" | tail -16
  PYTHONPATH=build/jt_base timeout 200 $B --out "$O/b_base" > "$O/bench_base.log" 2>&1
  echo "bench base rc=$? $(el)"; grep -v "^ *jax\|Warn" "$O/bench_base.log" | tail -14
fi
