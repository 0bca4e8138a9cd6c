"""Loading the C++ extension and registering its FFI targets, once per platform.

The extension may be missing (a source checkout that was never built), built without CUDA (no nvcc at
build time), or built against XLA FFI headers newer than the running jaxlib (XLA would then report
"No FFI handler registered" at run time). Each case disables the affected path with a reason in plain
words, which ``python -m jax_tmem`` and ``JAX_TMEM_LOG=1`` show.
"""

from __future__ import annotations

import functools
import os
import threading
from typing import Any

import jax
import numpy as np

_lock = threading.Lock()
_registered: set[str] = set()


@functools.lru_cache(maxsize=None)
def load() -> tuple[Any, str]:
    """Returns (module or None, reason it is unusable or "")."""
    try:
        from jax_tmem import _jax_tmem  # type: ignore[attr-defined]
    except ImportError as e:  # pragma: no cover - exercised only on unbuilt checkouts
        return None, (f"the C++ extension is not built ({e}); install with the README command "
                      "(pip install --no-build-isolation .)")
    why = version_mismatch(_jax_tmem.build_info(), _running_jaxlib())
    return (None, why) if why else (_jax_tmem, "")


def version_mismatch(info: dict, running_jaxlib: str) -> str:
    """Why handlers built as `info` describes cannot run under `running_jaxlib` ("" if they can).

    XLA runs an FFI handler only if the FFI API version it was compiled against is not newer than the
    runtime's; a newer one registers without complaint and is then "not found" at run time."""
    if _version_tuple(info["jaxlib_version"]) > _version_tuple(running_jaxlib):
        major, minor = info["ffi_api_version"]
        return (f"the extension was compiled against jaxlib {info['jaxlib_version']} (XLA FFI API {major}.{minor}) "
                f"but jaxlib {running_jaxlib} is running; XLA would not find its handlers. Rebuild against the "
                "running jaxlib: pip install --no-build-isolation --force-reinstall .")
    return ""


def _running_jaxlib() -> str:
    import jaxlib.version
    return jaxlib.version.__version__


def _version_tuple(v: str) -> tuple[int, ...]:
    out = []
    for part in v.split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out)


def build_info() -> dict:
    mod, _ = load()
    return dict(mod.build_info()) if mod is not None else {}


def cuda_built() -> tuple[bool, str]:
    mod, why = load()
    if mod is None:
        return False, why
    info = mod.build_info()
    if not info["cuda"]:
        return False, info["cuda_reason"]
    return True, ""


def ensure_registered(platform: str) -> tuple[bool, str]:
    """Registers the handlers for ``platform`` ("cpu" or "cuda") once. Returns (ok, reason)."""
    mod, why = load()
    if mod is None:
        return False, why
    with _lock:
        if platform in _registered:
            return True, ""
        targets = mod.registrations().get(platform, {})
        if not targets:
            return False, f"the extension has no {platform} handlers ({mod.build_info()['cuda_reason'] or 'not built'})"
        direct = _bootstrap_record(mod) if platform == "cuda" and record_wanted() else set()
        for name, capsule in targets.items():
            if name not in direct:  # (those XLA has already, with their record handlers)
                jax.ffi.register_ffi_target(name, capsule, platform=platform.upper() if platform == "cuda" else platform)
        if platform == "cuda":
            flag_pool(reserve=True)
        _registered.add(platform)
    return True, ""


_bootstrap_error = ""


def _call_bootstrap():
    """One call of the bootstrap target, compiled and run now, also when a trace asked for the registration
    (ahead of time: lower, compile, call)."""
    call = jax.ffi.ffi_call("jax_tmem_record_bootstrap", jax.ShapeDtypeStruct((1,), np.int32))
    with jax.default_device(jax.devices("gpu")[0]):
        jax.block_until_ready(jax.jit(call).lower().compile()())


def _bootstrap_record(mod) -> set[str]:
    """The CUDA targets registered with XLA itself with their record handlers, by one call of the extension's
    bootstrap custom call (JAX's registration drops a "record" handler: cpp/include/jax_tmem/record_stage.h).
    Empty, with the reason in record_status(), where that is not possible: the targets are then registered
    through JAX as usual (traced into command buffers)."""
    global _bootstrap_error
    boot = mod.record_bootstrap() if hasattr(mod, "record_bootstrap") else None
    if boot is None:
        _bootstrap_error = "the extension was built without the record stage"
        return set()
    try:
        jax.ffi.register_ffi_target("jax_tmem_record_bootstrap", boot, platform="CUDA")
        _call_bootstrap()
    except Exception as e:  # visible in record_status() and the report, never silent
        _bootstrap_error = f"the bootstrap call failed: {type(e).__name__}: {e}"
        return set()
    st = mod.record_stats()
    _bootstrap_error = st.get("register_error", "")
    return set(st.get("registered", ()))


