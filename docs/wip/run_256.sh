#!/usr/bin/env bash
# One H200 call (~6 min): at 193-256 tokens the 8B layer runs the dense entries (20 / 9 / 2: the weight read by two
# 128-row token tiles, no evict-first hint) at 0.91-0.94 x XLA; since the hint (ptx/tma.cuh) the swap-AB kernels run
# 4-9 % faster, so time the swap-AB 256-token entry 19 (each weight tile read once, evict-first) in the step again:
# all four projections on it, the narrow ones only, the gate / up only; bf16 with in-kernel K splits, e4m3 through
# the workspace (8-bit tiles 256 wide keep no room to sum in the kernel).
#   bash docs/wip/run_256.sh        (logs under $OUT)
set -u
O=${OUT:-/tmp/o}; mkdir -p "$O"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
python3 -m pip install --no-build-isolation --no-deps --target build/jt_new -C build-dir=build/b_new --upgrade . > "$O/build.log" 2>&1 \
  || { echo BUILD FAILED; tail -30 "$O/build.log"; exit 1; }
echo "built $(el)"
B="python3 -P benchmarks/bench_decode.py --models 8b --layouts NK --ms 200,224,256 --rounds 3"
G="4096,28672:19:1"
V16="all19=$G/4096,6144:19:-2/4096,4096:19:-4/14336,4096:19:-4;narrow19=4096,6144:19:-2/4096,4096:19:-4/14336,4096:19:-4;gu19=$G"
V8="all19=$G/4096,6144:19:2/4096,4096:19:4/14336,4096:19:4;narrow19=4096,6144:19:2/4096,4096:19:4/14336,4096:19:4;gu19=$G"
PYTHONPATH=build/jt_new timeout 170 $B --dtypes bfloat16 --variants "$V16" --out "$O/b16" > "$O/bench16.log" 2>&1
echo "bench bf16 rc=$? $(el)"; grep -v "^ *jax\|Warn" "$O/bench16.log" | tail -13
PYTHONPATH=build/jt_new timeout 170 $B --dtypes float8_e4m3fn --variants "$V8" --out "$O/b8" > "$O/bench8.log" 2>&1
echo "bench e4m3 rc=$? $(el)"; grep -v "^ *jax\|Warn" "$O/bench8.log" | tail -12
