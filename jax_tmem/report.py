"""``python -m jax_tmem``: the main job. Reports the environment and the path every dtype takes (and
why), checks every path against a float64 reference on a default problem, and runs a short benchmark
against ``jnp.dot`` in the same run. Exit status 1 if any correctness check fails."""

from __future__ import annotations

import collections
import importlib
import re
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import jax_tmem
from jax_tmem._core import arch as _arch, config as _config, ext as _ext

DTYPES = [("bfloat16", "bfloat16"), ("float16", "float16"), ("float32", "float32"),
          ("float8_e4m3fn", "float8_e4m3fn"), ("float8_e5m2", "float8_e4m3fn"), ("int8", "int8"),
          ("bfloat16", "float8_e4m3fn")]  # (weight-only fp8: 16-bit activations x fp8 weights)
TOL = {"bfloat16": 1e-2, "float16": 2e-3, "float32": 5e-3}


def _line(s=""):
    print(s, flush=True)


def _paths_to_check():
    return ["kernel", "xla"] if jax.default_backend() in ("cpu", "gpu") else ["xla"]


def _out_dtype(at):
    return "float32" if at in ("float32", "int8") else ("bfloat16" if "float8" in at else at)


def _check(at, bt, path, m, n, k):
    rng = np.random.default_rng(abs(hash((at, bt, path, m, n, k))) % 2**32)
    draw = (lambda s: rng.integers(-128, 128, s)) if at == "int8" else rng.standard_normal
    a = jnp.asarray(draw((m, k)), at)
    b = jnp.asarray(draw((k, n)), bt)
    bias = jnp.asarray(rng.standard_normal((n,)), jnp.float32)
    out_dt = _out_dtype(at)
    _config.clear_decisions()
    f = jax.jit(lambda x, y, z: jax_tmem.matmul(x, y, bias=z, activation="relu", out_dtype=out_dt, path=path))
    try:
        out = np.asarray(f(a, b, bias).astype(jnp.float32), np.float64)
    except ValueError as e:  # forced kernel path impossible here: report, not a failure
        return None, str(e).split(": ", 2)[-1], ""
    ref = np.maximum(np.asarray(a.astype(jnp.float32), np.float64) @ np.asarray(b.astype(jnp.float32), np.float64)
                     + np.asarray(bias, np.float64), 0)
    err = float(np.abs(out - ref).max() / np.abs(ref).max())
    target = next((d.target for d in reversed(_config.decisions()) if d.path == path and d.op == "gemm"), "?")
    return err, "", target


def _bench(m, n, k, dtype, reps=10):
    a = jax.random.normal(jax.random.key(1), (m, k), jnp.float32).astype(dtype)
    b = jax.random.normal(jax.random.key(2), (k, n), jnp.float32).astype(dtype)
    out_dt = jnp.bfloat16 if "float8" in dtype else dtype
    fns = {"jax_tmem": jax.jit(lambda x, y: jax_tmem.matmul(x, y, out_dtype=out_dt)),
           "jnp.dot": jax.jit(lambda x, y: jnp.dot(x, y, preferred_element_type=out_dt))}
    res = {}
    for name, f in fns.items():
        jax.block_until_ready(f(a, b))
        ts = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(reps):
                o = f(a, b)
            jax.block_until_ready(o)
            ts.append((time.perf_counter() - t0) / reps)
        res[name] = 2 * m * n * k / statistics.median(ts) / 1e12
    return res


def _check_paths(label, ref, call, tol_for, op="scaled_matmul") -> int:
    """One block-scaled problem on every path: the path "auto" takes and why, and each path's max error
    against ``ref`` (float64). ``call(path)`` runs it; ``tol_for(target)`` the tolerance. Returns the
    number of failed checks."""
    _line(label)
    failures = 0
    for path in ("auto", "kernel", "xla"):
        _config.clear_decisions()
        try:
            out = np.asarray(call(path), np.float64)[0]
        except ValueError as e:
            _line(f"  {path:6}: n/a ({str(e).split(': ', 2)[-1]})")
            continue
        d = [x for x in _config.decisions() if x.op == op][-1]
        err = float(np.abs(out - ref).max() / np.abs(ref).max())
        tol = tol_for(d.target)
        ok = err < tol
        failures += not ok
        _line(f"  {path:6}: {d.path:6} max rel err {err:.2e} (tol {tol:.0e}) {'OK' if ok else 'FAIL'}  "
              f"[{d.target}] {d.reason}")
    return failures


