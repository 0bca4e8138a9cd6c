#!/usr/bin/env bash
# One H200 call (~9 min): the swap-AB staged 16-bit store (this tree) against the same tree without it (the patch
# docs/wip/swap_staged_store.patch reversed), both built (default configs) side by side into separate targets; the 8B
# decode benchmark on each, one after the other; then this tree's GPU tests of the swap-AB entries.
#   bash docs/wip/run_staged.sh        (logs under $OUT; never a bare `wait` here)
set -u
O=${OUT:-/tmp/o}; mkdir -p "$O"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
rm -rf /tmp/src_base && mkdir -p /tmp/src_base && cp -r . /tmp/src_base/ && rm -rf /tmp/src_base/build
(cd /tmp/src_base && patch -R -p1 < docs/wip/swap_staged_store.patch) > "$O/unpatch.log" 2>&1 || { echo UNPATCH FAILED; cat "$O/unpatch.log"; exit 1; }
PI="python3 -m pip install -v --no-build-isolation --no-deps --upgrade"
( $PI --target /tmp/jt_new -C build-dir=/tmp/b_new . > "$O/build_new.log" 2>&1; echo "new rc=$?" >> "$O/build_new.log" ) &
p1=$!
( cd /tmp/src_base && $PI --target /tmp/jt_base -C build-dir=/tmp/b_base . > "$O/build_base.log" 2>&1; echo "base rc=$?" >> "$O/build_base.log" ) &
p2=$!
wait "$p1"; wait "$p2"
echo "built $(el)"; tail -1 "$O/build_new.log" "$O/build_base.log"; grep -ih "spill" "$O"/build_*.log | grep -v " 0 bytes spill" | head -5
B="python3 -P benchmarks/bench_decode.py --models 8b --dtypes bfloat16,float8_e4m3fn --layouts NK --ms 64,136,160,256 --rounds 3"
for v in new base; do
  PYTHONPATH=/tmp/jt_$v timeout 130 $B --out "$O/b_$v" > "$O/bench_$v.log" 2>&1
  echo "bench $v rc=$? $(el)"; grep -v "^ *jax\|Warn" "$O/bench_$v.log" | tail -10
done
PYTHONPATH=/tmp/jt_new timeout 170 python3 -P -m pytest -q -p no:cacheprovider tests/test_gpu_gemm.py tests/test_splits_in_kernel.py \
  -k "swap_ab_plain or splits_summed or command_buffers or ready_flags or decode_runs_swap or wide_tokens" -rs -x > "$O/tests.log" 2>&1
echo "tests rc=$? $(el)"; grep -E "passed|failed|^(FAILED|ERROR)|rel err|Error" "$O/tests.log" | head -20
