#!/usr/bin/env bash
# Issue 15: entries 51-54 (the wgmma decode form 32-34 and the mma.sync (K, N) entry 28 with the K range split over a
# cluster of 2 CTAs, sums met in distributed shared memory; forced only): their GPU tests (test_decode_mma.py, every
# dtype pair / layout / tail / epilogue), then the 8B layer, (N, K) and (K, N), e4m3 at 16 / 32 / 64 tokens and e4m3 /
# bf16 at 8 tokens ((K, N) only: 54), with every GEMM (`k2`) and with the O / down only (`od`) forced onto them (~10
# min on a fresh machine). Compiled, never run yet (2026-12-08: no device time left).
#   bash docs/wip/run_s75a.sh        (logs under $OUT)
set -u
. docs/wip/build_new.sh
export PYTHONPATH=build/jt_new
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 300 python3 -P -m pytest -q -p no:cacheprovider tests/test_decode_mma.py -rs -x \
  -k "${TK:-51 or 52 or 53 or 54}" > "$O/t1.log" 2>&1
echo "k2 tests rc=$? $(el)"; grep -E "passed|failed|FAILED|Error|assert" "$O/t1.log" | tail -8
B="python3 -P benchmarks/bench_decode.py --rounds 3 --models 8b"
for dme in ${DMES:-float8_e4m3fn:16:51 float8_e4m3fn:64:53 float8_e4m3fn:8:54 bfloat16:8:54 float8_e4m3fn:32:52}; do
  d=${dme%%:*}; me=${dme#*:}; m=${me%:*}; e=${me#*:}; lay=NK,KN
  [ "$e" = 54 ] && lay=KN  # (54 reads a (K, N) weight only)
  timeout 60 $B --layouts $lay --dtypes $d --ms $m --out "$O/b$d$m" --variants \
    "k2=4096,6144:$e:1/4096,4096:$e:1/4096,28672:$e:1/14336,4096:$e:1;od=4096,4096:$e:1/14336,4096:$e:1" \
    > "$O/step$d$m.log" 2>&1
  echo "8B $d M=$m rc=$? $(el)"; grep -E "M=|variant|Error" "$O/step$d$m.log" | cut -c1-140
done
