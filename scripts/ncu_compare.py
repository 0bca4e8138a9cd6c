"""Dev tool: one 8192^3 bf16 GEMM through each kernel menu entry given on the command line and through
jnp.dot (cuBLASLt), for Nsight Compute side by side:
  ncu --clock-control none --target-processes all -k regex:'gemm|nvjet|xmma' --section SpeedOfLight \\
      --section WarpStateStats python3 -P scripts/ncu_compare.py 1 6 xla
Each function runs 3 times. Profile "xla" in its own process with XLA_PYTHON_CLIENT_PREALLOCATE=false:
under ncu 2026.x the jnp.dot run segfaulted the process after our kernels (and ncu then printed nothing)."""
import sys
import jax, jax.numpy as jnp
from jax_tmem import _primitive, ops

m = n = k = 8192
a = jax.random.normal(jax.random.key(0), (m, k), jnp.bfloat16)
b = jax.random.normal(jax.random.key(1), (k, n), jnp.bfloat16)
dn = (((1,), (0,)), ((), ()))
fns = {f"cfg{c}": jax.jit(lambda x, y, c=int(c): ops._gemm(x, y, None, None, dn, jnp.dtype("bfloat16"),
                                                           _primitive.Epilogue(), "kernel", True, c))
       for c in sys.argv[1:] if c != "xla"}
if "xla" in sys.argv[1:]:
    fns["xla"] = jax.jit(lambda x, y: jnp.dot(x, y))
for name, f in fns.items():
    for _ in range(3):
        jax.block_until_ready(f(a, b))
    print(name, "done", flush=True)
