"""Perf probe (dev tool): jax_tmem vs jnp.dot over K for 8192x8192 bf16 and every config; the fit
t = a + b K separates the mainloop rate (b) from the per-tile fixed cost (a), see docs/PERF.md.
With an argument it runs one GEMM for ncu."""
import sys, time, statistics
import jax, jax.numpy as jnp
import jax_tmem
from jax_tmem.ops import gemm as gemm_op

def t(f, *a, reps=5):
    jax.block_until_ready(f(*a)); ts = []
    for _ in range(reps):
        t0 = time.perf_counter(); jax.block_until_ready(f(*a)); ts.append(time.perf_counter() - t0)
    return statistics.median(ts)

R = 4
for m, n, k in [(8192, 8192, 1024), (8192, 8192, 4096), (8192, 8192, 16384)]:
    a = [jax.random.normal(jax.random.key(i), (m, k), jnp.bfloat16) for i in range(R)]
    b = [jax.random.normal(jax.random.key(10 + i), (k, n), jnp.bfloat16) for i in range(R)]
    row = f"{m}x{n}x{k}:"
    for cfg in (-1, 0, 1):
        f = jax.jit(lambda aa, bb, cfg=cfg: [gemm_op.gemm(x, y, None, None, (((1,), (0,)), ((), ())), jnp.dtype("bfloat16"),
                    gemm_op.Epilogue(), "kernel", True, cfg) for x, y in zip(aa, bb)])
        row += f" cfg{cfg} {2*m*n*k/(t(f, a, b)/R)/1e12:.0f}"
    g = jax.jit(lambda aa, bb: [jnp.dot(x, y) for x, y in zip(aa, bb)])
    row += f" | xla {2*m*n*k/(t(g, a, b)/R)/1e12:.0f}"
    print(row, flush=True)
if len(sys.argv) > 1:  # single call for ncu
    a = jax.random.normal(jax.random.key(0), (8192, 8192), jnp.bfloat16)
    f = jax.jit(lambda x: jax_tmem.matmul(x, x, path="kernel"))
    jax.block_until_ready(f(a)); jax.block_until_ready(f(a))
try:
    from jax.experimental.pallas.ops.gpu import hopper_matmul_mgpu as hm
    import inspect, dataclasses
    print("pallas TuningConfig fields:", [(f.name, f.default) for f in dataclasses.fields(hm.TuningConfig)])
    print("pallas matmul sig:", inspect.signature(hm.matmul))
except Exception as e:
    print("pallas import:", e)
