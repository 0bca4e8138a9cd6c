"""Dev tool: where the time of a short GEMM goes inside a jitted program (decode shapes).

The benchmark times R GEMMs on distinct operands in one jitted program and divides by R. For a 60 us
decode GEMM this also counts whatever the runtime does per custom call between kernels. This probe
prints, for R = 4, 16, 32, the per-GEMM time of jax_tmem and jnp.dot and the marginal time per GEMM
(T(32) - T(16)) / 16. Run it with and without XLA command buffers, e.g.
  XLA_FLAGS=--xla_gpu_enable_command_buffer= python3 -P scripts/overhead_probe.py
Usage: python3 -P scripts/overhead_probe.py [M,N,K,dtype[,NK] ...]"""
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp

import jax_tmem


def _t(f, args, reps=7):
    jax.block_until_ready(f(*args))
    jax.block_until_ready(f(*args))
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*args))
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main():
    specs = sys.argv[1:] or ["16,8192,8192,bfloat16"]
    print("XLA_FLAGS:", os.environ.get("XLA_FLAGS", ""), flush=True)
    for spec in specs:
        m, n, k, dt, *lay = spec.split(",")
        m, n, k, nk = int(m), int(n), int(k), lay == ["NK"]
        dn = (((1,), (1 if nk else 0,)), ((), ()))
        key = jax.random.key(0)
        rmax = 32
        a = [jax.random.normal(jax.random.fold_in(key, i), (m, k), jnp.float32).astype(dt) for i in range(rmax)]
        b = [jax.random.normal(jax.random.fold_in(key, 100 + i), (n, k) if nk else (k, n), jnp.float32).astype(dt)
             for i in range(rmax)]
        fns = {
            "jax_tmem": lambda x, y: jax_tmem.dot_general(x, y, dn, preferred_element_type=jnp.bfloat16, path="kernel"),
            "xla": lambda x, y: jax.lax.dot_general(x, y, dn, preferred_element_type=jnp.bfloat16),
        }
        nbytes = (m * k + k * n) * jnp.dtype(dt).itemsize + m * n * 2
        for name, g in fns.items():
            row, per = f"{spec} {name}:", {}
            for r in (4, 16, 32):
                f = jax.jit(lambda aa, bb, g=g: [g(x, y) for x, y in zip(aa, bb)])
                per[r] = _t(f, (a[:r], b[:r])) / r
                row += f" R={r} {per[r] * 1e6:.1f} us ({nbytes / per[r] / 1e12:.2f} TB/s)"
            marg = (per[32] * 32 - per[16] * 16) / 16
            row += f" | marginal {marg * 1e6:.1f} us ({nbytes / marg / 1e12:.2f} TB/s)"
            print(row, flush=True)


if __name__ == "__main__":
    main()
