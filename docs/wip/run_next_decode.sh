#!/usr/bin/env bash
# The next device session's first call for issue 15 (docs/PERF.md Next steps 2 (a) and (c)), one H200, ~9 minutes:
#   bash docs/wip/run_next_decode.sh          (logs under $OUT)
# Builds the default configs plus the sweep entries 48 (weight-multicast pairs) and 49 (192 weight rows x 80 tokens),
# flipped to kCandidate in this copy only; runs their GPU tests, the graph-timed probe, a CUPTI trace of the 8B chain at
# 160 tokens with the down projection on 48 (where do the kernel's 9 us go?), the decode chain with XLA's command
# buffers on and off, and the QKV on 49. Never use a bare `wait` here (it waits for tee too).
set -u
O=${OUT:-/tmp/o}; mkdir -p "$O"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
sed -i -E 's/(k128x80SwapABClusterN2, 48, .*kSwapAB, )kSweep/\1kCandidate/; s/(k192x80SwapAB, 49, .*kSwapAB, )kSweep/\1kCandidate/' \
  cpp/include/jax_tmem/sm90_configs.def
grep -c "kSwapAB, kCandidate" cpp/include/jax_tmem/sm90_configs.def
PYSITE=$(python3 -c "import jaxlib,os;print(os.path.dirname(os.path.dirname(jaxlib.__file__)))")
( nvcc -std=c++17 -O3 -arch=sm_90a --expt-relaxed-constexpr -Icpp/include -Icpp/src -I "$PYSITE/jaxlib/include" \
    -o /tmp/stream_probe scripts/stream_probe.cu > "$O/probe_build.log" 2>&1 && timeout 150 /tmp/stream_probe sp > "$O/sp.log" 2>&1 ) &
ppid=$!
python3 -m pip install --no-build-isolation . > "$O/build.log" 2>&1 || { echo BUILD FAILED; tail -40 "$O/build.log"; exit 1; }
echo "ext built $(el)"
wait "$ppid"; cat "$O/sp.log"
timeout 150 python3 -P -m pytest -q -p no:cacheprovider tests/test_splits_in_kernel.py tests/test_gpu_gemm.py \
  -k "cfg49 or swap192x80 or cfg48 or swapab80n2 or command_buffers" -rs > "$O/tests.log" 2>&1
echo "tests rc=$? $(el)"; grep -E "passed|failed|^(FAILED|ERROR|SKIPPED)" "$O/tests.log" | head -20
P="python3 -P scripts/decode_probe.py --model 8b --dtype bfloat16 --layout NK --m 160 --layers 4 --trace"
timeout 90 $P --variants "d48=14336,4096:48:-2" > "$O/trace_cb.log" 2>&1; echo "trace rc=$? $(el)"
XLA_FLAGS=--xla_gpu_enable_command_buffer= timeout 90 $P --variants "d48=14336,4096:48:-2" > "$O/trace_nocb.log" 2>&1
echo "trace (no command buffers) rc=$? $(el)"; grep -E "^==|gap" "$O/trace_cb.log" "$O/trace_nocb.log" | head -60
B="python3 -P benchmarks/bench_decode.py --models 8b --dtypes bfloat16,float8_e4m3fn --layouts NK --ms 136,160 --rounds 3"
XLA_FLAGS=--xla_gpu_enable_command_buffer= timeout 100 $B --out "$O/bnocb" --variants "d48=14336,4096:48:-2" > "$O/bench_nocb.log" 2>&1
echo "bench (no command buffers) rc=$? $(el)"; grep -v "^ *jax\|Warn" "$O/bench_nocb.log" | tail -12
timeout 100 $B --out "$O/b49" --variants "q49=4096,6144:49:-2;q49s1=4096,6144:49:1" > "$O/bench49.log" 2>&1
echo "bench 49 rc=$? $(el)"; grep -v "^ *jax\|Warn" "$O/bench49.log" | tail -12
