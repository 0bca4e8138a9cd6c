"""The tcgen05 / wgmma encoders the kernels use, exposed for inspection and host-side tests.

Every function calls the C++ ``constexpr`` encoder that the kernels themselves compile
(``cpp/include/jax_tmem/desc_sm100.h``, ``desc_sm90.h``, ``tmem_plan.h``), not a Python re-implementation.
Invalid arguments raise ``ValueError`` naming the rule (e.g. "N must be a multiple of 16 for M=256").
"""

from __future__ import annotations

import numpy as np


def _ext():
    from jax_tmem._core import ext
    mod, why = ext.load()
    if mod is None:
        raise RuntimeError(f"jax_tmem.isa needs the C++ extension: {why}")
    return mod


def _name(dtype) -> str:
    if isinstance(dtype, str):
        return dtype
    return np.dtype(dtype).name


def instr_desc(kind: str, a_dtype, b_dtype, acc_dtype, m: int, n: int, *, a_major: str = "K", b_major: str = "K",
               sfa_id: int = 0, sfb_id: int = 0, scale_dtype=None) -> int:
    """The 32-bit tcgen05.mma instruction descriptor (PTX ISA 9.7.16.4.2).

    kind: "f16", "tf32", "f8f6f4", "i8", "mxf8f6f4", "mxf4" or "mxf4nvf4". Dtypes by their jnp names
    ("bfloat16", "float8_e4m3fn", "float4_e2m1fn", "float8_e8m0fnu", ...). m = 256 means the CTA-pair
    (cta_group::2) form. Majors "K" or "MN". sfa_id/sfb_id/scale_dtype for block-scaled kinds only.
    """
    return int(_ext().isa_instr_desc(kind, _name(a_dtype), _name(b_dtype), _name(acc_dtype), int(m), int(n),
                                     a_major, b_major, int(sfa_id), int(sfb_id),
                                     None if scale_dtype is None else _name(scale_dtype)))


def smem_desc(start_addr: int, lbo: int, sbo: int, swizzle_bytes: int, *, arch: str = "sm100",
              base_offset: int = 0) -> int:
    """The 64-bit shared-memory matrix descriptor: tcgen05 (arch="sm100", with the fixed bit 46 and
    3-bit layout codes) or wgmma (arch="sm90"). swizzle_bytes in {0, 32, 64, 128}; byte values."""
    return int(_ext().isa_smem_desc(int(start_addr), int(lbo), int(sbo), int(swizzle_bytes), arch, int(base_offset)))


def tmem_plan(block_n: int, acc_stages: int = 2, *, block_m: int = 128, k_tile: int = 0, sf_vec: int = 0,
              sf_stages: int = 0, ctas_per_sm: int = 1) -> dict:
    """The TMEM column layout of a kernel config: accumulator buffers (double-buffered by default) and,
    for block-scaled kinds (sf_vec = 32 for MX, 16 for NVFP4), the scale-factor regions per stage.
    Returns {acc_cols, acc_offsets, sfa_cols, sfb_cols, sfa_offsets, sfb_offsets, used_cols, alloc_cols,
    ctas_per_sm}; raises ValueError if the plan breaks a rule (e.g. more than 512 columns)."""
    return dict(_ext().isa_tmem_plan(int(block_n), int(acc_stages), int(block_m), int(k_tile), int(sf_vec),
                                     int(sf_stages), int(ctas_per_sm)))


def kernel_menu(arch: str) -> list[dict]:
    """Every kernel configuration of ``arch`` ("sm_90a", "sm_100a", "sm_103a"), from the C++ tables the
    dispatcher instantiates (``cpp/include/jax_tmem/sm90_configs.def``, ``sm100_configs.def``):
    ``[{"config", "entry", "name", "block_m", "block_n", "stages", "cluster_m", "cluster_n", "schedule", "epilogue",
    "split", "swap_ab", "split_k", "heuristic", "candidate", "built", "not_built"}]`` (``cluster_m`` / ``cluster_n``:
    CTAs per thread-block cluster along M sharing B / along N sharing A, by TMA multicast). ``config`` is what
    :func:`kernel_plan` takes to force an entry; ``heuristic`` entries can be chosen by the heuristic and are always
    compiled, ``candidate`` ones are always compiled but only forced (a plan still to be measured against the
    heuristic's), the others only with ``-C cmake.define.JAX_TMEM_CONFIGS=all`` (``built`` says whether this build
    has it)."""
    return [dict(e) for e in _ext().kernel_menu(arch)]


def block_scaled_menu(arch: str) -> list[dict]:
    """The block-scaled (MX) kernel configurations of ``arch`` from the table the dispatcher instantiates
    (``cpp/include/jax_tmem/sm90_block_scaled_configs.def``): ``[{"config", "block_m", "block_n", "stages",
    "schedule", "name"}]``; ``config`` is what ``scaled_gemm.scaled_matmul_ffi(..., config=)`` takes to force
    one. Empty for sm_100a / sm_103a, whose block-scaled kernels are entries of :func:`kernel_menu`."""
    return [dict(e) for e in _ext().block_scaled_menu(arch)]


