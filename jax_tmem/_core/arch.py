"""What the CUDA kernels can take, per architecture (mirrors cpp/src/gpu_gemm.cc's checks).

The C++ handler re-validates everything (and returns an ffi::Error instead of crashing); this module
exists so that unsupported problems are routed to XLA at trace time, with a reason, before lowering.
"""

from __future__ import annotations

import functools
import os

import jax
import numpy as np

from jax_tmem._core import canon as _canon, ext as _ext

BF16, F16, F32 = np.dtype("bfloat16"), np.dtype("float16"), np.dtype("float32")
E4M3, E5M2 = np.dtype("float8_e4m3fn"), np.dtype("float8_e5m2")
I8 = np.dtype("int8")
FP8 = (E4M3, E5M2)
OUT_TYPES = (F32, BF16, F16)


def _local_gpus() -> list:
    try:
        return [d for d in jax.local_devices() if d.platform == "gpu"]
    except RuntimeError:  # pragma: no cover - no GPU backend
        return []


@functools.lru_cache(maxsize=None)
def device_cc() -> tuple[int, str]:
    """Compute capability of this process's CUDA devices as (major*10+minor, reason if unusable).

    One program is lowered once for all its devices, so the kernels are planned for one architecture:
    GPUs of different compute capabilities in one process get (-1, reason) and run XLA."""
    devs = _local_gpus()
    if not devs:
        return -1, "no GPU device"
    ccs = set()
    for d in devs:
        cc = getattr(d, "compute_capability", None)
        if cc is None:
            return -1, f"device {d.device_kind} reports no compute capability (not CUDA?)"
        major, minor = (int(x) for x in str(cc).split("."))
        ccs.add(major * 10 + minor)
    if len(ccs) > 1:
        names = ", ".join(f"sm_{c}" for c in sorted(ccs))
        return -1, f"this process sees GPUs of different compute capabilities ({names}); jax_tmem plans one arch per program"
    return ccs.pop(), ""


@functools.lru_cache(maxsize=None)
def device_sms() -> int:
    """The smallest SM count of this process's GPUs (0 if unknown). The plan (menu entry, K splits,
    workspace) is fixed at lowering for every device the program runs on; each launch then sizes its
    persistent grid from its own device's SM count."""
    mod, _ = _ext.load()
    if mod is None:
        return 0
    counts = [mod.cuda_device_sms(int(d.local_hardware_id)) for d in _local_gpus()]
    counts = [c for c in counts if c > 0]
    return min(counts) if counts else 0


def arch_target(cc: int) -> tuple[str, str]:
    """(target name, reason if none) for a compute capability."""
    built = _ext.build_info().get("cuda_archs", "")
    if cc == 90:
        return ("sm_90a", "") if "sm_90a" in built else ("", "the package was built without sm_90a")
    if cc in (100, 103):
        arch = "sm_100a" if cc == 100 else "sm_103a"
        return (arch, "") if arch in built else ("", f"the package was built without {arch}")
    return "", f"no jax_tmem kernels for compute capability {cc // 10}.{cc % 10} (sm_90a and sm_100a/sm_103a only)"


def split_config(config) -> tuple[int, int]:
    """The private ``config`` parameter: a menu entry (-1 = heuristic), or ``(entry, splits)`` to force
    the K splits of a split-K entry too (tests and benchmarks)."""
    if isinstance(config, tuple):
        return int(config[0]), int(config[1])
    return int(config), 0


def kernel_plan(arch: str, canon, a_dtype, config, out_dtype) -> tuple[int, str, int, int]:
    """(entry, name, K splits, f32 workspace floats) of the plan the CUDA dispatcher runs: the same C++
    code (jax_tmem/menu.h) the launcher calls, for this device's SM count. A ``config`` that is not an
    entry of ``arch``'s menu raises ValueError here, at trace time."""
    mod, _ = _ext.load()
    sms = device_sms()
    cfg, splits = split_config(config)
    try:
        c, name, s, ws = mod.kernel_choice(arch, canon.batch, canon.m, canon.n, canon.k, np.dtype(a_dtype).name,
                                           cfg, max(sms, 1), np.dtype(out_dtype).name, bool(canon.a_mn_major),
                                           splits)
    except ValueError as e:
        raise ValueError(f"jax_tmem: kernel config {config}: {e}") from None
    return int(c), name, int(s), int(ws)


def menu_entry(arch: str, canon, a_dtype, config, out_dtype="bfloat16") -> str:
    """Which compiled kernel the CUDA dispatcher will run, in words, for the decision log."""
    cfg, name, splits, ws = kernel_plan(arch, canon, a_dtype, config, out_dtype)
    sms = device_sms()
    how = ("forced" if split_config(config)[0] >= 0 else f"heuristic, {sms} SMs" if sms > 0
           else "heuristic, SM count unknown")
    extra = f", {splits} K splits, {ws * 4 / 1024:.0f} KiB workspace" if ws else ""
    return f"{name} (config {cfg}{extra}, {how})"


