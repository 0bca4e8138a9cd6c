"""Decode with 4-bit weights (issue 14): a chain of distinct square weights (hidden 4096 or 8192) in one
jitted program, x (M, hidden) bf16 times MXFP4 / NVFP4 weights (N, K) through
``jax_tmem.scaled_matmul(x, wq, None, ws)`` (the weight-only 4-bit kernel), against the same weights
dequantized by XLA (path="xla") and the bf16 chain (jax_tmem.matmul and lax.dot_general), interleaved
(bench_gemm.py's method). Prints us per layer, TB/s of the packed bytes read (data + scales) and % of
the copy bandwidth, and ratios; writes DIR/bench_w4.json.

Usage: python -P benchmarks/bench_w4.py [--out DIR] [--hidden 4096,8192] [--ms 1,16,64] [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_gemm  # noqa: E402

import jax_tmem  # noqa: E402

MIN_BYTES = 4e8  # 4-bit bytes per program: far beyond the 50 MB L2


def chain(step):
    def run(x, ws):
        for w in ws:
            x = step(x, w)
        return x
    return jax.jit(run)


def bench(hidden, fmt, ms, copy_tbps, rounds, seed, configs=()):
    gs = 0.5 if fmt == "nvfp4" else None
    layer_bytes = hidden * hidden // 2 + hidden * hidden // (16 if fmt == "nvfp4" else 32)
    layers = max(4, int(np.ceil(MIN_BYTES / layer_bytes)))
    key = jax.random.key(seed)
    q, bf = [], []
    for i in range(layers):
        w = jax.random.normal(jax.random.fold_in(key, i), (1, hidden, hidden), jnp.float32) / np.sqrt(hidden)
        wq, ws = jax_tmem.quantize(w, fmt, global_scale=gs)
        q.append((wq, ws))
        bf.append(w[0].T.astype(jnp.bfloat16))  # (K, N) bf16, as Flax stores it
        del w
    contenders = {
        "w4_kernel": (chain(lambda x, w: jax_tmem.scaled_matmul(x, w[0], None, w[1], jnp.bfloat16, rhs_global_scale=gs,
                                                                 path="kernel")), q),
        "w4_xla": (chain(lambda x, w: jax_tmem.scaled_matmul(x, w[0], None, w[1], jnp.bfloat16, rhs_global_scale=gs,
                                                              path="xla")), q),
        "bf16_ours": (chain(lambda x, w: jax_tmem.matmul(x, w, out_dtype=jnp.bfloat16)), bf),
        "bf16_xla": (chain(lambda x, w: jnp.dot(x, w, preferred_element_type=jnp.bfloat16)), bf),
    }
    from jax_tmem.ops import scaled_gemm
    block = 16 if fmt == "nvfp4" else 32
    for c in configs:  # the kernel's private configurations (cpp/src/w4_gemm.cu), side by side
        contenders[f"w4_config{c}"] = (chain(lambda x, w, c=c: scaled_gemm.scaled_matmul_ffi(
            x, w[0], None, w[1], jnp.bfloat16, block, config=c, global_scale=gs)), q)
    rows = []
    for m in ms:
        x3 = jax.random.normal(jax.random.key(m), (1, m, hidden), jnp.float32).astype(jnp.bfloat16)
        fns = {name: (lambda f=f, ws=ws, x=(x3 if name.startswith("w4") else x3[0]): f(x, ws))
               for name, (f, ws) in contenders.items()}
        times = bench_gemm.interleaved({n: (lambda f=f: f()) for n, f in fns.items()}, (), rounds=rounds)
        res = dict(hidden=hidden, fmt=fmt, m=m, layers=layers, packed_bytes_per_layer=layer_bytes)
        for name, ts in times.items():
            us = statistics.median(ts) / layers * 1e6
            res[f"{name}_us"] = us
        res["w4_tbps"] = layer_bytes / (res["w4_kernel_us"] * 1e-6) / 1e12
        res["w4_pct_copy"] = 100 * res["w4_tbps"] / copy_tbps
        pair = lambda a, b: statistics.median([times[a][i] / times[b][i] for i in range(rounds)])
        res["bf16_ours_over_w4"] = pair("bf16_ours", "w4_kernel")
        res["bf16_xla_over_w4"] = pair("bf16_xla", "w4_kernel")
        res["w4_xla_over_w4"] = pair("w4_xla", "w4_kernel")
        rows.append(res)
        print(f"{fmt:>5} {hidden}^2 M={m:<3} w4 kernel {res['w4_kernel_us']:7.2f} us/layer ({res['w4_tbps']:.2f} TB/s packed, "
              f"{res['w4_pct_copy']:.0f} % copy) | w4 via XLA {res['w4_xla_us']:7.2f} | bf16 ours {res['bf16_ours_us']:7.2f} "
              f"xla {res['bf16_xla_us']:7.2f} | bf16 ours / w4 {res['bf16_ours_over_w4']:.2f}, bf16 xla / w4 "
              f"{res['bf16_xla_over_w4']:.2f}, w4 xla / w4 {res['w4_xla_over_w4']:.2f}", flush=True)
        if configs:
            print("      configs (us/layer): " + ", ".join(f"{c}: {res[f'w4_config{c}_us']:.2f}" for c in configs), flush=True)
    return rows


def main():
    global MIN_BYTES
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--hidden", default="4096,8192")
    ap.add_argument("--fmts", default="mxfp4,nvfp4")
    ap.add_argument("--ms", default="1,16,64")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--min-mb", type=float, default=MIN_BYTES / 1e6)
    ap.add_argument("--configs", default="", help="the weight-only kernel's private configurations to time too")
    args = ap.parse_args()
    MIN_BYTES = args.min_mb * 1e6
    csv = bench_gemm.csv
    copy_tbps = bench_gemm.announce_copy_bandwidth()
    rows = []
    for hidden in [int(h) for h in csv(args.hidden)]:
        for fmt in csv(args.fmts):
            rows += bench(hidden, fmt, [int(m) for m in csv(args.ms)], copy_tbps, args.rounds, seed=hidden + len(fmt),
                          configs=[int(c) for c in csv(args.configs)])
    bench_gemm.save_rows(args.out, "bench_w4", copy_tbps, rows)


if __name__ == "__main__":
    main()
