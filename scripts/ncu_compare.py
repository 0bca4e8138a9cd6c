"""Dev tool: one GEMM through each kernel menu entry given on the command line and/or through jnp.dot
(cuBLASLt), for Nsight Compute side by side, e.g.
  XLA_PYTHON_CLIENT_PREALLOCATE=false ncu --clock-control none --target-processes all \\
      -k regex:'gemm|nvjet|xmma' --launch-skip 2 --section SpeedOfLight --section WarpStateStats \\
      python3 -P scripts/ncu_compare.py 1 6 [--shape 16,8192,8192,bfloat16]
Profile "xla" in its own process: under ncu the jnp.dot run segfaulted the process after our kernels
(2026-11-21), and ncu then printed nothing. Without preallocation off, ncu backs up ~100 GB of device
memory per replay. Each function runs 3 times (--launch-skip 2 keeps the last of the first one).
The weight-like operand B is K x N (MN-major), as in benchmarks/bench_gemm.py."""
import argparse
import jax, jax.numpy as jnp
import jax_tmem
from jax_tmem.ops import gemm as gemm_op

ap = argparse.ArgumentParser()
ap.add_argument("variants", nargs="+", help="menu configs (-1 = heuristic) and/or 'xla'")
ap.add_argument("--shape", default="8192,8192,8192,bfloat16", help="M,N,K,dtype[,NK] (NK: b stored (N, K))")
args = ap.parse_args()
m, n, k, dtype, *lay = args.shape.split(",")
m, n, k = int(m), int(n), int(k)
nk = lay == ["NK"]
a = jax.random.normal(jax.random.key(0), (m, k), jnp.float32).astype(dtype)
b = jax.random.normal(jax.random.key(1), (n, k) if nk else (k, n), jnp.float32).astype(dtype)
dn = (((1,), (1 if nk else 0,)), ((), ()))
fns = {}
for v in args.variants:
    if v == "xla":
        fns["xla"] = jax.jit(lambda x, y: jax.lax.dot_general(x, y, dn, preferred_element_type=jnp.bfloat16))
    elif v == "-1":  # the public API, as the benchmark calls it (fp8 MN-major B is transposed first)
        fns["auto"] = jax.jit(lambda x, y: jax_tmem.dot_general(x, y, dn, preferred_element_type=jnp.bfloat16, path="kernel"))
    else:
        cfg = tuple(map(int, v.split(":"))) if ":" in v else int(v)  # "11:2": entry 11 with 2 K splits
        fns[f"cfg{v}"] = jax.jit(lambda x, y, c=cfg: gemm_op.gemm(x, y, None, None, dn, jnp.dtype("bfloat16"),
                                                                  gemm_op.Epilogue(), "kernel", True, c))
for name, f in fns.items():
    for _ in range(3):
        jax.block_until_ready(f(a, b))
    print(name, "done", flush=True)
