#!/usr/bin/env bash
# Issue 15: where an fp8 (K, N) weight's decode step loses its 12-17 % against the (N, K) one at 16-128 tokens (H100,
# 2026-12-07: 8B 105.7 / 116.3 / 132.9 against 94.3 / 99.3 / 116.0 us per layer at 16 / 64 / 128): each kernel of one
# execution (dispatch_probe --kernels), e4m3, both layouts, 8B layer, M = 16 / 64 / 128 (~2 min on a warm machine).
#   bash docs/wip/run_s73d.sh        (logs under $OUT)
set -u
. docs/wip/build_new.sh
export PYTHONPATH=build/jt_new
for m in $(echo ${MS:-16,64,128} | tr , ' '); do
  for lay in NK KN; do
    f="$O/k_${m}_$lay.log"
    timeout 100 python3 -P scripts/dispatch_probe.py --programs decode --model 8b --m $m --layers 1 --kernels \
      --layout $lay --dtype float8_e4m3fn --rounds 3 --traced 4 --top 0 > "$f" 2>&1
    echo "== $m $lay rc=$? $(el)"; grep -E "^== |kernel +[0-9]+ " "$f" | cut -c1-150 | head -16
  done
done