def lowering_plan(canon, a_dtype, config, out_dtype) -> tuple[int, int, int]:
    """(entry, splits, workspace floats) passed to the CUDA custom call: resolved here, so that the
    workspace (the call's second output) has the size the launcher needs."""
    cc, _ = device_cc()
    arch, why = arch_target(cc) if cc > 0 else ("", "no GPU")
    if not arch:
        cfg, splits = split_config(config)
        return cfg, splits, 0
    cfg, _, splits, ws = kernel_plan(arch, canon, a_dtype, config, out_dtype)
    return cfg, splits, ws


def sm100_trusted() -> bool:
    """The sm_100a/sm_103a kernels have been compiled and checked but never executed on Blackwell
    hardware, so path "auto" does not pick them unless JAX_TMEM_ENABLE_SM100=1. Path "kernel" (and the
    GPU tests) always run them."""
    return os.environ.get("JAX_TMEM_ENABLE_SM100", "0").strip().lower() in ("1", "true", "yes")


def k_major_dtypes(cc: int) -> tuple:
    """Operand dtypes the arch's tensor cores read K-major only (an MN-major one is transposed by XLA)."""
    if cc == 90:
        return FP8 + (F32,)  # wgmma: 8-bit and tf32 operands K-major only
    if cc in (100, 103):
        return (F32,)        # tcgen05: tf32 MN-major needs the 128B/32B-atom layout (not built)
    return ()


def check_sm100(canon: _canon.Canon, a_dtype, b_dtype, out_dtype, allow_tf32: bool, cc: int = 100) -> str:
    """Empty string if the sm_100a/sm_103a kernels take the problem, else why not."""
    a_dtype, b_dtype = np.dtype(a_dtype), np.dtype(b_dtype)
    if a_dtype == I8 and b_dtype == I8:
        if cc != 100:
            return "int8 x int8: tcgen05 kind::i8 exists on sm_100a only (not sm_103a)"
        return _check_common(canon, I8, I8, out_dtype, allow_tf32)
    if a_dtype == I8 or b_dtype == I8:
        return f"operand dtypes {a_dtype} x {b_dtype} (int8 multiplies int8 only)"
    if a_dtype in FP8 and b_dtype in FP8 and (canon.a_mn_major or canon.b_mn_major):
        # kind::f8f6f4 reads MN-major 8-bit operands; the sm_90 restriction does not apply.
        canon = _canon.Canon(**{**canon.__dict__, "a_mn_major": False, "b_mn_major": False})
    return _check_common(canon, a_dtype, b_dtype, out_dtype, allow_tf32)


def check_sm90(canon: _canon.Canon, a_dtype, b_dtype, out_dtype, allow_tf32: bool) -> str:
    """Empty string if the sm_90a kernels take the problem, else why not."""
    if np.dtype(a_dtype) == I8 or np.dtype(b_dtype) == I8:
        return "int8: no sm_90a integer (IGMMA) kernel yet"
    return _check_common(canon, a_dtype, b_dtype, out_dtype, allow_tf32)


def _check_common(canon: _canon.Canon, a_dtype, b_dtype, out_dtype, allow_tf32: bool) -> str:
    a_dtype, b_dtype, out_dtype = np.dtype(a_dtype), np.dtype(b_dtype), np.dtype(out_dtype)
    if out_dtype not in OUT_TYPES:
        return f"output dtype {out_dtype} (kernels write float32/bfloat16/float16)"
    if a_dtype in FP8 and b_dtype in FP8:
        if canon.a_mn_major or canon.b_mn_major:
            return "an FP8 operand is MN-major (wgmma reads 8-bit operands K-major only)"
    elif a_dtype != b_dtype or a_dtype not in (BF16, F16, F32, I8):
        return f"operand dtypes {a_dtype} x {b_dtype} (kernels: bf16 x bf16, f16 x f16, f32 x f32 as tf32, fp8 x fp8)"
    if a_dtype == F32:
        if not allow_tf32:
            return "float32 with precision HIGH/HIGHEST (the kernels would use tf32)"
        if canon.a_mn_major or canon.b_mn_major:
            return "a float32 operand is MN-major (wgmma reads tf32 operands K-major only)"
    for name, dt, mn, ld, stride, rows in (
            ("lhs", a_dtype, canon.a_mn_major, canon.lda, canon.stride_a, canon.k if canon.a_mn_major else canon.m),
            ("rhs", b_dtype, canon.b_mn_major, canon.ldb, canon.stride_b, canon.k if canon.b_mn_major else canon.n)):
        es = dt.itemsize
        if rows > 1 and (ld * es) % 16:
            return f"{name} row pitch of {ld * es} bytes is not a multiple of 16 (TMA)"
        if (stride * es) % 16:
            return f"{name} batch stride of {stride * es} bytes is not a multiple of 16 (TMA)"
    if max(canon.m, canon.n, canon.k) >= 2**31 or canon.batch >= 2**31:
        return "a dimension is >= 2^31"
    return ""
