"""Dev tool: what a jitted program of our custom calls costs per execution beyond its kernels.

For each program (a decode chain of bench_decode.py's step, ours against lax.dot_general; a chain of 16
4096^2 quantizes against XLA's x * 3 of the same inputs) prints, from back-to-back executions as the
benchmarks dispatch them:
  wall : time per execution (CALLS executions, one wait at the end),
  host : time for the dispatch call to return, per execution (the host's share: XLA's thunks, command
         buffer updates, our handler when it runs or is traced),
  gpu  : from a jax.profiler (CUPTI) trace of TRACED back-to-back executions: kernel time per execution,
         its span on the GPU, and the idle time between one execution's last kernel and the next one's
         first,
  top host events of that trace by total time (what the host does per execution).
Run it under different XLA_FLAGS (command buffers on, off, custom calls outside them) in separate processes.

Usage: python3 -P scripts/dispatch_probe.py [--programs decode,small,quantize] [--m 1] [--layers 8] [--donate]
       [--kernels] (each kernel of one execution, in order: median duration and the gap before it)
"""
import argparse
import collections
import glob
import os
import re
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jax_tmem  # noqa: E402


def programs(args):
    out = {}
    if "decode" in args.programs:
        import bench_decode
        hidden, shapes = bench_decode.MODELS[args.model]
        rng = np.random.default_rng(0)
        ws = [[jax.device_put((rng.standard_normal((n, k) if args.layout == "NK" else (k, n), np.float32)
                               / np.sqrt(k)).astype(args.dtype))
               for k, n in shapes] for _ in range(args.layers)]
        x = jax.device_put(rng.standard_normal((args.m, hidden), np.float32).astype(jnp.bfloat16))
        for name, dot in (("decode ours", lambda a, w, dn: jax_tmem.dot_general(a, w, dn, preferred_element_type=jnp.bfloat16)),
                          ("decode xla", lambda a, w, dn: jax.lax.dot_general(a, w, dn, preferred_element_type=jnp.bfloat16))):
            f = bench_decode._step(dot, args.dtype, args.layout, hidden)
            out[name] = (f, (x, ws))
    if "small" in args.programs:  # many short GEMMs: M x hidden @ hidden x hidden, distinct weights
        rng = np.random.default_rng(1)
        h = args.small_hidden
        ws = [jax.device_put((rng.standard_normal((h, h), np.float32) / np.sqrt(h)).astype(jnp.bfloat16))
              for _ in range(args.small_count)]
        x = jax.device_put(rng.standard_normal((args.m, h), np.float32).astype(jnp.bfloat16))
        dn = (((1,), (1,)), ((), ()))
        for name, dot in (("small ours", lambda a, w: jax_tmem.dot_general(a, w, dn, preferred_element_type=jnp.bfloat16)),
                          ("small xla", lambda a, w: jax.lax.dot_general(a, w, dn, preferred_element_type=jnp.bfloat16))):
            def chain(x, ws, dot=dot):
                for w in ws:
                    x = dot(x, w)
                return x
            out[name] = (jax.jit(chain), (x, ws))
    if "quantize" in args.programs:
        n = args.qn
        xs = [jax.random.normal(jax.random.key(i), (n, n), jnp.bfloat16) for i in range(16)]
        g = jnp.float32(0.0173)
        q = lambda a: jax_tmem.quantize(a, "nvfp4", axis=0, path=os.environ.get("JT_QPATH", "kernel"), global_scale=g)
        out["quantize nvfp4 col"] = (jax.jit(lambda xs: [q(a) for a in xs]), (xs,))
        out["quantize x*3"] = (jax.jit(lambda xs: [a * 3 for a in xs]), (xs,))
        qx = lambda a: jax_tmem.quantize(a, "nvfp4", axis=0, path="xla", global_scale=g)
        out["quantize nvfp4 col, XLA's"] = (jax.jit(lambda xs: [qx(a) for a in xs]), (xs,))
    return out


class Loop:
    """One execution per call: f(*args), or, donated, args[-1] = f(*args) with the last argument donated
    (the outputs take the previous outputs' buffers: the addresses repeat, as in a training loop that donates
    its state)."""

    def __init__(self, f, args, donated=False):
        self.f, self.args, self.donated = f, list(args), donated

    def __call__(self):
        out = self.f(*self.args)
        if self.donated:
            self.args[-1] = out
        return out


def gpu_events(prof):
    ev = []
    for plane in prof.planes:
        if not plane.name.startswith("/device:GPU"):
            continue
        for line in plane.lines:
            if "stream" not in line.name.lower() or "memcpy" in line.name.lower():
                continue
            ev += [(e.start_ns, e.duration_ns, e.name) for e in line.events]
    return sorted(ev)


def host_events(prof):
    tot = collections.Counter()
    cnt = collections.Counter()
    for plane in prof.planes:
        if not plane.name.startswith("/host"):
            continue
        for line in plane.lines:
            for e in line.events:
                nm = re.sub(r"[0-9]+", "#", e.name)[:70]
                tot[nm] += e.duration_ns
                cnt[nm] += 1
    return tot, cnt


