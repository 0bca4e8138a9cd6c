#!/usr/bin/env bash
# One short H200 call (~2 min, no package build): stream_probe tl160 (-DJT_TIMELINE) for main's kernels and for each
# patch given (default docs/wip/pair_shared_fixup.patch), each built from a patched copy of cpp/, all in parallel:
# per-CTA marks of the 8B narrow projections at 160 tokens in cuBLAS's forms (50: QKV 192x80 pairs; 48: O / down
# 128x80 pairs) and 41, graph-timed, and the pair plans' outputs against the reduce pass bitwise (random operands,
# 2 and 3 splits).
#   bash docs/wip/run_tl160.sh [PATCH ...]        (logs under $OUT)
#   (2026-12-02 13:22: put_fence_once.patch within the spread; swap_staged_store.patch landed, now reverse-applies)
set -u
O=${OUT:-/tmp/o}; mkdir -p "$O"
[ $# -eq 0 ] && set -- docs/wip/pair_shared_fixup.patch
PYSITE=$(python3 -c "import jaxlib,os;print(os.path.dirname(os.path.dirname(jaxlib.__file__)))")
F="-std=c++17 -O3 -arch=sm_90a --expt-relaxed-constexpr -DJT_TIMELINE -I $PYSITE/jaxlib/include"
pids=()
( nvcc $F -Icpp/include -Icpp/src -o /tmp/sp_main scripts/stream_probe.cu > "$O/build_main.log" 2>&1 ) &
pids+=($!)
names=(main)
for P in "$@"; do
  n=$(basename "$P" .patch); names+=("$n")
  rm -rf "/tmp/t_$n" && mkdir -p "/tmp/t_$n" && cp -r cpp "/tmp/t_$n/" && (cd "/tmp/t_$n" && patch -p1 < "$OLDPWD/$P") \
    > "$O/patch_$n.log" 2>&1 || { echo "PATCH FAILED: $P"; cat "$O/patch_$n.log"; exit 1; }
  ( nvcc $F -I"/tmp/t_$n/cpp/include" -I"/tmp/t_$n/cpp/src" -o "/tmp/sp_$n" scripts/stream_probe.cu > "$O/build_$n.log" 2>&1 ) &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
for v in "${names[@]}"; do
  echo "=== $v"; timeout 40 "/tmp/sp_$v" tl160 > "$O/tl160_$v.log" 2>&1
  grep -E "cold|MMAs retired|K splits|epilogue done|graph|bitwise" "$O/tl160_$v.log"
done
