#!/usr/bin/env bash
# Issue 15, the next device session's first call (~8 min on a fresh machine; builds entry 39 too, flipped to a
# candidate in the device's copy only, for run_s73b.sh):
#  1. the 70B QKV rule of 2026-12-07 (entry 40 at 129-160 tokens, K >= 8192, 41's tiles not fitting): its GPU case
#     (test_wide_tokens_run_the_clustered_swap_ab_entry, `half`), and the 70B layer at 144 / 160 tokens against the
#     QKV forced back onto the old dense plan (entry 2, its last wave shared by 132 CTAs), and with the gate / up on
#     cuBLAS's form for it (nvjet 128x80 1x2: our 48's weight-multicast pairs, one split: 896 CTAs, 6.8 waves);
#  2. 97-128 tokens: the 8B layer at 128 tokens is 0.91-0.93 x XLA (H100, 2026-12-07) and slower than at 136 tokens
#     (204.6 against 195.0 us): the 129-160 tokens plans forced at 112 / 128 tokens ("t160": QKV / O / gate-up / down
#     on 41 / 41 -2 / 40 / 48 -2 for 8B, 40 / 48 -2 / 40 / 48 -2 for 70B).
#   bash docs/wip/run_s73a.sh        (logs under $OUT)
set -u
sed -i -E 's/(k128x96SwapABClusterN2, 39, .*kSwapAB, )kSweep/\1kCandidate/' cpp/include/jax_tmem/sm90_configs.def
grep -c "ClusterN2, 39, .*kCandidate" cpp/include/jax_tmem/sm90_configs.def
. docs/wip/build_new.sh
export PYTHONPATH=build/jt_new
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 150 python3 -P -m pytest -q -p no:cacheprovider tests/test_gpu_gemm.py -k "wide_tokens and True" -rs \
  > "$O/tests.log" 2>&1
echo "tests rc=$? $(el)"; tail -4 "$O/tests.log"
B="python3 -P benchmarks/bench_decode.py --layouts NK --rounds 3"
for dt in bfloat16 float8_e4m3fn; do  # (the old plan: bf16 shares the last wave, e4m3 does not)
  sh=$([ $dt = bfloat16 ] && echo 132 || echo 1)
  timeout 120 $B --models 70b --ms 144,160 --variants "qkv2=8192,10240:2:$sh;g48=8192,57344:48:1" --dtypes $dt --out "$O/q_$dt" \
    > "$O/qkv70_$dt.log" 2>&1
  echo "70B QKV $dt rc=$? $(el)"; grep -E "M=|variant|Error" "$O/qkv70_$dt.log" | cut -c1-140
done
T="t160=4096,6144:41:1/4096,4096:41:-2/4096,28672:40:1/14336,4096:48:-2"
T="$T/8192,10240:40:1/8192,8192:48:-2/8192,57344:40:1/28672,8192:48:-2"
for dt in bfloat16 float8_e4m3fn; do
  left=$(( 590 - ($(date +%s) - t0) ))
  timeout $(( left < 200 ? left : 200 )) $B --models 8b,70b --ms 112,128 --variants "$T" --dtypes $dt \
    --out "$O/t_$dt" > "$O/t160_$dt.log" 2>&1
  echo "t160 $dt rc=$? $(el)"; grep -E "M=|variant|Error" "$O/t160_$dt.log" | cut -c1-140
done
