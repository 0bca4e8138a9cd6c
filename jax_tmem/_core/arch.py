"""What the CUDA kernels can take, per architecture: the GPUs of this process, the arch they need, the
plan the dispatcher will run (asked from the C++ menu), and whether a problem has a compiled kernel
family (the C++ family lists, through the extension).

The C++ handler re-validates everything (and returns an ffi::Error instead of crashing); this module
exists so that unsupported problems are routed to XLA at trace time, with a reason, before lowering.
"""

from __future__ import annotations

import functools
import os

import jax
import jax.numpy as jnp
import numpy as np

from jax_tmem._core import canon as _canon, dtypes as _dtypes, ext as _ext

F32, I8 = np.dtype("float32"), np.dtype("int8")
BF16, F16 = np.dtype("bfloat16"), np.dtype("float16")
FP8 = _dtypes.FP8_DTYPES          # from dtypes.def
OUT_TYPES = _dtypes.OUTPUT_DTYPES  # what the kernels write


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
    the K splits of a split-K entry too (tests and benchmarks; ``-splits``: summed inside the kernel, no
    reduce pass, sm_90a, one unit per CTA, in waves beyond what the GPU holds: menu::k_splits)."""
    if isinstance(config, tuple):
        return int(config[0]), int(config[1])
    return int(config), 0


def kernel_plan(arch: str, canon, a_dtype, config, out_dtype, b_dtype=None) -> tuple[int, str, int, int]:
    """(entry, name, K splits (of a dense sm_90a entry: the CTAs sharing its last wave, plus SMs x the
    whole waves shared with it), f32 workspace floats) of the plan the CUDA dispatcher runs: the same
    C++ code (jax_tmem/menu.h) the launcher calls, for this device's SM count. A ``config`` that is not
    an entry of ``arch``'s menu raises ValueError here, at trace time. ``b_dtype``: the rhs's, where it differs
    (16-bit x fp8: only the decode entries read the mix)."""
    c, name, s, ws, _ = _choice(arch, canon, a_dtype, config, out_dtype, b_dtype)
    return c, name, s, ws


def _choice(arch: str, canon, a_dtype, config, out_dtype, b_dtype, activation: int = 0) -> tuple:
    mod, _ = _ext.load()
    cfg, splits = split_config(config)
    try:
        c, name, s, ws, act_grad = mod.kernel_choice(
            arch, canon.batch, canon.m, canon.n, canon.k, np.dtype(a_dtype).name, cfg, max(device_sms(), 1),
            np.dtype(out_dtype).name, bool(canon.a_mn_major), splits, bool(canon.b_mn_major),
            np.dtype(b_dtype).name if b_dtype is not None else "", int(activation))
    except ValueError as e:
        raise ValueError(f"jax_tmem: kernel config {config}: {e}") from None
    entry = menu(arch)[int(c)]
    if not entry["built"]:  # a forced sweep-only entry (the heuristic chooses built ones only)
        raise ValueError(f"jax_tmem: {entry['not_built']}")
    return int(c), name, int(s), int(ws), bool(act_grad)


@functools.lru_cache(maxsize=None)
def menu(arch: str) -> dict:
    """``arch``'s kernel configurations by id, from the C++ tables the dispatcher instantiates
    (cpp/include/jax_tmem/sm90_configs.def, sm100_configs.def); see jax_tmem.isa.kernel_menu."""
    mod, _ = _ext.load()
    return {int(e["config"]): dict(e) for e in mod.kernel_menu(arch)}


def _splits_in_words(splits: int, split_k: bool, sms: int) -> str:
    """A plan's ``splits`` for the decision log: K splits of a split-K entry (< 0: -splits of them summed
    inside the kernel, menu::k_splits); for a dense entry the CTAs sharing its last wave plus ``sms`` x the
    whole waves they share too (menu::tail_share); a swap-AB entry's last wave shared the same way
    (menu::swap_tail: -(100 + that share), one K split)."""
    mod, _ = _ext.load()
    ctas, waves, swap = mod.tail_share(splits, sms)
    if split_k and not swap:
        return f"{-splits} K splits summed in the kernel" if splits < 0 else f"{splits} K splits"
    also = f" and the {waves} whole wave{'s' if waves > 1 else ''} before it" if waves else ""
    return f"{ctas} CTAs sharing the last wave{also} along K" + (", one K split" if swap else "")


def menu_entry(arch: str, canon, a_dtype, config, out_dtype="bfloat16", b_dtype=None) -> str:
    """Which compiled kernel the CUDA dispatcher will run, in words, for the decision log."""
    cfg, name, splits, ws = kernel_plan(arch, canon, a_dtype, config, out_dtype, b_dtype)
    sms = device_sms()
    how = ("forced" if split_config(config)[0] >= 0 else f"heuristic, {sms} SMs" if sms > 0
           else "heuristic, SM count unknown")
    entry = menu(arch)[cfg]
    extra = (f", {_splits_in_words(splits, entry['split'] != 'none', sms)}, {ws * 4 / 1024:.0f} KiB workspace" if ws
             else f", {_splits_in_words(splits, True, sms)}, no workspace" if splits < -1 else "")
    return f"{name} (config {cfg}{extra}, {how})"


def lowering_plan(canon, a_dtype, config, out_dtype, b_dtype=None, activation: int = 0) -> tuple[int, int, int, bool]:
    """(entry, splits, workspace floats, derivative in the kernel) passed to the CUDA custom call: resolved here,
    so that the workspace (the call's second output) has the size the launcher needs. ``activation``: the custom
    call's attribute (with the act_grad bit); the fourth field says whether this device's kernel of the plan runs
    that derivative epilogue (C++ menu::act_grad_in_kernel, the rule the CUDA handler follows; where it does not,
    the handler multiplies in a second pass after the product)."""
    cc, _ = device_cc()
    arch = arch_target(cc)[0] if cc > 0 else ""
    if not arch:
        cfg, splits = split_config(config)
        return cfg, splits, 0, False
    cfg, _, splits, ws, act_grad = _choice(arch, canon, a_dtype, config, out_dtype, b_dtype, activation)
    return cfg, splits, ws, act_grad


def sm100_trusted() -> bool:
    """The sm_100a/sm_103a kernels have been compiled and checked but never executed on Blackwell
    hardware, so path "auto" does not pick them unless JAX_TMEM_ENABLE_SM100=1. Path "kernel" (and the
    GPU tests) always run them."""
    return os.environ.get("JAX_TMEM_ENABLE_SM100", "0").strip().lower() in ("1", "true", "yes")


@functools.lru_cache(maxsize=None)
def families(arch: str) -> frozenset:
    """The kernel families compiled for ``arch`` (and runnable there), as the C++ dispatcher knows them
    (cpp/src/instances.def): {(A dtype name, B dtype name, A MN-major, B MN-major)}."""
    return frozenset(f[:4] for f in _families_raw(arch))


@functools.lru_cache(maxsize=None)
def _families_raw(arch: str) -> tuple:
    mod, _ = _ext.load()
    if mod is None:
        return ()
    return tuple((a, b, bool(am), bool(bm), bool(swap)) for a, b, am, bm, swap in mod.kernel_families(arch))


def swap_only(arch: str, fam) -> bool:
    """The family runs decode problems only (C++ menu::sm90_decode_only_family: sm_90a's 8-bit families with
    an MN-major operand: the swap-AB entries', whose A, the problem's weight, is transposed in shared
    memory, and the decode entries' (mma.sync and wgmma), which read an MN-major weight themselves; and the
    16-bit x fp8 families, whose fp8 weight only the decode entries read, widened on chip)."""
    return tuple(fam[:4]) + (True,) in _families_raw(arch)


def decode_reads(arch: str, canon, a_dtype, b_dtype, config=-1) -> bool:
    """True when ``arch``'s decode-only families read the problem as it is: an MN-major 8-bit weight (an
    fp8 (K, N) weight as Flax stores it) or 16-bit activations x an fp8 weight stored either way. Needs a
    K-major lhs, the launchers' legality (16-byte row pitches), and the C++ plan for the problem
    (cpp/include/jax_tmem/menu.h, menu_decode.h) on a swap-AB entry with a swap-only family for (weight,
    activation) (an fp8 (K, N) weight, M <= 256 on sm_90a), or on a decode entry with one for (activation,
    weight) (fp8 weights: M <= 64). ``config``: a forced menu entry (or (entry, splits)) instead of the plan."""
    a_name, b_name = np.dtype(a_dtype).name, np.dtype(b_dtype).name
    swapped, direct = (b_name, a_name, True, False), (a_name, b_name, False, bool(canon.b_mn_major))
    use_swapped = bool(canon.b_mn_major) and swap_only(arch, swapped)
    if canon.a_mn_major or not (use_swapped or swap_only(arch, direct)):
        return False
    mod, _ = _ext.load()
    if mod.kernel_legality(a_name, b_name, canon.batch, canon.m, canon.n, canon.k,
                           False, bool(canon.b_mn_major), canon.lda, canon.ldb, canon.stride_a, canon.stride_b):
        return False  # e.g. a row pitch TMA cannot take: transposed to K-major (or widened) first
    forced, splits = split_config(config)
    try:
        cfg = mod.kernel_choice(arch, int(canon.batch), int(canon.m), int(canon.n), int(canon.k), a_name, forced,
                                device_sms() or 132, "bfloat16", False, splits if forced >= 0 else 0,
                                bool(canon.b_mn_major), b_name)[0]
    except ValueError:
        return False  # a forced entry that does not read these operands
    entry = menu(arch)[int(cfg)]  # (132 SMs where there is no GPU)
    if entry["split"] == "decode":
        return swap_only(arch, direct)
    return bool(entry["swap_ab"]) and use_swapped


def reads_mn_weight(arch: str, canon, a_dtype, b_dtype) -> bool:
    """True when ``arch``'s decode kernels read the rhs in place although it is an MN-major 8-bit weight
    (an fp8 (K, N) weight as Flax stores it): :func:`decode_reads` for an MN-major rhs."""
    return bool(canon.b_mn_major) and decode_reads(arch, canon, a_dtype, b_dtype)


def mixed_pair(a_dtype, b_dtype) -> bool:
    """16-bit activations x an fp8 weight (C++ menu::mixed_decode_pair)."""
    return np.dtype(a_dtype) in (BF16, F16) and np.dtype(b_dtype) in FP8


def k_major_dtypes(arch: str) -> tuple:
    """Operand dtypes that ``arch``'s kernels read K-major only (an MN-major one is transposed by XLA
    first, except a decode weight that reads_mn_weight): those with a family K-major and none MN-major
    but swap-only ones. wgmma: fp8 and tf32; tcgen05 as built: tf32."""
    fams = {f for f in families(arch) if not swap_only(arch, f)}
    names = {f[0] for f in fams} | {f[1] for f in fams}
    mn = {f[0] for f in fams if f[2]} | {f[1] for f in fams if f[3]}
    return tuple(_dtypes.by_name(n).dtype for n in sorted(names - mn))


def check(arch: str, canon: _canon.Canon, a_dtype, b_dtype, out_dtype, allow_tf32: bool, config=-1) -> str:
    """Empty string if ``arch``'s kernels take the problem, else why not: its output dtype, a compiled
    family for its operand types and majorness (from the C++ lists), tf32 allowed by the precision,
    then the launchers' own legality check (16-byte row pitches and batch strides for TMA, dimensions
    < 2^31), asked from C++."""
    a_dtype, b_dtype, out_dtype = np.dtype(a_dtype), np.dtype(b_dtype), np.dtype(out_dtype)
    if out_dtype not in OUT_TYPES:
        return f"output dtype {out_dtype} (kernels write {', '.join(d.name for d in OUT_TYPES)})"
    if a_dtype == F32 and b_dtype == F32 and not allow_tf32:
        return "float32 with precision HIGH/HIGHEST (the kernels would use tf32)"
    fams = {f for f in families(arch) if not swap_only(arch, f)}
    key = (a_dtype.name, b_dtype.name, bool(canon.a_mn_major), bool(canon.b_mn_major))
    if key not in fams and not decode_reads(arch, canon, a_dtype, b_dtype, config):
        side = lambda n, mn: f"{n} ({'MN' if mn else 'K'}-major)"
        pairs = sorted({f"{f[0]} x {f[1]}" for f in fams})
        if swap_only(arch, key) and not key[2]:  # (a K-major lhs: the decode entries' activations)
            return (f"the {arch} kernels read {side(key[0], key[2])} x {side(key[1], key[3])} in their decode entries "
                    f"only, and the plan (cpp/include/jax_tmem/menu_decode.h) takes none of them for "
                    f"{canon.m}x{canon.n}x{canon.k}")
        if any(f[:2] == key[:2] for f in fams):
            return (f"no {arch} kernel reads {side(key[0], key[2])} x {side(key[1], key[3])} "
                    f"(compiled majorness: {sorted((('MN' if f[2] else 'K'), ('MN' if f[3] else 'K')) for f in fams if f[:2] == key[:2])})")
        return f"no {arch} kernel for {key[0]} x {key[1]} (compiled: {', '.join(pairs)})"
    mod, _ = _ext.load()  # the launchers' own check (cpp/include/jax_tmem/legality.h)
    return mod.kernel_legality(a_dtype.name, b_dtype.name, canon.batch, canon.m, canon.n, canon.k,
                               bool(canon.a_mn_major), bool(canon.b_mn_major), canon.lda, canon.ldb,
                               canon.stride_a, canon.stride_b)


def common_dtype(a, b) -> np.dtype:
    """jnp promotion, except that fp8 (which JAX refuses to promote implicitly) joins the wider type,
    and an fp8 x fp8 mix computes in bfloat16 (exact for the products)."""
    a, b = np.dtype(a), np.dtype(b)
    if a == b:
        return a
    if a in FP8 and b in FP8:
        return np.dtype("bfloat16")
    if a in FP8:
        return b
    if b in FP8:
        return a
    return np.dtype(jnp.promote_types(a, b))
