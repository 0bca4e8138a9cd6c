#!/usr/bin/env bash
# Issue 15, after run_256.sh on the same warm machine (uses its build/jt_new): where the e4m3 (N, K) 8B layer's
# time goes at 16 and 64 tokens (1.02 x XLA, 3.0 TB/s against bf16's 3.5 at 16), per kernel, ours against XLA's,
# every kernel of one profiled execution (scripts/ncu_chain.py; the fp8 converts between the GEMMs included).
#   bash docs/wip/run_ncu_small.sh        (logs under $OUT)
set -u
O=${OUT:-/tmp/o}; mkdir -p "$O"
export PYTHONUNBUFFERED=1 PYTHONPATH=build/jt_new
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
N="ncu --clock-control none --target-processes all --profile-from-start off --section LaunchStats --section SpeedOfLight"
for m in 16 64; do
  for who in xla ours; do
    XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 140 $N python3 -P scripts/ncu_chain.py "$who" $m float8_e4m3fn \
      > "$O/ncu_${who}_$m.log" 2>&1
    echo "== ncu $who $m rc=$? $(el)"
    grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Grid Size|Cluster Size|Registers Per" "$O/ncu_${who}_$m.log" \
      | sed -E 's/ +/ /g' | cut -c1-150 | head -60
  done
done