def kernel_plan(arch: str, m: int, n: int, k: int, *, batch: int = 1, a_dtype="bfloat16", config: int = -1,
                num_sms: int = 132, out_dtype="bfloat16", a_mn_major: bool = False, splits: int = 0,
                b_mn_major: bool = False, b_dtype=None, act_grad: str | None = None) -> dict:
    """The plan the CUDA dispatcher of ``arch`` ("sm_90a", "sm_100a", "sm_103a") runs for an M x N x K
    problem on a GPU with ``num_sms`` SMs, from the same C++ code (``cpp/include/jax_tmem/menu.h``) the
    launcher calls: ``{"config", "name", "splits", "workspace_floats"}``. ``config`` >= 0 forces a menu
    entry (ValueError if the arch has no such entry), ``splits`` > 0 the K splits of a split-K entry
    (of a dense sm_90a entry: the CTAs that share its last, partial wave along K, plus ``num_sms`` x the
    whole waves before it that they share too (menu::tail_share), which the heuristic also plans where
    menu::tail_split_default says so); ``splits`` < -1: -splits K splits of a split-K entry summed inside
    the kernel, no reduce pass (sm_90a, every work unit on an SM at once, else ValueError; the plan's
    ``splits`` is then negative too: menu::k_splits); ``splits`` <= -100: a swap-AB entry's last wave shared out
    along K by -splits - 100 (CTAs plus ``num_sms`` x whole waves, as above; menu::swap_tail, one K split; where
    the entry cannot or the tiles leave no partial wave, the plan's ``splits`` is 1).
    ``out_dtype`` matters where the output rows must be a multiple of 16 bytes (the TMA-store epilogue),
    ``a_dtype`` for the K blocks of a split, ``a_mn_major`` for swap-AB (which needs a K-major lhs),
    ``b_mn_major`` for which swap-AB entries read the weight (an MN-major 8-bit one: the 128-row entries),
    ``b_dtype`` (default ``a_dtype``) for which decode entries read it: a forced decode entry that cannot
    read the operands raises ValueError (C++ ``menu::mma_decode_reads``). ``act_grad``: an activation ("relu",
    "gelu_tanh", ...) whose derivative epilogue the call asks for (``dot_general(..., input_activation=)``'s
    backward); ``"act_grad_in_kernel"`` says whether the kernel runs it (C++ ``menu::act_grad_in_kernel``) or
    the handler's second pass after the product."""
    from jax_tmem.ops.epilogue import ACT_GRAD_FLAG, ACTIVATIONS
    if act_grad is not None and act_grad not in ACTIVATIONS:
        raise ValueError(f"act_grad must be None or one of {sorted(k for k in ACTIVATIONS if k)}, got {act_grad!r}")
    code = ACTIVATIONS[act_grad] | ACT_GRAD_FLAG if act_grad else 0
    cfg, name, s, ws, in_kernel = _ext().kernel_choice(
        arch, int(batch), int(m), int(n), int(k), _name(a_dtype), int(config), int(num_sms), _name(out_dtype),
        bool(a_mn_major), int(splits), bool(b_mn_major), "" if b_dtype is None else _name(b_dtype), code)
    return {"config": int(cfg), "name": name, "splits": int(s), "workspace_floats": int(ws),
            "act_grad_in_kernel": bool(in_kernel)}


def kernel_choice(arch: str, m: int, n: int, k: int, *, batch: int = 1, a_dtype="bfloat16", config: int = -1,
                  num_sms: int = 132, out_dtype="bfloat16", a_mn_major: bool = False) -> tuple[int, str]:
    """The kernel-menu entry ``(config number, name)`` of :func:`kernel_plan`."""
    plan = kernel_plan(arch, m, n, k, batch=batch, a_dtype=a_dtype, config=config, num_sms=num_sms,
                       out_dtype=out_dtype, a_mn_major=a_mn_major)
    return plan["config"], plan["name"]


def entry_reads(arch: str, config: int, a_dtype, b_dtype, *, a_mn_major: bool = False, b_mn_major: bool = False) -> str:
    """Why menu entry ``config`` of ``arch`` cannot be forced on an lhs of ``a_dtype`` and an rhs of ``b_dtype``
    with this majorness, or "" when it can: no kernel family for them in this build (``cpp/src/instances.def``;
    a swap-AB entry reads the rhs as its A operand), a family that runs decode problems only, or the entry's
    own operand rule (a decode entry: C++ ``menu::mma_decode_reads``), asked from the same C++ code that refuses
    such a forced call at trace time."""
    from jax_tmem._core import arch as _arch
    entry = next((e for e in kernel_menu(arch) if e["config"] == config), None)
    if entry is None:
        return f"not an {arch} menu entry: {config}"
    a, b = _name(a_dtype), _name(b_dtype)
    if entry["swap_ab"] and a_mn_major:
        return f"entry {config} is swap-AB: it reads the lhs as its narrow wgmma B operand, K-major only"
    fam = (b, a, bool(b_mn_major), False) if entry["swap_ab"] else (a, b, bool(a_mn_major), bool(b_mn_major))
    if fam not in _arch.families(arch):
        major = lambda mn: "MN" if mn else "K"
        return f"no {arch} kernel family {fam[0]} ({major(fam[2])}-major) x {fam[1]} ({major(fam[3])}-major) in this build"
    if _arch.swap_only(arch, fam) and not entry["swap_ab"] and entry["split"] != "decode":
        return f"the {arch} family {fam} runs the decode and swap-AB entries only, not entry {config}"
    try:
        kernel_plan(arch, 64, 256, 256, a_dtype=a, b_dtype=b, config=config, a_mn_major=a_mn_major,
                    b_mn_major=b_mn_major)
    except ValueError as e:
        return str(e)
    return ""
