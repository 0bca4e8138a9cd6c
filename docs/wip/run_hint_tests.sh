#!/usr/bin/env bash
# One H200 call (~7 min): this tree's package (run 2026-12-02 19:00 with docs/wip/decode_evict_first.patch applied)
# and GPU tests (give them more time than here: the 129-192-token test alone takes 1-2 min per parametrization, its
# float64 references compiled for the GPU); beside the build, stream_probe tl160 (the 8B layer's projections at 160 tokens,
# graph-timed) for this tree and with docs/wip/token_evict_last.patch (the token tile evict-last), two rounds.
#   bash docs/wip/run_hint_tests.sh        (logs under $OUT; never a bare `wait` here)
set -u
O=${OUT:-/tmp/o}; mkdir -p "$O"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
PYSITE=$(python3 -c "import jaxlib,os;print(os.path.dirname(os.path.dirname(jaxlib.__file__)))")
( python3 -m pip install -v --no-build-isolation --no-deps --target build/jt_new -C build-dir=build/b_new --upgrade . \
    > "$O/build.log" 2>&1; echo "new rc=$?" >> "$O/build.log" ) &
pb=$!
F="-std=c++17 -O3 -arch=sm_90a --expt-relaxed-constexpr -DJT_TIMELINE -I $PYSITE/jaxlib/include"
( nvcc $F -Icpp/include -Icpp/src -o /tmp/sp_main scripts/stream_probe.cu > "$O/sp_main.log" 2>&1 ) &
p1=$!
rm -rf /tmp/t_keep && mkdir -p /tmp/t_keep && cp -r cpp /tmp/t_keep/ && (cd /tmp/t_keep && patch -p1 < "$OLDPWD/docs/wip/token_evict_last.patch") > "$O/patch.log" 2>&1
( nvcc $F -I/tmp/t_keep/cpp/include -I/tmp/t_keep/cpp/src -o /tmp/sp_keep scripts/stream_probe.cu > "$O/sp_keep.log" 2>&1 ) &
p2=$!
wait "$p1"; wait "$p2"
echo "probes built $(el)"
for r in 1 2; do for v in main keep; do
  timeout 60 /tmp/sp_$v tl160 > "$O/tl160_${v}_$r.log" 2>&1
  echo "=== tl160 $v $r rc=$? $(el)"; grep -E "graph|DIFFERENT" "$O/tl160_${v}_$r.log"
done; done
wait "$pb"
echo "package built $(el)"; tail -1 "$O/build.log"; grep -i "spill" "$O/build.log" | grep -v " 0 bytes spill" | head -5
T="timeout 130 python3 -P -m pytest -q -p no:cacheprovider -rs --tb=short"
PYTHONPATH=build/jt_new $T tests/test_gpu_gemm.py -k "129_192 or wide_tokens or swap_ab_plain or decode_runs_swap" > "$O/t1.log" 2>&1
echo "t1 rc=$? $(el)"; grep -E "passed|failed|^(FAILED|ERROR)|rel err|Error|^E " "$O/t1.log" | head -30
PYTHONPATH=build/jt_new $T tests/test_weight_only.py tests/test_decode_mma.py tests/test_decode_fp8.py > "$O/t2.log" 2>&1
echo "t2 rc=$? $(el)"; grep -E "passed|failed|^(FAILED|ERROR)|rel err|Error|^E " "$O/t2.log" | head -20
