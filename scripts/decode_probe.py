"""Dev tool (issue 15): where a decode step's time goes. Builds bench_decode.py's step for one model /
dtype / layout / M with weights made on the host (so the process launches no kernel but the step's),
prints the optimized HLO's op mix per layer and the step time (command buffers as XLA_FLAGS says).
  --once ours|xla : run that contender three times and stop, for Nsight Compute, e.g.
  XLA_PYTHON_CLIENT_PREALLOCATE=false ncu --clock-control none --metrics gpu__time_duration.sum --csv \\
      python3 -P scripts/decode_probe.py --once ours > ours.csv
  then `--sum ours.csv`: one execution's kernels (the repeating tail of the kernel list: XLA's autotuning
  launches kernels of its own while compiling), grouped by name.
  --trace : both contenders under jax.profiler (CUPTI), a few executions each: per layer, the kernels in
  launch order with their durations and the idle gap before each, then busy time against the GPU span.
  Set XLA_FLAGS=--xla_gpu_enable_command_buffer= to see every kernel as XLA launches it without graphs.
  --fused : a third contender, our step with the residual adds as the O and down GEMMs' c.
  --variants "NAME=K,N:ENTRY[:SPLITS]/...;..." : more contenders, bench_decode.py's forced plans (e.g. the down
  projection on entry 48 with 2 K splits: "d48=14336,4096:48:-2"); the trace shows their memsets too.
Usage: python3 -P scripts/decode_probe.py [--model 8b] [--dtype bfloat16] [--layout KN] [--m 16] [--layers 4]"""
import argparse
import collections
import csv
import os
import re
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # dispatch_probe (also under python -P)


