"""Probe of XLA FFI's record stage (jaxlib >= 0.11.2) with one small kernel (scripts/record_probe.cu).

Questions, before any change to jax_tmem's launch path:
  1. Does XLA call a custom call's "record" handler, with which action (create / update) and how often?
  2. Are the results right (bitwise against numpy) with the launches recorded as kernel nodes?
  3. What does an execution cost on the host and in wall time: the execute handler traced by stream capture
     (today's path for every jax_tmem call) against recorded kernel nodes, with and without a PDL edge?

Usage (a GPU machine with nvcc and jaxlib >= 0.11.2; builds into --tmp):
    python3 scripts/record_probe.py --out $OUT
Each variant runs in its own process (a crash in the record API does not end the probe); one JSON line each.

Answer on jaxlib 0.11.2 (H200, 2026-11-27 10:07, docs/PERF.md section 2026-11-27 10:06): (1) never. The record
handler registered through jax.ffi.register_ffi_target(..., {"execute": ..., "record": ...}) was called 0 times
in every variant; XLA logged "FFI handler requested or required fallback to stream capture" for each call and
traced the execute handler into a child graph as before. The registration goes through PJRT's GPU custom-call
extension, whose arguments in XLA's published source (PJRT_Gpu_Register_Custom_Call_Args, extension version 2)
hold instantiate / prepare / initialize / execute handlers only (the plugin's own source was not read).
(2) every variant exact.
(3) moot while (1) holds.
Hence the "direct" variants (the default set since): the handler bundle, record included, registered with
XLA itself through the XLA_FFI_Api that XLA passes to a one-off bootstrap handler (record_probe.cu's
probe_bootstrap), and programs compiled after that call use the new target. Not run yet.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

VARIANTS = {  # name: (registered stages, use_pdl, capture request in the record handler)
    "execute": ("execute", 0, 0),
    # registered through jax.ffi.register_ffi_target with a "record" key (never called on jaxlib 0.11.2)
    "record_capture": ("record", 0, 1),
    "record": ("record", 0, 0),
    "record_pdl": ("record", 1, 0),
    # registered through XLA's own XLA_FFI_Handler_Register from inside a bootstrap call (probe_bootstrap)
    "direct_capture": ("direct", 0, 1),
    "direct": ("direct", 0, 0),
    "direct_pdl": ("direct", 1, 0),
}
DEFAULT_VARIANTS = "execute,direct_capture,direct,direct_pdl"


def build(tmp: str) -> tuple[str, str]:
    import jax.ffi
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "record_probe.cu")
    inc = jax.ffi.include_dir()
    if not os.path.exists(os.path.join(inc, "xla", "ffi", "api", "record_c_api.h")):
        sys.exit(f"this jaxlib ({inc}) has no xla/ffi/api/record_c_api.h: no record stage to probe")
    so, cubin = os.path.join(tmp, "record_probe.so"), os.path.join(tmp, "record_probe.cubin")
    os.makedirs(tmp, exist_ok=True)
    subprocess.run(["nvcc", "-std=c++17", "-O2", "-shared", "-Xcompiler", "-fPIC", "-arch=sm_90a", "-I", inc,
                    "-o", so, src], check=True)
    subprocess.run(["nvcc", "-std=c++17", "-O2", "-cubin", "-arch=sm_90a", "-DPROBE_KERNEL_ONLY", "-o", cubin, src],
                   check=True)
    return so, cubin


def run_variant(name: str, so: str, cubin: str, calls: int, n: int, spin: int, execs: int, rounds: int) -> dict:
    import ctypes

    import jax
    import jax.numpy as jnp
    import numpy as np
    stages, use_pdl, capture = VARIANTS[name]
    lib = ctypes.CDLL(so)
    data = open(cubin, "rb").read()
    lib.probe_set(ctypes.c_int(use_pdl), ctypes.c_longlong(spin), ctypes.c_int(capture), data,
                  ctypes.c_size_t(len(data)))
    target = "jax_tmem_record_probe"
    if stages == "direct":
        # one call of the bootstrap target registers the bundle (execute + record) with XLA itself; only
        # programs compiled after it can use the new target
        jax.ffi.register_ffi_target("jax_tmem_record_probe_boot", {"execute": jax.ffi.pycapsule(lib.probe_bootstrap)},
                                    platform="CUDA")
        z = jnp.zeros((256,), jnp.float32)
        boot = jax.jit(lambda v: jax.ffi.ffi_call("jax_tmem_record_probe_boot", jax.ShapeDtypeStruct(v.shape, v.dtype))(v))
        if not np.array_equal(np.asarray(boot(z)), np.ones(256, np.float32)):
            raise RuntimeError("record_probe: the bootstrap call computed a wrong result")
        target = "jax_tmem_record_probe_direct"
    else:
        handlers = {"execute": jax.ffi.pycapsule(lib.probe_execute)}
        if stages == "record":
            handlers["record"] = jax.ffi.pycapsule(lib.probe_record)
        jax.ffi.register_ffi_target(target, handlers, platform="CUDA")

    def counts():
        out = (ctypes.c_longlong * 4)()
        lib.probe_counts(out)
        return dict(zip(("execute", "create", "update", "capture_requests"), list(out)))

    def step(x, big):
        # an XLA reduction over 256 MB (~0.1 ms) writes the chain's input, and an XLA kernel reads its output:
        # a recorded node that did not wait for its producer, or that its consumer did not wait for, shows here
        x = x * 0.5 + jnp.sum(big) * 0.0  # (x 0.5: outputs fed back stay finite)
        for _ in range(calls):
            x = jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
        return x - 0.5

    f = jax.jit(step)
    x0 = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    big = jnp.ones((64 * 1024 * 1024,), jnp.float32)
    want = x0 * np.float32(0.5)
    for _ in range(calls):
        want = np.float32(1.0) * want + np.float32(1.0)
    want = want - np.float32(0.5)
    # the output fed back as the next input, as in a serving loop: addresses move every execution
    x = jnp.asarray(x0)
    got = np.asarray(f(x, big))
    exact = bool(np.array_equal(got, want))
    first_mismatches = int(np.sum(got != want))
    y = x
    for _ in range(3):
        y = f(y, big)
    jax.block_until_ready(y)
    c0 = counts()
    walls, hosts = [], []
    for _ in range(rounds):
        y = x
        jax.block_until_ready(y)
        t0 = time.perf_counter()
        for _ in range(execs):
            y = f(y, big)
        t1 = time.perf_counter()
        jax.block_until_ready(y)
        t2 = time.perf_counter()
        hosts.append((t1 - t0) / execs * 1e6)
        walls.append((t2 - t0) / execs * 1e6)
    c1 = counts()
    total = rounds * execs
    per_exec = {k: round((c1[k] - c0[k]) / total, 3) for k in c1}
    # the chain again after the timing (addresses moved many times): still exact?
    after = [np.asarray(f(jnp.asarray(x0), big)) for _ in range(5)]
    exact_after = all(np.array_equal(g, want) for g in after)
    return dict(variant=name, calls=calls, n=n, spin=spin, exact=exact, mismatches=first_mismatches,
                exact_after=exact_after,
                wall_us=float(np.median(walls)), host_us=float(np.median(hosts)),
                wall_us_per_call=float(np.median(walls)) / calls, handler_calls_per_exec=per_exec,
                counts_first=c0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--tmp", default="/tmp/jax_tmem_record_probe")
    ap.add_argument("--calls", type=int, default=64)
    ap.add_argument("--n", type=int, default=32768)
    ap.add_argument("--spins", default="0,4000")
    ap.add_argument("--execs", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--variants", default=DEFAULT_VARIANTS, help=f"any of {', '.join(VARIANTS)}")
    ap.add_argument("--vlog", action="store_true", help="XLA's VLOG of the record path for the first spin's "
                    "'direct' variant, into --out/record_vlog.txt")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one variant, print its JSON
    a = ap.parse_args()
    if a.one:
        name, so, cubin, spin = a.one.split(",")
        print("RESULT " + json.dumps(run_variant(name, so, cubin, a.calls, a.n, int(spin), a.execs, a.rounds)))
        return
    so, cubin = build(a.tmp)
    results = []
    for spin in [int(s) for s in a.spins.split(",")]:
        for name in a.variants.split(","):
            env = dict(os.environ)
            vlog = a.vlog and name == "direct" and spin == int(a.spins.split(",")[0])
            if vlog:
                env.update(TF_CPP_MIN_LOG_LEVEL="0", TF_CPP_VMODULE="custom_call_thunk=5,record_ffi=3,"
                           "cuda_command_buffer=2,command_buffer_thunk=3")
            p = subprocess.run([sys.executable, "-P", os.path.abspath(__file__), "--one", f"{name},{so},{cubin},{spin}",
                                "--calls", str(a.calls), "--n", str(a.n), "--execs", str(a.execs),
                                "--rounds", str(a.rounds)], capture_output=True, text=True, timeout=300, env=env)
            if vlog:
                lines = p.stderr.splitlines()
                keys = ("Record", "record", "FfiCreateLaunch", "kernel node", "deps(", "Capture", "capture")
                with open(os.path.join(a.out, "record_vlog.txt"), "w") as fh:
                    fh.write("\n".join(lines[:300] + ["..."] + [ln for ln in lines[300:] if any(k in ln for k in keys)][:600]))
            line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
            r = json.loads(line[7:]) if line else dict(variant=name, spin=spin, failed=p.returncode,
                                                       stderr=p.stderr[-1500:])
            results.append(r)
            print(json.dumps(r), flush=True)
    with open(os.path.join(a.out, "record_probe.json"), "w") as fh:
        json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