def _check_block_scaled() -> int:
    """The block-scaled GEMMs (mxfp8 x mxfp8; nvfp4 x nvfp4 with global scales; bf16 x nvfp4 weights) on
    every path against float64 of the dequantized operands. Returns the number of failed checks."""
    _line("")
    b, m, n, k = 1, 256, 320, 544  # K / 32 = 17: scale tails
    rng = np.random.default_rng(14)
    deq64 = lambda q, sc, g=None: np.asarray(jax_tmem.dequantize(q, sc, global_scale=g), np.float64)[0]
    failures = 0
    # Hopper's fp8 wgmma: ~2^-14 per 32-K block
    for fmt, gx, gw in (("mxfp8", None, None), ("nvfp4", 0.37, 2.5)):
        xq, xs = jax_tmem.quantize(jnp.asarray(rng.standard_normal((b, m, k)), jnp.bfloat16), fmt, global_scale=gx)
        wq, ws = jax_tmem.quantize(jnp.asarray(rng.standard_normal((b, n, k)), jnp.bfloat16), fmt, global_scale=gw)
        g = dict(lhs_global_scale=gx, rhs_global_scale=gw) if gx else {}
        failures += _check_paths(
            f"block-scaled scaled_matmul ({fmt} x {fmt}, {m}x{n}x{k}) vs float64 of the dequantized operands:",
            deq64(xq, xs, gx) @ deq64(wq, ws, gw).T,
            lambda path: jax.jit(lambda *a: jax_tmem.scaled_matmul(*a, jnp.float32, path=path, **g))(xq, wq, xs, ws),
            lambda target: 1e-3 if target.startswith("cuda") else 1e-5)
    # 4-bit weights for decode: bf16 activations x NVFP4 weights (with the global scale), weight-only.
    m, gs = 16, 0.75
    x = jnp.asarray(rng.standard_normal((b, m, k)), jnp.bfloat16)
    wq, ws = jax_tmem.quantize(jnp.asarray(rng.standard_normal((b, n, k)), jnp.float32), "nvfp4", global_scale=gs)
    failures += _check_paths(
        f"weight-only scaled_matmul (bf16 x nvfp4, {m}x{n}x{k}) vs float64:",
        np.asarray(x, np.float64)[0] @ deq64(wq, ws, gs).T,
        lambda path: jax.jit(lambda a, w, sc: jax_tmem.scaled_matmul(a, w, None, sc, jnp.float32, rhs_global_scale=gs,
                                                                     path=path))(x, wq, ws),
        lambda target: 1e-5)
    _config.clear_decisions()
    jax_tmem.quantize(x, "mxfp8")
    d = [x for x in _config.decisions() if x.op == "quantize"][-1]
    _line(f"quantize (mxfp8, auto): {d.path} [{d.target}] {d.reason}")
    return failures


def _check_recipes() -> int:
    """The "fp8" training recipe (jax_tmem.dot_general(recipe="fp8")): forward and dgrad on every path
    against float64 of its quantized operands; and whether the Flax drop-ins import."""
    from jax_tmem.ops import recipes as _recipes
    _line("")
    m, k, n = 128, 256, 192
    rng = np.random.default_rng(16)
    x = jnp.asarray(rng.standard_normal((m, k)), jnp.bfloat16)
    w = jnp.asarray(rng.standard_normal((k, n)) * 0.05, jnp.bfloat16)
    g = jnp.asarray(rng.standard_normal((m, n)), jnp.float32)
    q64 = lambda t, dt: (lambda q, s: np.asarray(q.astype(jnp.float32), np.float64) * float(s))(
        *jax.jit(_recipes.fp8_quantize, static_argnums=1)(t, dt))
    xa, wa, ga = q64(x, jnp.float8_e4m3fn), q64(w, jnp.float8_e4m3fn), q64(g, jnp.float8_e5m2)
    dn = (((1,), (0,)), ((), ()))

    def fwd_bwd(path):
        f = lambda x, w: jax_tmem.dot_general(x, w, dn, preferred_element_type=jnp.float32, recipe="fp8", path=path)
        y, vjp = jax.vjp(jax.jit(f), x, w)
        return np.concatenate([np.asarray(y).ravel(), np.asarray(vjp(g)[0], np.float32).ravel()])[None]
    ref = np.concatenate([(xa @ wa).ravel(), (ga @ wa.T).ravel()])
    failures = _check_paths(f'training recipe "fp8" (y and dx of {m}x{n}x{k}, per-tensor scales) vs float64:', ref,
                            fwd_bwd, lambda target: 1e-2, op="gemm")  # dx is bf16
    try:
        importlib.import_module("jax_tmem.flax")
        _line("Flax drop-ins: jax_tmem.flax.linen.Dense / DenseGeneral, jax_tmem.flax.nnx.Linear / LinearGeneral / "
              f"Einsum, recipes {sorted(jax_tmem.RECIPES)}")
    except ImportError as e:
        _line(f"Flax drop-ins: not available ({e})")
    return failures


COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")


def hlo_ops(compiled_text: str) -> collections.Counter:
    """How many of each HLO instruction (fused computations' included) a compiled program's text holds."""
    return collections.Counter(re.findall(r"= (?:\([^)]*\)|\S+) ([a-z-]+)\(", compiled_text))


def collectives(compiled_text: str) -> dict:
    """How many of each collective a compiled program's HLO holds."""
    return {k: len(re.findall(re.escape(k) + r"(-start)?\(", compiled_text)) for k in COLLECTIVES}


def _sharding_section() -> None:
    """How a GEMM of each common sharding is partitioned on this process's devices: the collectives of
    the compiled jax_tmem program next to lax.dot_general's, and the partition decision."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    devs = jax.devices()
    _line("")
    flag = jax.config.jax_remove_custom_partitioning_ptr_from_cache_key
    _line(f"sharding ({len(devs)} device(s); jax_remove_custom_partitioning_ptr_from_cache_key={flag}, which the "
          "persistent compilation cache needs to reuse partitioned programs):")
    if len(devs) < 2:
        _line("  one device: nothing to partition. Under jit over several devices each jax_tmem GEMM partitions like "
              "lax.dot_general (batch/M/N pass through, a split K is summed by an all-reduce or a reduce-scatter)")
        return
    mesh = Mesh(np.array(devs), ("d",))
    n = len(devs)
    m, k, nn = 128 * n, 128 * n, 128 * n
    x = jax.ShapeDtypeStruct((m, k), jnp.bfloat16)
    w = jax.ShapeDtypeStruct((k, nn), jnp.bfloat16)
    layouts = [("data parallel", P("d", None), P(), None), ("column (N split)", P(), P(None, "d"), None),
               ("row (K split)", P(None, "d"), P("d", None), None),
               ("row, output split (reduce-scatter)", P(None, "d"), P("d", None), P("d", None))]
    ours = "auto" if jax.default_backend() == "gpu" else "kernel"  # no GPU: the C++ CPU handler per device
    _line(f"  jax_tmem path {ours!r} against lax.dot_general, {m}x{k} @ {k}x{nn} bf16 on a 1-D mesh 'd':")
    for name, sx, sw, so in layouts:
        row = []
        for path in (ours, "xla"):
            _config.clear_decisions()
            kw = {} if so is None else {"out_shardings": NamedSharding(mesh, so)}
            f = jax.jit(lambda a, b: jax_tmem.matmul(a, b, path=path), in_shardings=(NamedSharding(mesh, sx),
                        NamedSharding(mesh, sw)), **kw)
            try:
                c = collectives(f.lower(x, w).compile().as_text())
            except Exception as e:  # noqa: BLE001 (the report says what failed, and goes on)
                row.append(f"{path}: FAILED ({type(e).__name__}: {str(e)[:120]})")
                continue
            txt = ", ".join(f"{v} {k}" for k, v in c.items() if v) or "no collectives"
            how = [d.target for d in _config.decisions() if d.op == "partition"]
            row.append(f"{'lax' if path == 'xla' else 'jax_tmem'}: {txt}" + (f" [{how[-1]}]" if how else ""))
        _line(f"    {name:36} x {str(sx):16} w {str(sw):16} -> " + " | ".join(row))


def main() -> int:
    _line(f"jax_tmem {jax_tmem.__version__}  |  jax {jax.__version__}  |  backend {jax.default_backend()}")
    dev = jax.devices()[0]
    cc, cc_why = _arch.device_cc()
    _line(f"device: {dev.device_kind}" + (f"  |  compute capability {cc // 10}.{cc % 10}" if cc > 0 else ""))
    mod, why = _ext.load()
    info = _ext.build_info()
    if mod is None:
        _line(f"extension: NOT LOADED - {why}")
    else:
        _line(f"extension: built against jaxlib {info['jaxlib_version']} (XLA FFI API "
              f"{info['ffi_api_version'][0]}.{info['ffi_api_version'][1]}); CUDA: "
              + (f"yes ({info['cuda_version']}, {info['cuda_archs'] or 'no archs'}, "
                 f"{info.get('configs', '?')} kernel configurations)" if info["cuda"]
                 else f"no ({info['cuda_reason']})"))
        if info.get("dev_options"):
            _line(f"  built with kernel options for measuring (off by default): {', '.join(info['dev_options'])}")
    on_gpu = jax.default_backend() == "gpu"
    if not on_gpu:
        _line("this machine has no supported GPU: every call runs on the fallback (XLA), and the C++ CPU "
              "handler runs when path='kernel' is forced")
    _line("")
    _line("path per dtype (default problem 512x384x256, auto path):")
    for at, bt in DTYPES:
        _config.clear_decisions()
        a = jax.ShapeDtypeStruct((512, 256), at)
        b = jax.ShapeDtypeStruct((256, 384), bt)
        jax.eval_shape(lambda x, y: jax_tmem.matmul(x, y), a, b)
        d = [x for x in _config.decisions() if x.op == "gemm"][-1]
        _line(f"  {at:>14} x {bt:<14} -> {d.path:6} [{d.target}] {d.reason}")
    _config.clear_decisions()  # weight-only fp8 at a decode shape (Flax's (K, N) weight)
    jax.eval_shape(lambda x, y: jax_tmem.matmul(x, y), jax.ShapeDtypeStruct((8, 4096), "bfloat16"),
                   jax.ShapeDtypeStruct((4096, 8192), "float8_e4m3fn"))
    d = [x for x in _config.decisions() if x.op == "gemm"][-1]
    _line(f"  decode: bfloat16[8, 4096] x float8_e4m3fn[4096, 8192] -> {d.path:6} [{d.target}] {d.reason}")
    _line("")
    _line("correctness vs float64 (matmul + bias + relu):")
    failures = 0
    m, n, k = (1000, 776, 1008) if on_gpu else (200, 136, 96)
    for at, bt in DTYPES:
        for path in _paths_to_check():
            err, skip, target = _check(at, bt, path, m, n, k)
            if err is None:
                _line(f"  {at:>14} x {bt:<14} {path:6}: n/a ({skip})")
                continue
            tol = TOL[_out_dtype(at)]
            ok = err < tol
            failures += not ok
            _line(f"  {at:>14} x {bt:<14} {path:6}: max rel err {err:.2e} (tol {tol:.0e}) "
                  f"{'OK' if ok else 'FAIL'}  [{target}]")
    failures += _check_block_scaled()
    failures += _check_recipes()
    _sharding_section()
    _line("")
    _line("benchmark vs jnp.dot (same run; TFLOP/s, median of 5 x 10 calls):")
    # A decode shape too (M = 16: memory-bound, swap-AB + split-K on Hopper): also in TB/s of operands.
    shapes = [(4096, 4096, 4096, "bfloat16"), (4096, 4096, 4096, "float8_e4m3fn"), (16, 8192, 8192, "bfloat16")] \
        if on_gpu else [(512, 512, 512, "float32")]
    for m, n, k, dt in shapes:
        r = _bench(m, n, k, dt)
        tb = ""
        if m <= 128:
            nbytes = (m * k + k * n + m * n) * jnp.dtype(dt).itemsize
            tb = f"  ({nbytes * r['jax_tmem'] / (2 * m * n * k):.2f} TB/s vs {nbytes * r['jnp.dot'] / (2 * m * n * k):.2f})"
        _line(f"  {m}x{n}x{k} {dt}: jax_tmem {r['jax_tmem']:.1f}  jnp.dot {r['jnp.dot']:.1f}  "
              f"ratio {r['jax_tmem'] / r['jnp.dot']:.2f}{tb}")
    fp = _ext.flag_pool()
    if on_gpu:
        _line("")
        _line(f"workspace pools with ready flags (no memset before pair / last-wave launches): GPUs {fp['devices']}, "
              f"{fp['bytes'] >> 20} MiB each, regions {fp['regions']}, memset fallbacks {fp['misses']}"
              + (f" ({fp['error']})" if fp["error"] else ""))
    rs = _ext.record_status()
    if rs["wanted"] or rs["available"]:
        _line("")
        _line("XLA FFI record stage (JAX_TMEM_FFI_RECORD=1, experimental): "
              + (f"{'on' if rs['wanted'] else 'off'}; calls recorded {rs['created']}, updated {rs['updated']}, "
                 f"traced instead {rs['captured']}, failed {rs['failed']}" if rs["available"] else "not built")
              + (f" ({rs['last_reason']})" if rs["last_reason"] else ""))
        if rs["wanted"] and rs["available"]:
            _line(f"  targets given to XLA with their record handlers: {', '.join(rs.get('registered', ())) or 'none'}"
                  + (f" ({rs['register_error']})" if rs.get("register_error") else ""))
    _line("")
    _line("RESULT: " + ("all correctness checks passed" if not failures else f"{failures} correctness check(s) FAILED"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
