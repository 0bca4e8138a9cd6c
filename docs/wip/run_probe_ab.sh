#!/usr/bin/env bash
# One H200 call (~7 min): stream_probe's tlgu (8B gate / up at 136 / 160 tokens on 40 and 51) and tl160 (the narrow
# projections) for this tree and for variants of it, each built from a copy of cpp/: a patch file or -D flags
# ("-DJAX_TMEM_MBARRIER_SUSPEND=1"); then Nsight Compute metrics (time, DRAM bytes and throughput, L2 hit rate, grid)
# of one 8B bf16 layer at 160 tokens, XLA's kernels against ours (default plan, and the gate / up forced onto 51).
#   bash docs/wip/run_probe_ab.sh [VARIANT ...]     (logs under $OUT; never a bare `wait` here)
set -u
O=${OUT:-/tmp/o}; mkdir -p "$O"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
PYSITE=$(python3 -c "import jaxlib,os;print(os.path.dirname(os.path.dirname(jaxlib.__file__)))")
( python3 -m pip install -v --no-build-isolation --no-deps --upgrade --target /tmp/jt_new -C build-dir=/tmp/b_new . \
    > "$O/build_new.log" 2>&1; echo "new rc=$?" >> "$O/build_new.log" ) &
pb=$!
F="-std=c++17 -O3 -arch=sm_90a --expt-relaxed-constexpr -DJT_TIMELINE -I $PYSITE/jaxlib/include"
pids=(); names=(main)
( nvcc $F -Icpp/include -Icpp/src -o /tmp/sp_main scripts/stream_probe.cu > "$O/build_main.log" 2>&1 ) &
pids+=($!)
i=0
for V in "$@"; do
  i=$((i + 1)); n="v$i"; names+=("$n"); echo "$n = $V"
  rm -rf "/tmp/t_$n" && mkdir -p "/tmp/t_$n" && cp -r cpp "/tmp/t_$n/"
  X=""
  if [ -f "$V" ]; then
    (cd "/tmp/t_$n" && patch -p1 < "$OLDPWD/$V") > "$O/patch_$n.log" 2>&1 || { echo "PATCH FAILED: $V"; cat "$O/patch_$n.log"; exit 1; }
  else
    X="$V"
  fi
  ( nvcc $F $X -I"/tmp/t_$n/cpp/include" -I"/tmp/t_$n/cpp/src" -o "/tmp/sp_$n" scripts/stream_probe.cu > "$O/build_$n.log" 2>&1 ) &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
echo "probes built $(el)"
for mode in tlgu tl160; do
  for v in "${names[@]}"; do
    timeout 60 "/tmp/sp_$v" $mode > "$O/${mode}_$v.log" 2>&1
    echo "=== $mode $v rc=$? $(el)"; grep -E "graph|DIFFERENT|ours:" "$O/${mode}_$v.log"
  done
done
wait "$pb"
echo "package built $(el)"; tail -1 "$O/build_new.log"
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,launch__grid_size
for who in xla ours "4096,28672:51:1"; do
  tag=$(echo "$who" | tr ',:' '__')
  PYTHONPATH=/tmp/jt_new XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 150 ncu --clock-control none --target-processes all \
    --profile-from-start off -k regex:'nvjet|sm90_gemm|reduce' --metrics $M --csv \
    python3 -P scripts/ncu_chain.py "$who" 160 bfloat16 > "$O/ncu_$tag.csv" 2> "$O/ncu_$tag.err"
  echo "=== ncu $who rc=$? $(el)"
  python3 - "$O/ncu_$tag.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows:
    print("no rows"); sys.exit()
h = rows[0]; iid, ik, im, iv = h.index("ID"), h.index("Kernel Name"), h.index("Metric Name"), h.index("Metric Value")
k = collections.OrderedDict()
for r in rows[1:]:
    k.setdefault(r[iid], {"name": r[ik][:60]})[r[im]] = r[iv]
for d in k.values():
    print(f'{d["name"]:60s} t {d.get("gpu__time_duration.sum")} rd {d.get("dram__bytes_read.sum")} wr {d.get("dram__bytes_write.sum")} '
          f'dram% {d.get("dram__throughput.avg.pct_of_peak_sustained_elapsed")} L2hit {d.get("lts__t_sector_hit_rate.pct")} '
          f'grid {d.get("launch__grid_size")}')
PY
done
