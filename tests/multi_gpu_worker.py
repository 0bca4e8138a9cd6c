"""Run by tests/test_multi_gpu.py in a fresh process: every kernel menu entry on each GPU in the order
given, so that each kernel instantiation meets the later devices only after it ran on the first one
(the case a per-process `static` breaks). Prints one "ok device <i> config <c> <shape>" line per case
and "ALL OK" at the end; raises (exits non-zero) on the first wrong result or error. The tests also
import `run_cases` to run the same sweep in their own process.

    python -P tests/multi_gpu_worker.py ORDER CONFIGS
    ORDER:   comma-separated local GPU indices, e.g. "1,0"
    CONFIGS: comma-separated menu entries, or "menu" for every entry of this GPU's menu
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np

from jax_tmem import isa
from jax_tmem._core import arch as _arch
from jax_tmem.ops import gemm as gemm_op

# (m, n, k, A major, B major): tails in every dim, several tiles per CTA; a decode shape for swap-AB.
SHAPES = [(264, 520, 304, "K", "MN"), (1000, 776, 1008, "K", "K"), (16, 1040, 2048, "K", "K")]


def operands(seed, m, n, k, a_major, b_major, dtype, device):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k) if a_major == "K" else (k, m)).astype(np.float32)
    b = rng.standard_normal((n, k) if b_major == "K" else (k, n)).astype(np.float32)
    dn = (((1,) if a_major == "K" else (0,), (1,) if b_major == "K" else (0,)), ((), ()))
    a, b = (jax.device_put(jnp.asarray(t).astype(dtype), device) for t in (a, b))
    return a, b, dn


def run_cases(order, configs="menu", log=print) -> None:
    """Every entry of `configs` ("menu": this GPU's whole menu) on each local GPU index of `order`, in
    that order, against a float64 reference and bitwise repeatable; raises AssertionError on the first
    failure."""
    gpus = [d for d in jax.local_devices() if d.platform == "gpu"]
    cc, why = _arch.device_cc()
    arch, why = _arch.arch_target(cc) if cc > 0 else ("", why)
    assert arch, f"no kernels: {why}"
    menu = [e for e in isa.kernel_menu(arch) if e["built"]]  # the dispatcher's own table, as built
    swap_ab = {e["config"] for e in menu if e["swap_ab"]}
    decode = {e["config"] for e in menu if e["split"] == "decode"}
    if configs == "menu":
        configs = [e["config"] for e in menu]
    for di in order:
        dev = gpus[di]
        for cfg in configs:
            for si, (m, n, k, am, bm) in enumerate(SHAPES):
                if cfg in swap_ab and am == "MN":
                    continue
                dtype = jnp.float8_e4m3fn if si == 1 else jnp.bfloat16  # shape 1 is K-major on both sides
                if cfg in decode and isa.entry_reads(arch, cfg, dtype, dtype, a_mn_major=am == "MN",
                                                     b_mn_major=bm == "MN"):
                    continue  # a decode entry that cannot read these operands (the extension's own rule)
                a, b, dn = operands(1000 * cfg + si, m, n, k, am, bm, dtype, dev)
                fn = jax.jit(lambda x, y: gemm_op.gemm(x, y, None, None, dn, np.dtype(np.float32),
                                                    gemm_op.Epilogue(), "kernel", True, cfg))
                out = fn(a, b)
                assert out.devices() == {dev}, (out.devices(), dev)
                got = np.asarray(out, np.float64)
                a64 = np.asarray(a.astype(jnp.float32), np.float64)
                b64 = np.asarray(b.astype(jnp.float32), np.float64)
                ref = (a64 if am == "K" else a64.T) @ (b64.T if bm == "K" else b64)
                err = np.abs(got - ref).max() / np.abs(ref).max()
                assert err < 3e-3, f"device {di} config {cfg} {m}x{n}x{k}: rel err {err:.3e}"
                again = np.asarray(fn(a, b), np.float64)
                assert np.array_equal(got, again), f"device {di} config {cfg} {m}x{n}x{k}: not repeatable"
                log(f"ok device {di} config {cfg} {m}x{n}x{k} {np.dtype(dtype).name}")


if __name__ == "__main__":
    configs = sys.argv[2] if sys.argv[2] == "menu" else tuple(int(x) for x in sys.argv[2].split(","))
    run_cases([int(x) for x in sys.argv[1].split(",")], configs, log=lambda s: print(s, flush=True))
    print("ALL OK")
