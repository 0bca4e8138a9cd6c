#!/usr/bin/env bash
# Issue 15, the next device session's first call (~8 min on a fresh machine): the rules of 2026-12-07 23:10 whose GPU
# tests the last call did not reach (its budget ran out): test_65_128_tokens_run_weight_multicast_pairs (48 by rule at
# 81-128 tokens, and forced at 65 / 80, where each pair's second token tile is empty: if it passes, menu.h
# kSm90PairsMinM goes to 65), the splits-in-kernel file (39 / 48 now built by default), the 70B e4m3 step at 176 / 192
# (the new 39 / 37 plans against the old ones), and the 8B layer at 72 / 80 tokens with 48 forced (`p48`).
#   bash docs/wip/run_s74a.sh        (logs under $OUT)
set -u
. docs/wip/build_new.sh
export PYTHONPATH=build/jt_new
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 200 python3 -P -m pytest -q -p no:cacheprovider tests/test_gpu_gemm.py -k "65_128" -rs > "$O/t1.log" 2>&1
echo "65_128 rc=$? $(el)"; grep -E "passed|failed|FAILED|Error" "$O/t1.log" | tail -6
timeout 200 python3 -P -m pytest -q -p no:cacheprovider tests/test_splits_in_kernel.py -rs > "$O/t2.log" 2>&1
echo "splits rc=$? $(el)"; grep -E "passed|failed|FAILED|Error" "$O/t2.log" | tail -6
B="python3 -P benchmarks/bench_decode.py --rounds 3"
timeout 80 $B --models 70b --layouts NK --ms 176,192 --dtypes float8_e4m3fn --out "$O/b" \
  --variants "old=8192,10240:2:1/8192,8192:38:1/28672,8192:38:1" > "$O/step70.log" 2>&1
echo "70B e4m3 rc=$? $(el)"; grep -E "M=|variant|Error" "$O/step70.log" | cut -c1-140
timeout 80 $B --models 8b --layouts NK,KN --ms 72,80 --dtypes bfloat16 --out "$O/a" \
  --variants "p48=14336,4096:48:-2" > "$O/step8.log" 2>&1
echo "8B rc=$? $(el)"; grep -E "M=|variant|Error" "$O/step8.log" | cut -c1-140
