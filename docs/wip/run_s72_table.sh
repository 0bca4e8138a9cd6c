#!/usr/bin/env bash
# Issue 15's decode table with the landed code (one call per half, ~5 min each on a warm machine that holds
# build/jt_new): bench_decode.py, both models, bf16 and e4m3, weights (K, N) and (N, K), 3 rounds, the given Ms.
#   bash docs/wip/run_s72_table.sh 1,8,16,32,64 a      (logs and the PNG under $OUT/table_a)
set -u
. docs/wip/build_new.sh
left=$(( 585 - ($(date +%s) - t0) ))
PYTHONPATH=build/jt_new timeout $left python3 -P benchmarks/bench_decode.py --ms "$1" --rounds 3 \
  --out "$O/table_$2" > "$O/table_$2.log" 2>&1
echo "table $2 rc=$? $(el)"; grep -vE "^\s*$|Warn|warn" "$O/table_$2.log" | cut -c1-160 | tail -60