def summarize(path):
    rows = []
    with open(path) as f:
        lines = [ln for ln in f if ln.startswith('"')]
    for r in csv.DictReader(lines):
        if r.get("Metric Name") == "gpu__time_duration.sum":
            v = float(r["Metric Value"].replace(",", ""))
            unit = r.get("Metric Unit", "nsecond")
            rows.append((r["Kernel Name"], v / 1000 if unit.startswith("n") else v))
    names = [n for n, _ in rows]
    period = next((p for p in range(1, len(rows) // 2 + 1) if names[-p:] == names[-2 * p:-p]), len(rows))
    half = rows[-period:]
    groups = collections.OrderedDict()
    for name, us in half:
        short = re.sub(r"<.*", "", name)[:60]
        g = groups.setdefault(short, [0, 0.0])
        g[0] += 1
        g[1] += us
    total = sum(us for _, us in half)
    print(f"{len(half)} kernels in one execution, {total:.1f} us of kernel time")
    for short, (n, us) in groups.items():
        print(f"  {n:4d} x {short:60s} {us:9.1f} us ({us / n:.2f} each)")


def trace(name, f, x, ws, layers, runs=3):
    """Kernels of `runs` executions of f from a jax.profiler trace: per layer in launch order, with gaps."""
    import glob
    import tempfile
    import jax
    from jax.profiler import ProfileData
    for _ in range(3):
        jax.block_until_ready(f(x, ws))
    d = tempfile.mkdtemp()
    with jax.profiler.trace(d):
        for _ in range(runs):
            jax.block_until_ready(f(x, ws))
    prof = ProfileData.from_file(glob.glob(d + "/**/*.xplane.pb", recursive=True)[0])
    from dispatch_probe import gpu_events  # the kernels of the trace's GPU streams, by start time
    ev = gpu_events(prof)
    if not ev:
        print(f"{name}: no kernel events in the trace")
        return
    # executions are separated by the host's wait: split at the largest gaps
    gaps = sorted(range(1, len(ev)), key=lambda i: ev[i][0] - (ev[i - 1][0] + ev[i - 1][1]))[-(runs - 1):]
    cuts = [0] + sorted(gaps) + [len(ev)]
    execs = [ev[a:b] for a, b in zip(cuts, cuts[1:])]
    last = execs[-1]
    span = (last[-1][0] + last[-1][1] - last[0][0]) / 1e3
    busy = sum(e[1] for e in last) / 1e3
    print(f"== {name}: {len(last)} kernels per execution ({len(last) / layers:.1f} per layer), "
          f"span {span / layers:.1f} us per layer, kernels busy {busy / layers:.1f}, idle {(span - busy) / layers:.1f}")
    per = len(last) // layers
    # the middle layer of the last execution, kernel by kernel
    mid = last[per * (layers // 2): per * (layers // 2 + 1)]
    prev_end = None
    for s0, dur, nm in mid:
        gap = (s0 - prev_end) / 1e3 if prev_end is not None else float("nan")
        print(f"   gap {gap:6.2f} us  kernel {dur / 1e3:7.2f} us  {re.sub(r'<.*', '', nm)[:90]}")
        prev_end = s0 + dur


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="8b")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--layout", default="KN")
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--once", default="")
    ap.add_argument("--trace", action="store_true")
    ap.add_argument("--sum", default="")
    ap.add_argument("--fused", action="store_true", help="also our step with the residual adds as the GEMMs' c")
    ap.add_argument("--variants", default="", help="more contenders with forced plans (bench_decode.py's syntax)")
    args = ap.parse_args()
    if args.sum:
        return summarize(args.sum)
    import jax
    import jax.numpy as jnp
    import numpy as np
    import bench_decode
    import jax_tmem
    from jax_tmem import report
    hidden, shapes = bench_decode.MODELS[args.model]
    rng = np.random.default_rng(0)
    ws = []
    for _ in range(args.layers):
        layer = []
        for k, n in shapes:
            w = (rng.standard_normal((k, n) if args.layout == "KN" else (n, k), np.float32) / np.sqrt(k))
            layer.append(jax.device_put(w.astype(jnp.dtype(args.dtype))))
        ws.append(layer)
    x = jax.device_put(rng.standard_normal((args.m, hidden), np.float32).astype(jnp.bfloat16))
    fns = {
        "ours": bench_decode._step(lambda a, w, dn: jax_tmem.dot_general(a, w, dn, preferred_element_type=jnp.bfloat16),
                                   args.dtype, args.layout, hidden),
        "xla": bench_decode._step(lambda a, w, dn: jax.lax.dot_general(a, w, dn, preferred_element_type=jnp.bfloat16),
                                  args.dtype, args.layout, hidden),
    }
    if args.fused:  # the residual adds as the O and down GEMMs' addend (bench_decode.py --fused)
        fns["fused"] = bench_decode._step(
            lambda a, w, dn: jax_tmem.dot_general(a, w, dn, preferred_element_type=jnp.bfloat16), args.dtype,
            args.layout, hidden,
            residual=lambda a, w, dn, r: jax_tmem.dot_general(a, w, dn, preferred_element_type=jnp.bfloat16, c=r))
    for name, forced in bench_decode.parse_variants(args.variants).items():
        fns[name] = bench_decode._step(bench_decode._forced_dot(forced, args.layout), args.dtype, args.layout, hidden)
    if args.trace:
        for name, f in fns.items():
            trace(name, f, x, ws, args.layers)
        return
    if args.once:
        f = fns[args.once]
        for _ in range(3):
            jax.block_until_ready(f(x, ws))
        return
    for name, f in fns.items():
        hlo = f.lower(x, ws).compile().as_text()
        entry = hlo[hlo.index("ENTRY"):]  # the launched ops (not the fusions' insides)
        ops = report.hlo_ops(entry)
        ts = []
        jax.block_until_ready(f(x, ws))
        for _ in range(20):
            t0 = time.perf_counter()
            jax.block_until_ready(f(x, ws))
            ts.append(time.perf_counter() - t0)
        us = statistics.median(ts) / args.layers * 1e6
        print(f"{name}: {us:.1f} us/layer; ops per layer:",
              {k: round(v / args.layers, 2) for k, v in sorted(ops.items())
               if k not in ("get-tuple-element", "bitcast", "parameter", "tuple")},
              flush=True)


if __name__ == "__main__":
    main()
