"""Benchmark jax_tmem against the peers in one run: jnp.dot (XLA -> cuBLASLt) and, where the installed
jax ships it, Pallas Mosaic GPU's Hopper matmul (best of a small config sweep).

Each timing: one jitted program runs R independent GEMMs on distinct operands (so one dispatch covers
R kernels and no operand stays in L2). It is dispatched CALLS times back to back before one wait, so
the host's dispatch and the wait overlap the GPU's work as in a training or serving loop (timing one
blocking call at a time added ~40-60 us per decode GEMM for every contender: 2026-11-21, see
scripts/overhead_probe.py); the per-GEMM time is the median over ROUNDS such batches / (CALLS x R).
The contenders are interleaved: each round times every one of them once, in a rotated order, and the
paired ratio (best peer's time / ours, per round) is reported with its range.
Inputs are random normal (never zeros: power-limited clocks depend on the data). Also measures the
HBM copy bandwidth in the same run, for the memory-bound (decode) shapes.

Usage: python -P benchmarks/bench_gemm.py [--out DIR] [--quick]
Writes DIR/bench.json (every number) and DIR/bench.png (TFLOP/s by shape, ours against the peers).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import jax_tmem

SHAPES = [  # (M, N, K, dtype)
    (8192, 8192, 8192, "bfloat16"),
    (4096, 4096, 4096, "bfloat16"),
    (4096, 8192, 4096, "bfloat16"),
    (2048, 2048, 2048, "bfloat16"),
    (8192, 8192, 8192, "float8_e4m3fn"),
    (4096, 4096, 4096, "float8_e4m3fn"),
    (128, 8192, 8192, "bfloat16"),
    (64, 8192, 8192, "bfloat16"),
    (16, 8192, 8192, "bfloat16"),
    (1, 8192, 8192, "bfloat16"),
    (128, 8192, 8192, "float8_e4m3fn"),
    (16, 8192, 8192, "float8_e4m3fn"),
    # fp8 weights stored K-major, (N, K), contracted on their last dim: wgmma (and cuBLASLt fp8) read
    # them in place, so neither side transposes (the layout an fp8 weight should be produced in).
    (128, 8192, 8192, "float8_e4m3fn", "NK"),
    (16, 8192, 8192, "float8_e4m3fn", "NK"),
]


CALLS = 4  # back-to-back dispatches per timed batch (at least)
MIN_BATCH_S = 0.05  # ... and enough of them for the batch to last this long (interleaved())
MAX_CALLS = 256


def timed_batch(fn, args, calls=CALLS):
    """Seconds per call of `calls` asynchronous dispatches of fn followed by one wait."""
    t0 = time.perf_counter()
    out = None
    for _ in range(calls):
        out = fn(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - t0) / calls


def _time(fn, args, reps=5):
    jax.block_until_ready(fn(*args))  # compile + warm up
    jax.block_until_ready(fn(*args))
    return statistics.median(timed_batch(fn, args) for _ in range(reps))


ROUNDS = 7  # interleaved rounds per shape


def interleaved(fns, args, rounds=ROUNDS):
    """{name: [seconds per call, one per round]}: every round times each contender once (one timed_batch),
    in an order rotated per round, so clock drift under the power limit (up to ~7 % between minutes on
    the lent H200) hits every contender alike instead of whichever happened to run last."""
    for f in fns.values():  # compile + warm up
        jax.block_until_ready(f(*args))
        jax.block_until_ready(f(*args))
    # A batch must run long enough that its fixed cost (the first dispatch reaching the GPU, the final
    # wait: ~0.1-0.3 ms) is noise: for short programs (decode) time more calls per batch, the same
    # number for every contender. Without this, 16 x 8192 x 8192 fp8 read as 65-79 % of the copy
    # bandwidth while Nsight Compute timed the kernels at 19.5 us (2026-11-21, docs/PERF.md).
    est = min(timed_batch(f, args) for f in fns.values())
    calls = int(min(MAX_CALLS, max(CALLS, -(-MIN_BATCH_S // est))))
    names = list(fns)
    times = {k: [] for k in names}
    for i in range(rounds):
        for name in names[i % len(names):] + names[:i % len(names)]:
            times[name].append(timed_batch(fns[name], args, calls))
    return times


def _operands(m, n, k, dtype, r, seed=0, b_layout="KN"):
    key = jax.random.key(seed)
    ka, kb = jax.random.split(key)
    b_shape = (k, n) if b_layout == "KN" else (n, k)
    a = [jax.random.normal(jax.random.fold_in(ka, i), (m, k), jnp.float32).astype(dtype) for i in range(r)]
    b = [jax.random.normal(jax.random.fold_in(kb, i), b_shape, jnp.float32).astype(dtype) for i in range(r)]
    return a, b


def _dims(b_layout):
    """dot_general dimension numbers for a (M, K) times b stored (K, N) ("KN") or (N, K) ("NK")."""
    return (((1,), (0,)), ((), ())) if b_layout == "KN" else (((1,), (1,)), ((), ()))


def csv(s: str) -> list:
    """The non-empty items of a comma-separated command-line value."""
    return [v for v in s.split(",") if v]


def announce_copy_bandwidth() -> float:
    """Measures the copy bandwidth (TB/s) and prints it with the device: the first line of a decode benchmark."""
    tbps = copy_bandwidth()
    print(f"device {jax.devices()[0].device_kind}, copy bandwidth {tbps:.2f} TB/s", flush=True)
    return tbps


def save_rows(out_dir: str, name: str, copy_tbps: float, rows: list) -> None:
    """OUT_DIR/NAME.json: the device, jax version, copy bandwidth and the benchmark's rows."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
        json.dump({"device": str(jax.devices()[0].device_kind), "jax": jax.__version__, "copy_tbps": copy_tbps,
                   "rows": rows}, f, indent=1)