def trace(run, runs):
    from jax.profiler import ProfileData
    d = tempfile.mkdtemp()
    with jax.profiler.trace(d):
        outs = [run() for _ in range(runs)]
        jax.block_until_ready(outs)
    return ProfileData.from_file(glob.glob(d + "/**/*.xplane.pb", recursive=True)[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--programs", default="decode,quantize")
    ap.add_argument("--model", default="8b")
    ap.add_argument("--m", type=int, default=1)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--layout", default="NK", choices=("NK", "KN"), help="the decode weights' layout")
    ap.add_argument("--dtype", default="bfloat16", help="the decode weights' dtype (bench_decode.py's --dtypes)")
    ap.add_argument("--qn", type=int, default=4096)
    ap.add_argument("--small-hidden", type=int, default=1024)
    ap.add_argument("--small-count", type=int, default=64)
    ap.add_argument("--grep", default="apture|raph|pdate|race|ommand|Custom|ffi|Ffi|cuLaunch|cudaLaunch|Thunk")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--traced", type=int, default=6)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--kernels", action="store_true", help="each kernel of one execution: median duration, gap")
    ap.add_argument("--donate", action="store_true", help="also each program with its outputs donated back")
    args = ap.parse_args()
    print("XLA_FLAGS:", os.environ.get("XLA_FLAGS", ""), "| device:", jax.devices()[0].device_kind, flush=True)
    progs = {}
    for name, (f, a) in programs(args).items():
        progs[name] = Loop(f, a)
        if args.donate:  # the same program with its outputs in the previous outputs' buffers
            g = jax.jit(lambda *xs, f=f: f(*xs[:-1]), donate_argnums=(len(a),))
            progs[name + ", donated"] = Loop(g, tuple(a) + (f(*a),), donated=True)
    for run in progs.values():
        jax.block_until_ready(run())
    wall = {k: [] for k in progs}
    host = {k: [] for k in progs}
    for r in range(args.rounds):
        keys = list(progs)
        keys = keys[r % len(keys):] + keys[:r % len(keys)]
        for k in keys:
            run = progs[k]
            jax.block_until_ready(run())
            hs = []
            t0 = time.perf_counter()
            for _ in range(args.calls):
                t1 = time.perf_counter()
                out = run()
                hs.append(time.perf_counter() - t1)
            jax.block_until_ready(out)
            wall[k].append((time.perf_counter() - t0) / args.calls)
            host[k].append(statistics.median(hs))
    for k, run in progs.items():
        # kernels per execution: one execution alone
        one = gpu_events(trace(run, 1))
        per = len(one)
        prof = trace(run, args.traced)
        if not per:
            print(f"== {k}: wall {statistics.median(wall[k]) * 1e6:9.1f} us/exec, host "
                  f"{statistics.median(host[k]) * 1e6:8.1f} us/exec (no GPU kernels traced)")
            continue
        ev = gpu_events(prof)
        execs = [ev[i:i + per] for i in range(0, len(ev) - per + 1, per)]
        spans = [(e[-1][0] + e[-1][1] - e[0][0]) / 1e3 for e in execs]
        busy = [sum(x[1] for x in e) / 1e3 for e in execs]
        between = [(execs[i][0][0] - execs[i - 1][-1][0] - execs[i - 1][-1][1]) / 1e3 for i in range(1, len(execs))]
        print(f"== {k}: wall {statistics.median(wall[k]) * 1e6:9.1f} us/exec (rounds {min(wall[k]) * 1e6:.1f}-"
              f"{max(wall[k]) * 1e6:.1f}), host {statistics.median(host[k]) * 1e6:8.1f} us/exec; "
              f"{per} kernels/exec ({len(ev)} traced in {args.traced}); GPU busy "
              f"{statistics.median(busy):.1f} us, span {statistics.median(spans):.1f}, between executions "
              f"{', '.join(f'{b:.1f}' for b in between)} us", flush=True)
        if args.kernels:  # each kernel of one execution, in order: its median duration over the executions
            for i in range(per):
                d = statistics.median(e[i][1] for e in execs) / 1e3
                gap = statistics.median(e[i][0] - e[i - 1][0] - e[i - 1][1] for e in execs) / 1e3 if i else 0.0
                print(f"     kernel {i:3d} {d:8.2f} us (gap before {gap:5.2f})  {execs[0][i][2][:90]}")
        tot, cnt = host_events(prof)
        for nm, ns in tot.most_common(args.top):
            print(f"     host {ns / 1e3 / args.traced:9.1f} us/exec  {cnt[nm] / args.traced:6.1f} x  {nm}")
        shown = {nm for nm, _ in tot.most_common(args.top)}
        for nm, ns in tot.most_common():
            if nm not in shown and re.search(args.grep, nm):
                print(f"     host {ns / 1e3 / args.traced:9.1f} us/exec  {cnt[nm] / args.traced:6.1f} x  {nm}")
    from jax_tmem._core import ext
    rs = ext.record_status()
    if rs.get("wanted"):  # JAX_TMEM_FFI_RECORD=1: the updates' host time, ours and XLA's (all programs, all calls)
        n = max(rs.get("updated", 0), 1)
        print(f"== record stage: {rs.get('created')} created, {rs.get('updated')} updated, {rs.get('captured')} "
              f"captured, {rs.get('failed')} failed; per update {rs.get('update_us', 0) / n:.2f} us of host time, "
              f"{rs.get('update_xla_us', 0) / n:.2f} of it in XLA's update_launch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
