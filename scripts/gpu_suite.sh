#!/usr/bin/env bash
# The whole test suite on one GPU (what the README's test command runs there: the gpu-marked tests and every
# dual CPU/GPU test, through the kernels), in JT_SUITE_PROCS pytest processes sharing the GPU: whole test files
# dealt to the process with the fewest tests so far, largest first (dealing single tests round-robin ran ~2x
# slower per test on an H100, 2026-11-26: every process then compiles every file's programs). Logs and a
# summary go to $1 (default ./out). Expects the package installed (scripts/gpu_check.sh builds it;
# JT_FULL_SUITE=1 there calls this).
set -u
OUT_DIR=${1:-out}
mkdir -p "$OUT_DIR"
N=${JT_SUITE_PROCS:-5}
LIM=${JT_SUITE_TIMEOUT:-420}
python3 -P -m pytest tests --collect-only -q -p no:cacheprovider 2>/dev/null | grep '::' > "$OUT_DIR/suite_ids.txt"
echo "suite: $(wc -l < "$OUT_DIR/suite_ids.txt") tests in $N processes, $(date +%T)"
python3 - "$N" "$OUT_DIR" <<'PY'
import collections, sys
n, d = int(sys.argv[1]), sys.argv[2]
count = collections.Counter(line.split("::")[0] for line in open(f"{d}/suite_ids.txt"))
shards = [[0, []] for _ in range(n)]
for f, c in count.most_common():
    s = min(shards, key=lambda s: s[0])
    s[0] += c
    s[1].append(f)
for i, (_, files) in enumerate(shards):
    open(f"{d}/suite_ids_{i}.txt", "w").write("".join(f + "\n" for f in files))
PY
frac=$(python3 -c "print(round(0.8 / $N, 3))")
for ((i = 0; i < N; i++)); do
  [ -s "$OUT_DIR/suite_ids_$i.txt" ] || { echo "no files rc 0" > "$OUT_DIR/suite_$i.log"; continue; }
  (
    mapfile -t ids < "$OUT_DIR/suite_ids_$i.txt"
    XLA_PYTHON_CLIENT_MEM_FRACTION=$frac timeout "$LIM" python3 -P -m pytest "${ids[@]}" -q -p no:cacheprovider -rfE \
      > "$OUT_DIR/suite_$i.log" 2>&1
    echo "rc $?" >> "$OUT_DIR/suite_$i.log"
  ) &
done
wait
status=0
for ((i = 0; i < N; i++)); do
  tail -2 "$OUT_DIR/suite_$i.log" | tr '\n' ' '; echo
  grep -qE "rc 0$" "$OUT_DIR/suite_$i.log" || status=1
done
grep -hE "^(FAILED|ERROR) " "$OUT_DIR"/suite_*.log | head -40
echo "suite done $(date +%T)"
exit $status
