#!/usr/bin/env bash
# Issue 15 (one call, ~8 min with the build): the rules of 2026-12-07 22:50 on a GPU: the 8B down projection at
# 65-128 tokens on 48's pairs (sm90_pairs_128_tokens), the 70B O / down at 161-192 on 39's pairs and the 70B QKV at
# 161-192 on 37 (sm90_token_tiles / sm90_wide_tokens): their GPU tests, then the decode step with the default plans
# against the old plans forced (variant `old`).
#   bash docs/wip/run_s73e.sh        (logs under $OUT)
set -u
. docs/wip/build_new.sh
export PYTHONPATH=build/jt_new
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 240 python3 -P -m pytest -q -p no:cacheprovider tests/test_gpu_gemm.py tests/test_splits_in_kernel.py \
  -k "65_128 or 129_192 or wide_tokens or heuristic or pair or cluster" -rs > "$O/tests.log" 2>&1
echo "tests rc=$? $(el)"; grep -E "passed|failed|FAILED|Error" "$O/tests.log" | tail -8
B="python3 -P benchmarks/bench_decode.py --layouts NK,KN --rounds 3"
timeout 100 $B --models 8b --ms 72,96,128 --dtypes bfloat16 --variants "old=14336,4096:13:-2" --out "$O/a" \
  > "$O/step8.log" 2>&1
echo "8B rc=$? $(el)"; grep -E "M=|variant|Error" "$O/step8.log" | cut -c1-140
for dt in bfloat16 float8_e4m3fn; do
  q=$([ $dt = bfloat16 ] && echo 132 || echo 1)
  timeout 150 $B --models 70b --layouts NK --ms 176,192 --dtypes $dt --out "$O/b_$dt" \
    --variants "old=8192,10240:2:$q/8192,8192:38:1/28672,8192:38:1" > "$O/step70_$dt.log" 2>&1
  echo "70B $dt rc=$? $(el)"; grep -E "M=|variant|Error" "$O/step70_$dt.log" | cut -c1-140
done
