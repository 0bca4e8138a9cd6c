#!/usr/bin/env bash
# One short H200 call (~2 min, no package build): stream_probe tl160 (-DJT_TIMELINE) twice, main's kernels and those of
# a patch (default docs/wip/pair_shared_fixup.patch; built from a patched copy of cpp/ in parallel): per-CTA marks of the 8B narrow
# projections at 160 tokens in cuBLAS's forms (50: QKV 192x80 pairs; 48: O / down 128x80 pairs) and 41, graph-timed,
# and the pair plans' outputs against the reduce pass bitwise (random operands, 2 and 3 splits).
#   bash docs/wip/run_tl160.sh [PATCH]        (logs under $OUT; next: docs/wip/put_fence_once.patch)
set -u
P=${1:-docs/wip/pair_shared_fixup.patch}
O=${OUT:-/tmp/o}; mkdir -p "$O"
PYSITE=$(python3 -c "import jaxlib,os;print(os.path.dirname(os.path.dirname(jaxlib.__file__)))")
rm -rf /tmp/new && mkdir -p /tmp/new && cp -r cpp /tmp/new/ && (cd /tmp/new && patch -p1 < "$OLDPWD/$P") \
  > "$O/patch.log" 2>&1 || { echo PATCH FAILED; cat "$O/patch.log"; exit 1; }
F="-std=c++17 -O3 -arch=sm_90a --expt-relaxed-constexpr -DJT_TIMELINE -I $PYSITE/jaxlib/include"
( nvcc $F -Icpp/include -Icpp/src -o /tmp/sp_main scripts/stream_probe.cu > "$O/build_main.log" 2>&1 ) &
a=$!
( nvcc $F -I/tmp/new/cpp/include -I/tmp/new/cpp/src -o /tmp/sp_new scripts/stream_probe.cu > "$O/build_new.log" 2>&1 ) &
b=$!
wait "$a"; wait "$b"
for v in main new; do
  echo "=== $v"; timeout 40 /tmp/sp_$v tl160 > "$O/tl160_$v.log" 2>&1
  grep -E "cold|MMAs retired|K splits|epilogue done|graph|bitwise" "$O/tl160_$v.log"
done
