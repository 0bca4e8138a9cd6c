"""Kernel-menu sweep with paired, interleaved timing (decides the sm_90a heuristic).

The lent H200 drifts by up to ~7 % between minutes (clocks under the 700 W limit), so timing config A
for a minute and then config B compares the machine with itself. Here every round times each variant
once (jnp.dot first, then each config, in an order rotated per round) on the same operands, and the
report is, per config, the median over rounds of (config time / jnp.dot time in the same round) with
its min..max, next to the median TFLOP/s. A config beats another only if the ranges separate.

Usage: python -P benchmarks/sweep_configs.py --configs 1,6,8 [--shapes 0,1,2,4] [--rounds 7] [--out DIR]
       [--shape-list "16,8192,8192,bfloat16,NK;..."]
(shape indices into bench_gemm.SHAPES, plus any listed shapes; NK = the b operand stored (N, K))."""
import argparse
import json
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_gemm  # noqa: E402  (same operands and shape list as the main benchmark)
from jax_tmem.ops import gemm as gemm_op  # noqa: E402


def _parse(c: str):
    """ "8" -> menu entry 8; "11:2" -> entry 11 with 2 K splits (split-K / swap-AB entries)."""
    if ":" in c:
        e, s = c.split(":")
        return (int(e), int(s))
    return int(c)


def sweep_shape(m, n, k, dtype, configs, rounds, b_layout="KN"):
    dt = jnp.dtype(dtype)
    r = int(max(2, min(16, (2 << 30) // max(k * n * dt.itemsize, 1))))
    a, b = bench_gemm._operands(m, n, k, dt, r, b_layout=b_layout)
    dn = bench_gemm._dims(b_layout)
    many = lambda f: jax.jit(lambda aa, bb: [f(x, y) for x, y in zip(aa, bb)])
    variants = {"xla": many(lambda x, y: jax.lax.dot_general(x, y, dn, preferred_element_type=jnp.bfloat16))}
    for c in configs:
        variants[f"cfg{c}"] = many(lambda x, y, c=_parse(c): gemm_op.gemm(x, y, None, None, dn, jnp.dtype("bfloat16"),
                                                                      gemm_op.Epilogue(), "kernel", True, c))
    names = list(variants)
    times = bench_gemm.interleaved(variants, (a, b), rounds)  # rotated order per round, same operands
    times = {k_: [t / r for t in ts] for k_, ts in times.items()}
    flops = 2.0 * m * n * k
    res = dict(m=m, n=n, k=k, dtype=dtype, b_layout=b_layout, reps=r, rounds=rounds)
    for name in names:
        res[f"{name}_tflops"] = flops / statistics.median(times[name]) / 1e12
        if name != "xla":
            ratios = [times["xla"][i] / times[name][i] for i in range(rounds)]  # > 1: faster than jnp.dot
            res[f"{name}_vs_xla"] = [statistics.median(ratios), min(ratios), max(ratios)]
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", required=True, help='comma-separated menu entries, e.g. 1,6,8; "11:2" = entry 11 '
                    'with 2 K splits')
    ap.add_argument("--shapes", default="0,1,2,4", help="indices into bench_gemm.SHAPES")
    ap.add_argument("--shape-list", default="", help='extra shapes "M,N,K,dtype[,NK];..." (NK: b stored (N, K))')
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    configs = [c for c in args.configs.split(",") if c]
    info = dict(device=jax.devices()[0].device_kind, jax=jax.__version__, date=time.strftime("%Y-%m-%d %H:%M"),
                rounds=args.rounds)
    print(json.dumps(info), flush=True)
    results = []
    shapes = [bench_gemm.SHAPES[int(i)] for i in args.shapes.split(",") if i]
    for spec in args.shape_list.split(";"):
        if spec:
            m, n, k, dt, *lay = spec.split(",")
            shapes.append((int(m), int(n), int(k), dt, *lay))
    for m, n, k, dt, *lay in shapes:
        try:
            r = sweep_shape(m, n, k, dt, configs, args.rounds, lay[0] if lay else "KN")
        except Exception as e:
            r = dict(m=m, n=n, k=k, dtype=dt, error=f"{type(e).__name__}: {e}"[:500])
            print(f"{m}x{n}x{k} {dt}: {r['error']}", flush=True)
        else:
            line = f"{m}x{n}x{k} {dt} B {r['b_layout']}: xla {r['xla_tflops']:.0f}"
            for c in configs:
                med, lo, hi = r[f"cfg{c}_vs_xla"]
                line += f" | cfg{c} {r[f'cfg{c}_tflops']:.0f} ({med:.3f} x xla, {lo:.3f}..{hi:.3f})"
            print(line, flush=True)
        results.append(r)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "sweep.json"), "w") as f:
        json.dump(dict(info=info, results=results), f, indent=1)


if __name__ == "__main__":
    main()
