#!/usr/bin/env bash
set -u
OUT=${OUT:-out}; mkdir -p $OUT
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv > $OUT/env.txt
( time python3 -m pip install --no-build-isolation . ) > $OUT/build.log 2>&1 || { echo BUILD FAILED; tail -30 $OUT/build.log; exit 1; }
echo "build done $(date +%T)"
timeout 200 python3 -P -m pytest -q -p no:cacheprovider tests/test_decode_fp8.py -m gpu > $OUT/t_fp8.log 2>&1; tail -3 $OUT/t_fp8.log
timeout 200 python3 -P -m pytest -q -p no:cacheprovider tests/test_gpu_gemm.py -m gpu -k "split_k_and_swap_ab and e4m3" > $OUT/t_swap.log 2>&1; tail -3 $OUT/t_swap.log
XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 150 compute-sanitizer --tool racecheck --target-processes all python3 -P scripts/sanitize_case.py > $OUT/racecheck.log 2>&1; grep -E "SUMMARY|done|Error|fp8" $OUT/racecheck.log | tail -6
timeout 250 python3 -P benchmarks/bench_decode.py --out $OUT --ms 1,16,64 --dtypes float8_e4m3fn --layouts KN,NK --rounds 5 > $OUT/decode.log 2>&1
grep "xla/ours\|device" $OUT/decode.log
