cd $PWD
( python3 -m pip install --no-build-isolation . ) > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
echo "build done $(date +%T)"
cat > /tmp/kn.py <<'PY'
import jax, jax.numpy as jnp, jax_tmem
x = jax.random.normal(jax.random.key(0), (16, 8192), jnp.float32).astype(jnp.float8_e4m3fn)
for lay in ("KN", "NK"):
    w = jax.random.normal(jax.random.key(1), (8192, 8192), jnp.float32).astype(jnp.float8_e4m3fn)
    dn = (((1,), (0 if lay == "KN" else 1,)), ((), ()))
    f = jax.jit(lambda a, b: jax_tmem.dot_general(a, b, dn, preferred_element_type=jnp.bfloat16))
    for _ in range(3): jax.block_until_ready(f(x, w))
PY
XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 200 ncu --clock-control none -k regex:sm90_gemm --launch-skip 2 --launch-count 4 --section WarpStateStats --section SpeedOfLight python3 -P /tmp/kn.py > $OUT/ncu.txt 2>&1
grep -E "sm90_gemm_kernel|Duration|Stall|stall|Warp Cycles|Memory Throughput|DRAM Throughput|Issued" $OUT/ncu.txt | cut -c1-150 | head -60
