"""Dev tool: the rowwise MXFP8 quantize (plain and swizzled scales) at 4096^2 raced against XLA's quantizer
alone, then with the colwise kernel, then with the swizzled form, as benchmarks/bench_block_scaled.py races
them (interleaved rounds): how much that row moves between races of one process (docs/PERF.md, 2026-11-26)."""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from bench_gemm import interleaved  # noqa: E402

import jax_tmem  # noqa: E402

m = k = 4096; r = 8
key = jax.random.key(m)
xs = [jax.random.normal(jax.random.fold_in(key, 2 * i), (m, k), jnp.float32).astype(jnp.bfloat16) for i in range(r)]
ws = [jax.random.normal(jax.random.fold_in(key, 2 * i + 1), (m, k), jnp.float32).astype(jnp.bfloat16) for i in range(r)]
many = lambda f: jax.jit(lambda aa, bb: [f(a, b) for a, b in zip(aa, bb)])
qb = 2 * (m * k * 2 + m * k + m * k // 32)
for names in (("row", "xla"), ("row", "xla", "col"), ("row", "sw")):
    fns = {"row": many(lambda a, b: (jax_tmem.quantize(a, "mxfp8", path="kernel"), jax_tmem.quantize(b, "mxfp8", path="kernel"))),
           "xla": many(lambda a, b: (jax_tmem.quantize(a, "mxfp8", path="xla"), jax_tmem.quantize(b, "mxfp8", path="xla"))),
           "col": many(lambda a, b: (jax_tmem.quantize(a, "mxfp8", axis=0, path="kernel"), jax_tmem.quantize(b, "mxfp8", axis=0, path="kernel"))),
           "sw": many(lambda a, b: (jax_tmem.quantize(a, "mxfp8", path="kernel", scale_layout="swizzled"),
                                    jax_tmem.quantize(b, "mxfp8", path="kernel", scale_layout="swizzled")))}
    t = interleaved({n: fns[n] for n in names}, (xs, ws))
    print(names, {n: round(qb / (statistics.median(v) / r) / 1e12, 2) for n, v in t.items()}, flush=True)
