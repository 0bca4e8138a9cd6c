"""Dev tool: the GEMMs of one device's share of the tensor-parallel MLP step (scripts/tp_mlp_step.py), on
one GPU, ours against lax.dot_general: each layout the step's forward and backward run (interleaved
rounds, bench_gemm's method, the kernel the heuristic picks named), then the whole one-device step
(value_and_grad of the same loss, no communication), so a multi-GPU gap can be split into GEMM time and
the rest.
    python3 -P scripts/step_gemm_probe.py [--m 8192 --d 8192 --f 8192 --rounds 7] [--sustain 2]
Layouts: "NN" a (M, K) x b (K, N) (forward), "NT" b stored (N, K) (dx = g w^T), "TN" a stored (K, M)
(dw = x^T g)."""
import argparse
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import bench_gemm  # noqa: E402
import jax_tmem  # noqa: E402

DN = {"NN": (((1,), (0,)), ((), ())), "NT": (((1,), (1,)), ((), ())), "TN": (((0,), (0,)), ((), ()))}


def sustained(fns, args, rounds, secs):
    """Seconds per call of each function, one entry per round: each runs back to back for ``secs`` seconds
    (dispatches queued 20 at a time), the contenders taking turns."""
    t = {n: [] for n in fns}
    for f in fns.values():
        jax.block_until_ready(f(*args))
    for _ in range(rounds):
        for n, f in fns.items():
            t0, cnt, out = time.perf_counter(), 0, None
            while time.perf_counter() - t0 < secs:
                for _ in range(20):
                    out = f(*args)
                cnt += 20
                jax.block_until_ready(out)
            t[n].append((time.perf_counter() - t0) / cnt)
    return t


def timed(fns, fargs, args):
    return sustained(fns, fargs, args.rounds, args.sustain) if args.sustain > 0 else bench_gemm.interleaved(fns, fargs, args.rounds)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=8192)
    ap.add_argument("--d", type=int, default=8192)
    ap.add_argument("--f", type=int, default=8192, help="the hidden width on one device")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--sustain", type=float, default=0.0,
                    help="seconds each contender runs back to back per round (steady state at the power cap, as in "
                         "a training run) instead of bench_gemm's short interleaved bursts")
    args = ap.parse_args()
    m, d, f = args.m, args.d, args.f
    print(f"{jax.devices()[0].device_kind}, jax {jax.__version__}")
    # (what, layout, M, N, K) of the step: h = x w1, y = h w2; dh = g w2^T, dw2 = h^T g, dx = dh w1^T, dw1 = x^T dh
    gemms = [("x w1", "NN", m, f, d), ("h w2", "NN", m, d, f), ("g w2^T", "NT", m, f, d),
             ("h^T g", "TN", f, d, m), ("dh w1^T", "NT", m, d, f), ("x^T dh", "TN", d, f, m)]
    key = jax.random.key(0)
    for what, lay, M, N, K in gemms:
        a_shape = (K, M) if lay == "TN" else (M, K)
        b_shape = (N, K) if lay == "NT" else (K, N)
        r = 3 if M * N * K <= 8192 ** 3 else 2
        a = [jax.random.normal(jax.random.fold_in(key, 2 * i), a_shape, jnp.bfloat16) for i in range(r)]
        b = [jax.random.normal(jax.random.fold_in(key, 2 * i + 1), b_shape, jnp.bfloat16) for i in range(r)]
        dn = DN[lay]
        many = lambda g: jax.jit(lambda aa, bb: [g(x, y) for x, y in zip(aa, bb)])
        fns = {"xla": many(lambda x, y: jax.lax.dot_general(x, y, dn, preferred_element_type=jnp.bfloat16)),
               "ours": many(lambda x, y: jax_tmem.dot_general(x, y, dn, preferred_element_type=jnp.bfloat16,
                                                              path="kernel"))}
        jax_tmem.clear_decisions()
        t = timed(fns, (a, b), args)
        ratio = [t["xla"][i] / t["ours"][i] for i in range(args.rounds)]
        fl = 2.0 * M * N * K * r
        dec = sorted({x.target for x in jax_tmem.decisions()})
        print(f"{what:8s} {lay} {M}x{N}x{K}: ours {fl / statistics.median(t['ours']) / 1e12:5.0f} TFLOP/s, xla "
              f"{fl / statistics.median(t['xla']) / 1e12:5.0f}; xla/ours time {statistics.median(ratio):.3f} "
              f"({min(ratio):.3f}-{max(ratio):.3f}); {dec}", flush=True)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from tp_mlp_step import loss_fn
    ks = jax.random.split(jax.random.key(1), 3)
    x = jax.random.normal(ks[0], (m, d), jnp.bfloat16)
    w1 = (0.02 * jax.random.normal(ks[1], (d, f))).astype(jnp.bfloat16)
    w2 = (0.02 * jax.random.normal(ks[2], (f, d))).astype(jnp.bfloat16)
    ours = lambda a, b: jax_tmem.matmul(a, b, out_dtype=jnp.bfloat16, path="kernel")
    lax_mm = lambda a, b: jax.lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=jnp.bfloat16)
    steps = {n: jax.jit(jax.value_and_grad(lambda p, xx, mm=mm: loss_fn(mm, p, xx)))
             for n, mm in (("ours", ours), ("xla", lax_mm))}
    t = timed({n: (lambda p, xx, s=s: s(p, xx)) for n, s in steps.items()}, ((w1, w2), x), args)
    ratio = [t["xla"][i] / t["ours"][i] for i in range(args.rounds)]
    print(f"one-device step: ours {statistics.median(t['ours']) * 1e3:.3f} ms, xla {statistics.median(t['xla']) * 1e3:.3f}"
          f" ms; xla/ours time {statistics.median(ratio):.3f} ({min(ratio):.3f}-{max(ratio):.3f})", flush=True)


if __name__ == "__main__":
    main()
