"""Decode-step benchmark (issue 15): the layer GEMMs of real models as one jitted chain of distinct
weights, as a serving program runs them, jax_tmem against lax.dot_general (XLA -> cuBLASLt) in the same
run, with bench_gemm.py's method (batches of back-to-back dispatches, contenders interleaved per round,
paired ratios).

Models (per transformer layer, weights stored as Flax does, (K, N), or transposed, (N, K)):
  8b : hidden 4096: QKV 4096 -> 6144, O 4096 -> 4096, gate+up 4096 -> 28672, down 14336 -> 4096
  70b: hidden 8192: QKV 8192 -> 10240, O 8192 -> 8192, gate+up 8192 -> 57344, down 28672 -> 8192
One layer: qkv = x Wqkv; h = x + qkv[:, :hidden] Wo; gu = h Wgu; x = h + (silu(g) * u) Wdown (the attention
itself is left out: this measures the GEMMs a decode step chains). Enough layers per program that the
weights (>= 1.5 GB) never sit in L2. fp8 ("float8_e4m3fn"): e4m3 weights, activations cast to e4m3
before each GEMM, bf16 out. "w8a16": e4m3 weights times the bf16 activations as they are (weight-only fp8:
lax.dot_general widens the weight; jax_tmem's decode kernels read it in place up to 64 tokens).

Prints, per (model, dtype, layout, M): us per layer for both, weight TB/s, % of the copy bandwidth,
XLA / ours (paired median and range); writes DIR/bench_decode.json and DIR/bench_decode.png (time per
layer against M, both contenders, one panel per model / dtype / layout).

Usage: python -P benchmarks/bench_decode.py [--out DIR] [--models 8b,70b] [--ms 1,8,16,32,64,128,256]
       [--dtypes bfloat16,float8_e4m3fn] [--layouts KN,NK] [--rounds 7]
       [--variants "NAME=K,N:ENTRY[:SPLITS]/K,N:ENTRY/K,N:xla;NAME2=..."]
--variants (for deciding the heuristic): more contenders, each our step with the GEMMs of the listed weight
shapes (K, N as in MODELS) forced through a menu entry (and K splits), the rest planned as usual; timed
in the same interleaved rounds, each reported as xla / it.
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

MODELS = {  # name: (hidden, [(K, N) of QKV, O, gate+up, down])
    "8b": (4096, [(4096, 6144), (4096, 4096), (4096, 28672), (14336, 4096)]),
    "70b": (8192, [(8192, 10240), (8192, 8192), (8192, 57344), (28672, 8192)]),
    "tiny": (256, [(256, 384), (256, 256), (256, 1024), (512, 256)]),  # a smoke test of the script
}
MIN_WEIGHT_BYTES = 1.5e9  # per program: layers enough that nothing stays in L2


WEIGHT_ONLY = {"w8a16": "float8_e4m3fn"}  # dtype name -> the weights' dtype (activations stay bf16)


def _weights(model, dtype, layout, seed):
    dtype = WEIGHT_ONLY.get(dtype, dtype)
    hidden, shapes = MODELS[model]
    per_layer = sum(k * n for k, n in shapes) * jnp.dtype(dtype).itemsize
    layers = max(1, int(np.ceil(MIN_WEIGHT_BYTES / per_layer)))
    key = jax.random.key(seed)
    ws = []
    for li in range(layers):
        layer = []
        for gi, (k, n) in enumerate(shapes):
            w = jax.random.normal(jax.random.fold_in(key, 4 * li + gi), (k, n) if layout == "KN" else (n, k),
                                  jnp.float32) / np.sqrt(k)
            layer.append(w.astype(dtype))
        ws.append(layer)
    return ws, per_layer, layers


def _step(dot, dtype, layout, hidden, residual=None):
    """One decode step over every layer with `dot(x, w, dn)`; x (M, hidden) bf16. `residual(x, w, dn, r)`,
    if given, computes r + x w in one call (the residual adds as the GEMM's addend); else r + dot(x, w, dn)."""
    dn = (((1,), (0,)), ((), ())) if layout == "KN" else (((1,), (1,)), ((), ()))
    fp8 = dtype not in WEIGHT_ONLY and jnp.dtype(dtype).itemsize == 1  # activations cast to the weights' fp8

    def mm(x, w):
        return dot(x.astype(dtype) if fp8 else x, w, dn)

    def add_mm(r, x, w):
        return r + mm(x, w) if residual is None else residual(x.astype(dtype) if fp8 else x, w, dn, r)

    def run(x, ws):
        for wqkv, wo, wgu, wdown in ws:
            qkv = mm(x, wqkv)
            h = add_mm(x, qkv[:, :hidden], wo)
            gu = mm(h, wgu)
            g, u = jnp.split(gu, 2, axis=1)
            x = add_mm(h, jax.nn.silu(g) * u, wdown)
        return x
    return jax.jit(run)


def _forced_dot(forced, layout):
    """jax_tmem.dot_general, except for the weights whose (K, N) is in `forced`: that menu entry (and splits), or
    XLA's dot where the entry is "xla"."""
    from jax_tmem.ops import gemm as gemm_op

    def dot(x, w, dn):
        kn = tuple(w.shape) if layout == "KN" else tuple(w.shape[::-1])
        if forced.get(kn) == "xla":
            return jax.lax.dot_general(x, w, dn, preferred_element_type=jnp.bfloat16)
        if kn in forced:
            return gemm_op.gemm(x, w, None, None, dn, jnp.dtype("bfloat16"), gemm_op.Epilogue(), "kernel", True,
                                forced[kn])
        return jax_tmem.dot_general(x, w, dn, preferred_element_type=jnp.bfloat16)
    return dot


def parse_variants(spec):
    """ "a=14336,4096:35:8/4096,6144:14:2;b=4096,4096:xla" -> {"a": {(14336, 4096): (35, 8), (4096, 6144): (14, 2)},
    "b": {(4096, 4096): "xla"}}"""
    out = {}
    for item in filter(None, spec.split(";")):
        name, rest = item.split("=", 1)
        forced = {}
        for one in filter(None, rest.split("/")):
            shape, cfg = one.split(":", 1)
            k, n = (int(v) for v in shape.split(","))
            if cfg == "xla":
                forced[(k, n)] = "xla"
                continue
            c = [int(v) for v in cfg.split(":")]
            forced[(k, n)] = (c[0], c[1]) if len(c) > 1 else c[0]
        out[name] = forced
    return out


def bench(model, dtype, layout, ms, copy_tbps, rounds, variants=None, fused=False):
    hidden, _ = MODELS[model]
    ws, per_layer, layers = _weights(model, dtype, layout, seed=len(model) * 7 + len(dtype) + (layout == 'NK'))
    contenders = {
        "jax_tmem": _step(lambda x, w, dn: jax_tmem.dot_general(x, w, dn, preferred_element_type=jnp.bfloat16),
                          dtype, layout, hidden),
        "xla": _step(lambda x, w, dn: jax.lax.dot_general(x, w, dn, preferred_element_type=jnp.bfloat16),
                     dtype, layout, hidden),
    }
    if fused:  # the residual adds as the GEMM's addend c (jax_tmem.dot_general(..., c=r)): one kernel less per add
        contenders["fused"] = _step(
            lambda x, w, dn: jax_tmem.dot_general(x, w, dn, preferred_element_type=jnp.bfloat16), dtype, layout,
            hidden, residual=lambda x, w, dn, r: jax_tmem.dot_general(x, w, dn, preferred_element_type=jnp.bfloat16,
                                                                        c=r))
    for name, forced in (variants or {}).items():
        contenders[name] = _step(_forced_dot(forced, layout), dtype, layout, hidden)
    extra = [k for k in contenders if k not in ("jax_tmem", "xla")]  # reported as xla / it
    rows = []
    for m in ms:
        x = jax.random.normal(jax.random.key(m), (m, hidden), jnp.float32).astype(jnp.bfloat16)
        times = bench_gemm.interleaved(contenders, (x, ws), rounds=rounds)
        res = dict(model=model, dtype=dtype, layout=layout, m=m, layers=layers, weight_bytes_per_layer=per_layer)
        for key, ts in times.items():
            us = statistics.median(ts) / layers * 1e6
            res[f"{key}_us_per_layer"] = us
            res[f"{key}_tbps"] = per_layer / (us * 1e-6) / 1e12
            res[f"{key}_pct_copy"] = 100 * res[f"{key}_tbps"] / copy_tbps
        paired = [times["xla"][i] / times["jax_tmem"][i] for i in range(rounds)]
        res["xla_over_ours"] = [statistics.median(paired), min(paired), max(paired)]
        rows.append(res)
        print(f"{model:>3} {dtype:>13} {layout} M={m:<4} ours {res['jax_tmem_us_per_layer']:8.1f} us/layer "
              f"({res['jax_tmem_tbps']:.2f} TB/s, {res['jax_tmem_pct_copy']:.0f} % copy)  xla "
              f"{res['xla_us_per_layer']:8.1f} ({res['xla_pct_copy']:.0f} %)  xla/ours {res['xla_over_ours'][0]:.2f} "
              f"({res['xla_over_ours'][1]:.2f}-{res['xla_over_ours'][2]:.2f})", flush=True)
        for name in extra:
            paired = sorted(times["xla"][i] / times[name][i] for i in range(rounds))
            res[f"xla_over_{name}"] = [statistics.median(paired), paired[0], paired[-1]]
            print(f"      variant {name:>12}: {res[name + '_us_per_layer']:8.1f} us/layer  xla/it "
                  f"{res['xla_over_' + name][0]:.3f} ({paired[0]:.3f}-{paired[-1]:.3f})", flush=True)
    del ws
    return rows


def plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no PNG")
        return
    panels = sorted({(r["model"], r["dtype"], r["layout"]) for r in rows})
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
    for ax, key in zip(axes[0], panels):
        sel = [r for r in rows if (r["model"], r["dtype"], r["layout"]) == key]
        for name, style in (("jax_tmem", "o-"), ("xla", "s--")):
            ax.plot([r["m"] for r in sel], [r[f"{name}_us_per_layer"] for r in sel], style, label=name)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("M (tokens)")
        ax.set_ylabel("us per layer")
        ax.set_title(f"{key[0]} {key[1].replace('float8_', '')} W{key[2]}", fontsize=9)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    global MIN_WEIGHT_BYTES
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--models", default="8b,70b")
    ap.add_argument("--ms", default="1,8,16,32,64,128,256")
    ap.add_argument("--dtypes", default="bfloat16,float8_e4m3fn")
    ap.add_argument("--layouts", default="KN,NK")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--min-weight-mb", type=float, default=MIN_WEIGHT_BYTES / 1e6,
                    help="layers per program: enough for this many MB of weights")
    ap.add_argument("--variants", default="", help="more contenders with GEMMs forced through menu entries (see above)")
    ap.add_argument("--fused", action="store_true", help="also our step with the residual adds fused into the O and "
                    "down GEMMs (dot_general's c): as a serving program written for jax_tmem would run it")
    args = ap.parse_args()
    variants = parse_variants(args.variants)
    MIN_WEIGHT_BYTES = args.min_weight_mb * 1e6
    csv = bench_gemm.csv
    copy_tbps = bench_gemm.announce_copy_bandwidth()
    rows = []
    for model in csv(args.models):
        for dtype in csv(args.dtypes):
            for layout in csv(args.layouts):
                rows += bench(model, dtype, layout, [int(m) for m in csv(args.ms)], copy_tbps, args.rounds, variants,
                              args.fused)
    bench_gemm.save_rows(args.out, "bench_decode", copy_tbps, rows)
    plot(rows, os.path.join(args.out, "bench_decode.png"))
    from jax_tmem._core import ext
    rs = ext.record_status()
    if rs.get("wanted"):  # JAX_TMEM_FFI_RECORD=1: how our calls reached XLA's command buffers
        print("record stage:", {k: rs.get(k) for k in ("created", "updated", "captured", "failed", "update_us",
                                                        "update_xla_us", "registered", "register_error", "last_reason")})


if __name__ == "__main__":
    main()
