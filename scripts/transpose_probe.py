"""The 1-byte transpose (ops/transpose.py) against XLA's jnp.transpose of the same fp8 array: GB/s (bytes
read + written) per shape, interleaved rounds, median; then bitwise equal. Also a sanitizer case:
``--check`` runs a few odd shapes once (for compute-sanitizer memcheck / racecheck)."""
import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from jax_tmem.ops import part_call, transpose as tr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="8192x4096,8192x16384,4096x16384,16384x4096,4096x4096")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    if args.check:
        for shape, lead, split in (((132, 260), 0, 1), ((3, 256, 516), 1, 2), ((6, 10), 0, 1), ((2, 5, 132, 8), 1, 3)):
            b = np.random.default_rng(0).integers(0, 256, size=shape, dtype=np.uint8)
            x = jax.lax.bitcast_convert_type(jnp.asarray(b), jnp.float8_e4m3fn)
            call = tr.TransposeCall(lead, split)
            (y,) = jax.jit(lambda v: part_call.bind(call, v))(x)
            ok = np.array_equal(np.asarray(jax.lax.bitcast_convert_type(y, jnp.uint8)), np.transpose(b, call.perm(len(shape))))
            print(shape, lead, split, "equal" if ok else "DIFFERENT")
        return
    for s in args.shapes.split(","):
        r, c = map(int, s.split("x"))
        reps = 8  # distinct arrays per program, so nothing stays in L2
        xs = [jax.random.normal(jax.random.key(i), (r, c), jnp.float32).astype(jnp.float8_e4m3fn) for i in range(reps)]
        ours = jax.jit(lambda xs: [tr.transpose(x, (1, 0)) for x in xs])
        xla = jax.jit(lambda xs: [jnp.transpose(x) for x in xs])
        a, b = ours(xs), xla(xs)
        same = all(np.array_equal(np.asarray(u).view(np.uint8), np.asarray(v).view(np.uint8)) for u, v in zip(a, b))
        times = {"ours": [], "xla": []}
        for rnd in range(args.rounds):
            for name, f in (("ours", ours), ("xla", xla))[:: 1 if rnd % 2 else -1]:
                jax.block_until_ready(f(xs))
                t0 = time.perf_counter()
                for _ in range(5):
                    out = f(xs)
                jax.block_until_ready(out)
                times[name].append((time.perf_counter() - t0) / (5 * reps))
        gbs = {k: 2 * r * c / statistics.median(v) / 1e9 for k, v in times.items()}
        print(f"{r}x{c} fp8: ours {statistics.median(times['ours']) * 1e6:8.1f} us {gbs['ours']:7.0f} GB/s   "
              f"xla {statistics.median(times['xla']) * 1e6:8.1f} us {gbs['xla']:7.0f} GB/s   x{gbs['ours'] / gbs['xla']:.2f}  "
              f"{'bitwise equal' if same else 'DIFFERENT'}")


if __name__ == "__main__":
    main()
