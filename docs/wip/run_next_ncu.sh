#!/usr/bin/env bash
# The next device call for issue 15 (docs/PERF.md Next steps 2, 2026-12-02): where our narrow projections' kernel time
# goes against cuBLAS's at 160 tokens, same tile and CTA count (QKV: 49 with 2 splits in a cluster = 192 x 80 x 128
# CTAs, as nvjet_sm90_tss_192x80_64x6_1x2; O / down: 41 / 48 against nvjet 128x80 1x2), one H200, ~8 minutes:
#   bash docs/wip/run_next_ncu.sh        (logs under $OUT; never a bare `wait` here)
# Nsight Compute, one profiled execution of one 8B layer each (scripts/ncu_chain.py), the warp-state and memory
# sections: the producer's TMA issue cadence, the consumers' stalls (barrier waits on full slots = bandwidth-starved;
# on the MMAs = compute), DRAM throughput, L2 hit rate, achieved occupancy.
set -u
O=${OUT:-/tmp/o}; mkdir -p "$O"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
sed -i -E 's/(k192x80SwapAB, 49, .*kSwapAB, )kSweep/\1kCandidate/' cpp/include/jax_tmem/sm90_configs.def
python3 -m pip install --no-build-isolation . > "$O/build.log" 2>&1 || { echo BUILD FAILED; tail -40 "$O/build.log"; exit 1; }
echo "ext built $(el)"
N="ncu --clock-control none --target-processes all --profile-from-start off -k regex:nvjet|sm90_gemm"
N="$N --section LaunchStats --section SpeedOfLight --section WarpStateStats --section SchedulerStats"
N="$N --section MemoryWorkloadAnalysis --section Occupancy"
for who in xla ours "4096,6144:49:-2"; do
  tag=$(echo "$who" | tr ',:' '__')
  XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 170 $N python3 -P scripts/ncu_chain.py "$who" 160 bfloat16 \
    > "$O/ncu_$tag.log" 2>&1
  echo "ncu $who rc=$? $(el)"
  grep -E "nvjet|sm90_gemm_kernel|Duration|DRAM Throughput|L2 Hit Rate|Stall Long Scoreboard|Warp Cycles Per Issued|Issued Warp|No Eligible|Achieved Occupancy|Grid Size|Cluster Size" \
    "$O/ncu_$tag.log" | head -80
done
