"""Dev tool: steady-state SM clock and board power of each GEMM variant (is the kernel power-limited?).

For each variant (menu configs, "auto" = the public API's heuristic, "xla" = jnp.dot) the same jitted
program of R distinct GEMMs is dispatched back to back for --seconds while nvidia-smi samples the SM
clock, power draw and throttle reasons every 100 ms; variants are interleaved over --rounds rounds
(A B C A B C ...) so that drift (temperature, neighbours) hits each alike. Prints, per variant, the
median TFLOP/s, SM clock (MHz), power (W) and TFLOP/s per GHz (work per clock: if two variants sit at
the power limit, the one with more TFLOP/s per GHz wastes fewer cycles; the one with the higher clock
spends less energy per FLOP).

Usage: python3 -P scripts/power_probe.py 8 10 xla [--shape 8192,8192,8192,bfloat16] [--seconds 4] [--out F]
"""
import argparse
import json
import statistics
import subprocess
import time

import jax
import jax.numpy as jnp

from jax_tmem.ops import gemm as gemm_op

ap = argparse.ArgumentParser()
ap.add_argument("variants", nargs="+", help="menu configs (e.g. 8, 11:2), 'auto' and/or 'xla'")
ap.add_argument("--shape", default="8192,8192,8192,bfloat16", help="M,N,K,dtype[,NK]")
ap.add_argument("--seconds", type=float, default=4.0)
ap.add_argument("--rounds", type=int, default=2)
ap.add_argument("--out", default="")
args = ap.parse_args()

m, n, k, dtype, *lay = args.shape.split(",")
m, n, k = int(m), int(n), int(k)
nk = lay == ["NK"]
dt = jnp.dtype(dtype)
r = int(max(2, min(8, (1 << 30) // (k * n * dt.itemsize))))
key = jax.random.key(int(time.time()))
a = [jax.random.normal(jax.random.fold_in(key, i), (m, k), jnp.float32).astype(dt) for i in range(r)]
b = [jax.random.normal(jax.random.fold_in(key, 100 + i), (n, k) if nk else (k, n), jnp.float32).astype(dt)
     for i in range(r)]
dn = (((1,), (1 if nk else 0,)), ((), ()))
many = lambda f: jax.jit(lambda aa, bb: [f(x, y) for x, y in zip(aa, bb)])
fns = {}
for v in args.variants:
    if v == "xla":
        fns[v] = many(lambda x, y: jax.lax.dot_general(x, y, dn, preferred_element_type=jnp.bfloat16))
    elif v == "auto":
        import jax_tmem
        fns[v] = many(lambda x, y: jax_tmem.dot_general(x, y, dn, preferred_element_type=jnp.bfloat16, path="kernel"))
    else:
        c = tuple(int(s) for s in v.split(":")) if ":" in v else int(v)
        fns[f"cfg{v}"] = many(lambda x, y, c=c: gemm_op.gemm(x, y, None, None, dn, jnp.dtype("bfloat16"),
                                                          gemm_op.Epilogue(), "kernel", True, c))
for f in fns.values():
    jax.block_until_ready(f(a, b))


def run_for(f, seconds):
    """Back-to-back dispatches for `seconds` (8 in flight at most); returns (calls, elapsed)."""
    t0 = time.perf_counter()
    calls, pending = 0, []
    while time.perf_counter() - t0 < seconds:
        pending.append(f(a, b))
        calls += 1
        if len(pending) > 8:
            jax.block_until_ready(pending.pop(0))
    jax.block_until_ready(pending)
    return calls, time.perf_counter() - t0


def sample(f, seconds):
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active",
                            "--format=csv,noheader,nounits", "-lms", "100"], stdout=subprocess.PIPE, text=True)
    run_for(f, 1.0)  # settle
    calls, el = run_for(f, seconds)
    smi.terminate()
    out = smi.communicate()[0]
    rows = [ln.split(",") for ln in out.strip().splitlines() if ln.count(",") == 3]
    n_skip = max(0, len(rows) // 4)  # drop the settling second
    rows = rows[n_skip:]
    clk = statistics.median(float(x[0]) for x in rows) if rows else float("nan")
    pw = statistics.median(float(x[1]) for x in rows) if rows else float("nan")
    reasons = sorted({x[3].strip() for x in rows})
    return dict(tflops=2.0 * m * n * k * r * calls / el / 1e12, clock_mhz=clk, power_w=pw, throttle=reasons)


res = {name: [] for name in fns}
for i in range(args.rounds):
    names = list(fns)
    order = names[i % len(names):] + names[:i % len(names)]
    for name in order:
        res[name].append(sample(fns[name], args.seconds))
summary = {}
for name, runs in res.items():
    tf = statistics.median(x["tflops"] for x in runs)
    clk = statistics.median(x["clock_mhz"] for x in runs)
    pw = statistics.median(x["power_w"] for x in runs)
    summary[name] = dict(tflops=tf, clock_mhz=clk, power_w=pw, tflops_per_ghz=tf / (clk / 1000),
                         throttle=sorted({t for x in runs for t in x["throttle"]}), runs=runs)
    print(f"{args.shape} {name}: {tf:.0f} TFLOP/s at {clk:.0f} MHz, {pw:.0f} W, {tf / (clk / 1000):.0f} TFLOP/s per GHz,"
          f" throttle {summary[name]['throttle']}", flush=True)
if args.out:
    with open(args.out, "w") as fh:
        json.dump(dict(shape=args.shape, date=time.strftime("%Y-%m-%d %H:%M"), results=summary), fh, indent=1)
