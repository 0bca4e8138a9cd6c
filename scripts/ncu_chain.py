"""Dev tool (issue 15): one decode layer of bench_decode.py's step (one weight set, (N, K) layout), run three times
warm and then once between cuProfilerStart / cuProfilerStop, so that Nsight Compute with --profile-from-start off
profiles exactly one execution's kernels (not XLA's autotuning, which launches cuBLAS kernels of its own), e.g.
  XLA_PYTHON_CLIENT_PREALLOCATE=false ncu --clock-control none --target-processes all --profile-from-start off \\
      -k regex:'nvjet|sm90_gemm' --section LaunchStats --section SpeedOfLight \\
      python3 -P scripts/ncu_chain.py xla 160 bfloat16
Contender: "xla", "ours", or a forced-plan spec in bench_decode.py's --variants syntax without the name
("14336,4096:48:-2/4096,4096:41:-2"). docs/PERF.md 2026-12-01 10:50 read cuBLAS's grids and ours with it."""
import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import bench_decode as bd  # noqa: E402

who, m, dtype = sys.argv[1], int(sys.argv[2]), sys.argv[3]
model = sys.argv[4] if len(sys.argv) > 4 else "8b"
hidden, shapes = bd.MODELS[model]
key = jax.random.key(0)
ws = [[(jax.random.normal(jax.random.fold_in(key, i), (n, k), jnp.float32) / k ** 0.5).astype(dtype)
       for i, (k, n) in enumerate(shapes)]]
if who == "xla":
    dot = lambda x, w, dn: jax.lax.dot_general(x, w, dn, preferred_element_type=jnp.bfloat16)  # noqa: E731
elif who == "ours":
    import jax_tmem
    dot = lambda x, w, dn: jax_tmem.dot_general(x, w, dn, preferred_element_type=jnp.bfloat16)  # noqa: E731
else:
    dot = bd._forced_dot(list(bd.parse_variants("v=" + who).values())[0], "NK")
step = bd._step(dot, dtype, "NK", hidden)
x = jax.random.normal(jax.random.key(m), (m, hidden), jnp.float32).astype(jnp.bfloat16)
for _ in range(3):
    jax.block_until_ready(step(x, ws))
cu = ctypes.CDLL("libcuda.so.1")  # the profiler API acts on the current context: JAX's primary one
ctx = ctypes.c_void_p()
cu.cuCtxGetCurrent(ctypes.byref(ctx))
if not ctx.value:
    dev = ctypes.c_int()
    cu.cuDeviceGet(ctypes.byref(dev), 0)
    cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
    cu.cuCtxSetCurrent(ctx)
print("cuProfilerStart:", cu.cuProfilerStart(), flush=True)
jax.block_until_ready(step(x, ws))
cu.cuProfilerStop()
print(who, "done", flush=True)