def record_wanted() -> bool:
    """Whether the CUDA custom calls register XLA FFI's record stage (opt-in, JAX_TMEM_FFI_RECORD=1: their
    launches become kernel nodes of XLA's command buffers instead of stream-captured child graphs; jaxlib >=
    0.11.2 headers at build time; not yet the default: see docs/PERF.md)."""
    return os.environ.get("JAX_TMEM_FFI_RECORD", "0") == "1"


def flag_pool(reserve: bool = False) -> dict:
    """The per-device pools that hold the workspaces of the launches whose pieces meet through ready flags (K splits
    of a weight-multicast pair, a shared last wave), so that no memset clears the flags before each launch
    (cpp/include/jax_tmem/flag_pool.h). ``reserve``: allocate them on this process's local sm_90 GPUs first (once;
    done when the CUDA targets are registered), ``JAX_TMEM_FLAG_POOL_MB`` MiB each (default 128; 0: none, every
    such launch clears its flags with a memset). Returns {devices, bytes, regions, used, misses (launches that
    cleared flags with a memset instead), error}."""
    mod, why = load()
    if mod is None or not hasattr(mod, "flag_pool"):
        return dict(devices=[], bytes=0, regions=0, used=0, misses=0, error=why or "the extension predates the pool")
    devices, mib = [], int(os.environ.get("JAX_TMEM_FLAG_POOL_MB", "128") or 0)
    if reserve:
        try:
            devices = [d.local_hardware_id for d in jax.local_devices(backend="gpu")]
        except RuntimeError as e:  # no GPU backend: nothing to reserve
            return dict(mod.flag_pool([], mib), error=f"no GPU devices: {e}")
    return dict(mod.flag_pool(devices, mib))


def record_status() -> dict:
    """The record stage in this process: wanted (JAX_TMEM_FFI_RECORD=1), available (built with it), and the
    counts of calls recorded as kernel nodes (created, updated), handed back to tracing (captured, with the last
    reason) or failed."""
    mod, why = load()
    if mod is None or not hasattr(mod, "record_stats"):
        return dict(wanted=record_wanted(), available=False, last_reason=why or "the extension predates the record stage")
    st = dict(mod.record_stats())
    if _bootstrap_error:
        st["register_error"] = _bootstrap_error
    return dict(wanted=record_wanted(), **st)


@functools.lru_cache(maxsize=None)
def operand_roles() -> tuple[str, ...]:
    """The GEMM custom call's input roles in argument order, from the C++ list (cpp/include/jax_tmem/
    operands.def) the handlers decode: ("a", "b", "bias", "c", ...)."""
    mod, why = load()
    if mod is None:
        raise RuntimeError(f"jax_tmem: the C++ extension is not available: {why}")
    return tuple(name for name, _required in mod.operand_roles())


def operand_mask(names) -> int:
    """The ``operands`` attribute of a call that passes the inputs ``names``, in that order, which must
    be the roles' order (the handler reads the buffers in role order)."""
    roles = operand_roles()
    unknown = [n for n in names if n not in roles]
    if unknown:
        raise ValueError(f"jax_tmem: unknown operand role(s) {unknown}; roles: {roles}")
    idx = [roles.index(n) for n in names]
    if idx != sorted(set(idx)):
        raise ValueError(f"jax_tmem: operands {list(names)} must be passed once each, in role order {roles}")
    return sum(1 << i for i in idx)


# The GEMM custom call's attributes, as the binding in cpp/include/jax_tmem/ffi_attrs.h declares them:
# name -> (numpy type, default; None = every call gives it). Every caller builds them with gemm_attrs.
GEMM_ATTRS = {
    "operands": (np.int64, None), "batch": (np.int64, None), "m": (np.int64, None), "n": (np.int64, None),
    "k": (np.int64, None), "a_mn_major": (np.bool_, None), "b_mn_major": (np.bool_, None),
    "lda": (np.int64, None), "ldb": (np.int64, None), "stride_a": (np.int64, None), "stride_b": (np.int64, None),
    "activation": (np.int32, 0), "alpha": (np.float32, 1.0), "config": (np.int32, -1), "splits": (np.int32, 0),
    "sf_vec": (np.int32, 0), "sf_layout": (np.int32, 0),
}


def gemm_attrs(roles=None, **values) -> dict:
    """The typed attributes of one GEMM custom call: ``values`` over GEMM_ATTRS' defaults, and the
    ``operands`` mask of ``roles`` (the inputs passed, in role order) unless ``operands`` is given."""
    if roles is not None:
        values.setdefault("operands", operand_mask(roles))
    unknown = sorted(set(values) - set(GEMM_ATTRS))
    missing = sorted(k for k, (_, d) in GEMM_ATTRS.items() if d is None and k not in values)
    if unknown or missing:
        raise ValueError(f"jax_tmem: GEMM attributes: unknown {unknown}, missing {missing}")
    return {k: t(values.get(k, d)) for k, (t, d) in GEMM_ATTRS.items()}