def copy_bandwidth(nbytes=1 << 30, r=4):
    """Device copy bandwidth (bytes read + written per second), R distinct 1 GiB arrays per call."""
    xs = [jnp.full((nbytes // 2,), i + 1, jnp.bfloat16) for i in range(r)]
    f = jax.jit(lambda xs: [x * 3 for x in xs])
    t = _time(f, (xs,)) / r
    return 2 * nbytes / t / 1e12


def pallas_candidates():
    """Returns a callable (a, b) -> out for each Pallas Hopper config, or [] if unavailable."""
    try:
        from jax.experimental.pallas.ops.gpu import hopper_matmul_mgpu as hm
    except Exception as e:  # pragma: no cover
        return [], f"not importable: {e}"
    cfgs = []
    try:
        TC = hm.TuningConfig
        fields = set(TC.__dataclass_fields__)
        dims = hm.MatmulDimension
        for tm, tn, steps, cluster in ((128, 256, 4, None), (128, 128, 4, None), (128, 256, 4, dims.M),
                                       (256, 128, 4, dims.N), (128, 256, 3, dims.N), (256, 256, 3, None)):
            kw = dict(tile_m=tm, tile_n=tn, tile_k=64, max_concurrent_steps=steps, epi_tile_n=64, epi_tile_m=64,
                      grid_minor_dim=dims.N, grid_tile_width=8, wg_dimension=dims.N, cluster_dimension=cluster)
            kw = {k: v for k, v in kw.items() if k in fields}
            cfgs.append((str(kw), lambda a, b, c=TC(**kw): hm.matmul(a, b, None, c)))
    except Exception as e:  # pragma: no cover
        return [], f"config error: {e}"
    return cfgs, ""


def bench_shape(m, n, k, dtype, pallas, configs=(), b_layout="KN"):
    dt = jnp.dtype(dtype)
    bytes_b = k * n * dt.itemsize
    r = int(max(2, min(16, (2 << 30) // max(bytes_b, 1))))
    a, b = _operands(m, n, k, dt, r, b_layout=b_layout)
    flops = 2.0 * m * n * k
    floor_bytes = (m * k + k * n) * dt.itemsize + m * n * 2
    res = dict(m=m, n=n, k=k, dtype=dtype, b_layout=b_layout, reps=r, flops=flops, bytes=floor_bytes)
    bdn = _dims(b_layout)
    out_dt = jnp.bfloat16

    def many(f):
        return jax.jit(lambda aa, bb: [f(x, y) for x, y in zip(aa, bb)])

    contenders = {
        "jax_tmem": many(lambda x, y: jax_tmem.dot_general(x, y, bdn, preferred_element_type=out_dt, path="kernel")),
        "xla": many(lambda x, y: jax.lax.dot_general(x, y, bdn, preferred_element_type=out_dt)),
    }
    if dtype == "bfloat16" and pallas and m >= 128 and b_layout == "KN":
        # Pick Pallas's best config for this shape first (a short timing each), then time it with the others.
        best = None
        for name, pf in pallas:
            try:
                tp = _time(many(pf), (a, b), reps=2)
            except Exception as e:  # configs that do not fit this shape
                res.setdefault("pallas_errors", []).append(f"{name}: {type(e).__name__}: {str(e)[:300]}")
                continue
            if best is None or tp < best[1]:
                best = (name, tp, pf)
        if best:
            res["pallas_config"] = best[0]
            contenders["pallas"] = many(best[2])
        elif res.get("pallas_errors"):
            print("  pallas failed:", res["pallas_errors"][0], flush=True)
    if configs and m >= 2048:
        # The menu entries side by side (jax_tmem/menu.h; benchmarks/sweep_configs.py pairs them per round).
        from jax_tmem.ops import gemm as gemm_op
        for cfg in configs:
            contenders[f"cfg{cfg}"] = many(lambda x, y, cfg=cfg: gemm_op.gemm(
                x, y, None, None, bdn, jnp.dtype(out_dt), gemm_op.Epilogue(), "kernel", True, cfg))
    times = interleaved(contenders, (a, b))
    for key, ts in times.items():
        res[f"{key}_s"] = statistics.median(ts) / r
    for key in contenders:
        if key.startswith("cfg"):
            res[f"{key}_tflops"] = flops / res.pop(f"{key}_s") / 1e12
    # Paired ratios: in each round, the best peer's time over ours (> 1: we are faster); median and range.
    peers = [p for p in ("xla", "pallas") if p in times]
    paired = [min(times[p][i] for p in peers) / times["jax_tmem"][i] for i in range(ROUNDS)]
    res["paired_ratio_vs_best_peer"] = [statistics.median(paired), min(paired), max(paired)]
    # correctness spot check against XLA (same inputs)
    o1 = np.asarray(jax.jit(lambda x, y: jax_tmem.dot_general(x, y, bdn, preferred_element_type=jnp.float32,
                                                              path="kernel"))(a[0], b[0]))
    o2 = np.asarray(jax.jit(lambda x, y: jax.lax.dot_general(x, y, bdn, preferred_element_type=jnp.float32))(a[0], b[0]))
    res["max_rel_diff_vs_xla"] = float(np.abs(o1 - o2).max() / max(np.abs(o2).max(), 1e-30))
    for key in ("jax_tmem", "xla", "pallas"):
        if f"{key}_s" in res:
            res[f"{key}_tflops"] = flops / res[f"{key}_s"] / 1e12
            res[f"{key}_tbps"] = floor_bytes / res[f"{key}_s"] / 1e12
    peers = [res[f"{p}_tflops"] for p in ("xla", "pallas") if f"{p}_tflops" in res]
    res["ratio_vs_best_peer"] = res["jax_tmem_tflops"] / max(peers)
    res["ratio_vs_xla"] = res["jax_tmem_tflops"] / res["xla_tflops"]
    return res


def plot(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = [f"{r['m']}x{r['n']}x{r['k']}\n{r['dtype'].replace('float8_', '')} B {r.get('b_layout', 'KN')}"
              for r in results]
    x = np.arange(len(results))
    fig, ax = plt.subplots(figsize=(max(8, 1.1 * len(results)), 5))
    for i, (key, name) in enumerate((("jax_tmem", "jax_tmem"), ("xla", "jnp.dot (cuBLASLt)"), ("pallas", "Pallas MGPU"))):
        vals = [r.get(f"{key}_tflops", 0) for r in results]
        ax.bar(x + (i - 1) * 0.27, vals, 0.27, label=name)
    ax.set_xticks(x, labels, fontsize=7)
    ax.set_ylabel("TFLOP/s")
    ax.set_yscale("log")
    ax.legend()
    ax.set_title(f"{jax.devices()[0].device_kind}, jax {jax.__version__}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--shapes", default="", help="comma-separated indices into SHAPES (default: all; --quick: 0,1)")
    ap.add_argument("--configs", default="", help="comma-separated kernel configs to time side by side (e.g. 1,3)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    pallas, why = pallas_candidates()
    info = dict(device=jax.devices()[0].device_kind, jax=jax.__version__, date=time.strftime("%Y-%m-%d %H:%M"),
                pallas=why or f"{len(pallas)} configs", copy_tbps=copy_bandwidth())
    print(json.dumps(info), flush=True)
    results = []
    shapes = SHAPES[:2] if args.quick else SHAPES
    if args.shapes:
        shapes = [SHAPES[int(i)] for i in args.shapes.split(",")]
    for m, n, k, dt, *lay in shapes:
        b_layout = lay[0] if lay else "KN"
        try:
            r = bench_shape(m, n, k, dt, pallas, [int(c) for c in args.configs.split(",") if c], b_layout)
        except Exception as e:
            r = dict(m=m, n=n, k=k, dtype=dt, b_layout=b_layout, error=f"{type(e).__name__}: {e}"[:500])
        if "jax_tmem_tflops" in r:
            pr = r["paired_ratio_vs_best_peer"]
            r["pct_copy_bw"] = 100 * r["jax_tmem_tbps"] / info["copy_tbps"]
            print(f"{m}x{n}x{k} {dt} B {b_layout}: jax_tmem {r['jax_tmem_tflops']:.1f} TF ({r['jax_tmem_tbps']:.2f} TB/s) | "
                  f"xla {r['xla_tflops']:.1f} | pallas {r.get('pallas_tflops', float('nan')):.1f} | "
                  f"ratio vs best peer {r['ratio_vs_best_peer']:.3f} (paired {pr[0]:.3f}, {pr[1]:.3f}..{pr[2]:.3f}) | diff {r['max_rel_diff_vs_xla']:.1e}"
                  + "".join(f" | {k[:-7]} {v:.1f}" for k, v in r.items() if k.startswith("cfg")), flush=True)
        else:
            print(f"{m}x{n}x{k} {dt} B {b_layout}: {r.get('error')}", flush=True)
        results.append(r)
    with open(os.path.join(args.out, "bench.json"), "w") as f:
        json.dump(dict(info=info, results=results), f, indent=1)
    try:
        plot([r for r in results if "jax_tmem_tflops" in r], os.path.join(args.out, "bench.png"))
    except Exception as e:
        print("plot failed:", e)


if __name__ == "__main__":
    main()
