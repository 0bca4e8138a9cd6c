cd $PWD
( python3 -m pip install --no-build-isolation . ) > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
echo "build done $(date +%T)"
timeout 200 python3 -P -m pytest tests/test_decode_fp8.py -q -x -m gpu -p no:cacheprovider > $OUT/t1.log 2>&1; tail -3 $OUT/t1.log; grep -E "^E " $OUT/t1.log | head -12
timeout 150 python3 -P -m pytest tests/test_gpu_gemm.py -q -m gpu -k "split_k_and_swap_ab or decode or dtype_layout" -p no:cacheprovider > $OUT/t2.log 2>&1; tail -2 $OUT/t2.log
for tool in memcheck racecheck; do
XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 100 compute-sanitizer --tool $tool --target-processes all python3 -P scripts/sanitize_case.py > $OUT/san_$tool.log 2>&1
grep -E "SUMMARY|fp8 \(K" $OUT/san_$tool.log | tail -4
done
timeout 280 python3 -P benchmarks/bench_decode.py --out $OUT --ms 1,16,64 --rounds 5 --layouts KN,NK --dtypes float8_e4m3fn 2>&1 | grep -v "^ *jax" | tail -13
