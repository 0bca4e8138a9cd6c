"""The tensor-parallel MLP training step of issue 11 on every local GPU: w1 split by columns, w2 by
rows (Megatron), jit + NamedSharding, forward and backward, jax_tmem.matmul against lax.dot_general.

Prints the loss and the gradients' relative difference, and the step time of each (interleaved
rounds, median), with TFLOP/s per GPU (12 * M * D * F flops per step, split over the devices).
    python3 -P scripts/tp_mlp_step.py [--m 8192 --d 8192 --f 16384 --rounds 7]
"""
import argparse
import re
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import jax_tmem


def loss_fn(mm, params, x):
    w1, w2 = params
    h = jax.nn.gelu(mm(x, w1).astype(jnp.float32)).astype(jnp.bfloat16)
    y = mm(h, w2).astype(jnp.float32)
    return jnp.mean((y - x.astype(jnp.float32)) ** 2)


def setup(args, platform="gpu"):
    """The first two (or all) local devices of `platform` as a 1-D mesh "d", the shardings (replicated,
    columns, rows), fresh random x (replicated), w1 (by columns), w2 (by rows), and the two matmuls."""
    devs = [d for d in jax.local_devices() if d.platform == platform]
    devs = devs[:2] if platform == "cpu" else devs
    if len(devs) < 2:
        raise SystemExit(f"needs at least two {platform.upper()}s (sees {len(devs)})")
    mesh = Mesh(np.array(devs), ("d",))
    rep = NamedSharding(mesh, P())
    col, row = NamedSharding(mesh, P(None, "d")), NamedSharding(mesh, P("d", None))
    k = jax.random.split(jax.random.key(int(time.time())), 3)
    x = jax.device_put(jax.random.normal(k[0], (args.m, args.d), jnp.bfloat16), rep)
    w1 = jax.device_put((0.02 * jax.random.normal(k[1], (args.d, args.f))).astype(jnp.bfloat16), col)
    w2 = jax.device_put((0.02 * jax.random.normal(k[2], (args.f, args.d))).astype(jnp.bfloat16), row)
    ours = lambda a, b: jax_tmem.matmul(a, b, out_dtype=jnp.bfloat16, path="kernel" if platform == "gpu" else None)
    lax_mm = lambda a, b: jax.lax.dot_general(a, b, (((1,), (0,)), ((), ())),
                                              preferred_element_type=jnp.bfloat16)
    return devs, (rep, col, row), (x, w1, w2), ours, lax_mm


def interleaved_times(steps, inputs, rounds, iters):
    """{name: [seconds per call, one per round]}: each round times every step once (a warm call, then
    `iters` calls and one wait), in the dict's order."""
    times = {n: [] for n in steps}
    for _ in range(rounds):
        for n, s in steps.items():
            jax.block_until_ready(s(*inputs))
            t = time.perf_counter()
            for _ in range(iters):
                out = s(*inputs)
            jax.block_until_ready(out)
            times[n].append((time.perf_counter() - t) / iters)
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=8192)
    ap.add_argument("--d", type=int, default=8192)
    ap.add_argument("--f", type=int, default=16384)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=10)
    args = ap.parse_args()
    gpus, (rep, col, row), (x, w1, w2), ours, lax_mm = setup(args)
    steps = {}
    for name, mm in (("jax_tmem", ours), ("lax", lax_mm)):
        steps[name] = jax.jit(jax.value_and_grad(lambda p, xx, mm=mm: loss_fn(mm, p, xx)),
                              in_shardings=((col, row), rep), out_shardings=(rep, (col, row)))
    jax_tmem.clear_decisions()
    res = {n: jax.block_until_ready(s((w1, w2), x)) for n, s in steps.items()}
    print("paths:", sorted({d.path for d in jax_tmem.decisions()}))
    (l0, (g1, g2)), (lx, (g1x, g2x)) = res["jax_tmem"], res["lax"]
    print(f"loss jax_tmem {float(l0):.6f}  lax {float(lx):.6f}  rel {abs(float(l0) - float(lx)) / abs(float(lx)):.2e}")
    for nm, g, gx in (("dw1", g1, g1x), ("dw2", g2, g2x)):
        g, gx = np.asarray(g.astype(jnp.float32), np.float64), np.asarray(gx.astype(jnp.float32), np.float64)
        print(f"{nm}: max|diff|/max|lax| {np.abs(g - gx).max() / np.abs(gx).max():.2e}")
    times = interleaved_times(steps, ((w1, w2), x), args.rounds, args.iters)
    flops = 12.0 * args.m * args.d * args.f / len(gpus)
    for n, ts in times.items():
        t = float(np.median(ts))
        print(f"{n:9s} step {t * 1e3:7.2f} ms  {flops / t / 1e12:6.0f} TFLOP/s per GPU")
    print(f"ratio jax_tmem/lax (time) {np.median(times['jax_tmem']) / np.median(times['lax']):.3f}")
    for n, s in steps.items():
        hlo = s.lower((w1, w2), x).compile().as_text()
        print(f"collectives in the {n} step:",
              {c: hlo.count(c + "(") for c in ("all-gather", "all-reduce", "reduce-scatter", "all-to-all",
                                                "collective-permute")},
              "all-reduce results:", re.findall(r"= (\S+) all-reduce(?:-start)?\(", hlo))


if __name__ == "__main__":
    main()
