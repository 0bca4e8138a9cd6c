"""Probe (issue 17): does splitting the row-parallel GEMM of the TP MLP step along M (one all-reduce per
chunk) let XLA overlap a chunk's all-reduce with the next chunk's GEMM, for lax.dot_general and for
jax_tmem? The backward is the unchunked GEMMs' (a custom_vjp around the chunked forward).
    python3 -P scripts/tp_overlap_probe.py [--chunks 1,2,4 --rounds 7]
"""
import argparse
import os
import re
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import jax_tmem

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tp_mlp_step import interleaved_times, setup  # noqa: E402


def chunked(mm, chunks):
    if chunks == 1:
        return mm

    @jax.custom_vjp
    def f(h, w):
        return jnp.concatenate([mm(hc, w) for hc in jnp.split(h, chunks, axis=0)], axis=0)

    def fwd(h, w):
        return f(h, w), (h, w)

    def bwd(res, g):
        _, vjp = jax.vjp(mm, *res)
        return vjp(g)

    f.defvjp(fwd, bwd)
    return f


def loss_fn(mm, mm2, params, x):
    w1, w2 = params
    h = jax.nn.gelu(mm(x, w1).astype(jnp.float32)).astype(jnp.bfloat16)
    y = mm2(h, w2).astype(jnp.float32)
    return jnp.mean((y - x.astype(jnp.float32)) ** 2)


def schedule(hlo):
    """The entry computation's op kinds in order, compressed (runs of one kind counted)."""
    entry = hlo[hlo.index("ENTRY"):]
    kinds = []
    for line in entry.splitlines()[1:]:
        m = re.search(r"= (?:\S+|\(.+?\)) ([a-z\-]+)\(", line)
        if not m:
            continue
        k = m.group(1)
        if k in ("parameter", "constant", "get-tuple-element", "bitcast", "tuple"):
            continue
        if k == "custom-call":
            t = re.search(r'custom_call_target="([^"]+)"', line)
            k = "cc:" + (t.group(1) if t else "?")
        kinds.append(k)
    out = []
    for k in kinds:
        if out and out[-1][0] == k:
            out[-1][1] += 1
        else:
            out.append([k, 1])
    return " ".join(f"{k}x{n}" if n > 1 else k for k, n in out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=8192)
    ap.add_argument("--d", type=int, default=8192)
    ap.add_argument("--f", type=int, default=16384)
    ap.add_argument("--chunks", default="1,2,4")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--cpu", action="store_true", help="a smoke test on (simulated) CPU devices")
    args = ap.parse_args()
    gpus, (rep, col, row), (x, w1, w2), ours, lax_mm = setup(args, "cpu" if args.cpu else "gpu")
    steps = {}
    for c in [int(s) for s in args.chunks.split(",")]:
        for name, mm in (("lax", lax_mm), ("jax_tmem", ours)):
            steps[f"{name}/c{c}"] = jax.jit(
                jax.value_and_grad(lambda p, xx, mm=mm, c=c: loss_fn(mm, chunked(mm, c), p, xx)),
                in_shardings=((col, row), rep), out_shardings=(rep, (col, row)))
    res = {n: jax.block_until_ready(s((w1, w2), x)) for n, s in steps.items()}
    ref = res[next(iter(res))]
    for n, (l, (g1, g2)) in res.items():
        d = max(float(jnp.max(jnp.abs(g.astype(jnp.float32) - r.astype(jnp.float32)))) / float(jnp.max(jnp.abs(r.astype(jnp.float32))))
                for g, r in ((g1, ref[1][0]), (g2, ref[1][1])))
        print(f"{n:12s} loss {float(l):.6f} grads max|diff|/max|first| {d:.2e}")
    for n, s in steps.items():
        hlo = s.lower((w1, w2), x).compile().as_text()
        ars = re.findall(r"= (\S+|\(.+?\)) all-reduce(?:-start)?\(", hlo)
        print(f"{n:12s} all-reduces {ars}: {schedule(hlo)}")
    times = interleaved_times(steps, ((w1, w2), x), args.rounds, args.iters)
    base = np.median(times[next(iter(times))])
    for n, ts in times.items():
        t = float(np.median(ts))
        print(f"{n:12s} step {t * 1e3:7.3f} ms  (min {min(ts) * 1e3:.3f})  first / this {base / t:.3f}")


if __name__ == "__main__":
    main()
