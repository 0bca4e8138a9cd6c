"""The GEMM op: one dot_general with a fused epilogue.

    out = act(alpha * scale * dot_general(lhs, rhs, dn) + bias) + c   (or its derivative form: ops/epilogue.py)

(``scale``: an optional traced float32 of shape (1,), e.g. the product of per-tensor FP8 scales.)

Here, in order: the ``jax_tmem_gemm`` primitive and its abstract evaluation; its lowerings, chosen per
platform from the ``path`` decided at trace time: the XLA FFI custom call ``jax_tmem_gemm`` (CUDA
kernels, or the C++ CPU reference handler) or plain XLA ops (the semantics every kernel matches); its
batching rule, which folds a vmapped axis into the batch (both operands batched, or one of them
broadcast over the batch without a copy) so vmap never loops; the path decision (``bind_gemm``); and
the differentiable entry ``gemm``, a ``custom_vjp`` whose backward pass is two more GEMMs through the
same path (dA and dB read the saved operands with flipped majorness; nothing is transposed in memory
for the common layouts). The primitive itself has no JVP.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax._src import dispatch as _dispatch
from jax.extend.core import Primitive
from jax.interpreters import batching, mlir

from jax_tmem._core import arch as _arch, canon as _canon, config as _config, ext as _ext
from jax_tmem.ops import partition as _partition, transpose as _transpose
from jax_tmem.ops.epilogue import Epilogue, activation_code, apply_activation, finish_epilogue

gemm_p = Primitive("jax_tmem_gemm")

# Platforms whose handlers run Epilogue.act_grad (CUDA: in the kernel or a second pass); elsewhere XLA multiplies.
ACT_GRAD_IN_KERNEL = {"cpu": True, "cuda": True}


# ---- abstract evaluation ----------------------------------------------------------------------

def _abstract_eval(lhs, rhs, *rest, dimension_numbers, out_dtype, **_):
    shape = _canon.output_shape(lhs.shape, rhs.shape, dimension_numbers)
    return jax.core.ShapedArray(shape, np.dtype(out_dtype))


gemm_p.def_abstract_eval(_abstract_eval)


@functools.lru_cache(maxsize=256)
def _jitted(items):
    params = dict(items)
    return jax.jit(lambda *a: gemm_p.bind(*a, **params))


def _impl(*args, **params):
    # Eager calls: one cached jitted wrapper per parameter set (params are hashable).
    return _jitted(tuple(sorted(params.items())))(*args)


gemm_p.def_impl(_impl)


# ---- the XLA lowering (fallback, and the semantics every kernel matches) ----------------------

def xla_reference(lhs, rhs, *rest, dimension_numbers, out_dtype, epilogue: Epilogue, allow_tf32=True):
    """The primitive written with lax ops; accumulates in f32."""
    (lc, rc), (lb, rb) = dimension_numbers
    lhs_only = [l for l, r in zip(lb, rb) if r is None]
    rhs_only = [r for l, r in zip(lb, rb) if l is None]
    both_l = tuple(l for l, r in zip(lb, rb) if l is not None and r is not None)
    both_r = tuple(r for l, r in zip(lb, rb) if l is not None and r is not None)
    acc_t = jnp.float32
    fp8 = (np.dtype("float8_e4m3fn"), np.dtype("float8_e5m2"))
    if np.dtype(lhs.dtype) in fp8 or np.dtype(rhs.dtype) in fp8:
        # The fp8 values must be what is multiplied: when they are quantized in the same program (the "fp8"
        # recipe), XLA's excess-precision simplification may fold x -> f8 -> bf16 into x -> bf16.
        lhs, rhs = lax.optimization_barrier((lhs, rhs))
    lhs_c, rhs_c = lhs, rhs
    if lhs.dtype != rhs.dtype:
        if np.dtype(lhs.dtype) in fp8 or np.dtype(rhs.dtype) in fp8:
            common = jnp.bfloat16 if (np.dtype(lhs.dtype) in fp8 and np.dtype(rhs.dtype) in fp8) else \
                (rhs.dtype if np.dtype(lhs.dtype) in fp8 else lhs.dtype)
        else:
            common = jnp.promote_types(lhs.dtype, rhs.dtype)
        lhs_c, rhs_c = lhs.astype(common), rhs.astype(common)
    precision = lax.Precision.DEFAULT if allow_tf32 else lax.Precision.HIGHEST
    lax_dn = ((tuple(lc), tuple(rc)), (both_l, both_r))
    osh = _partition.explicit_contraction_sharding(lhs, rhs, lax_dn)
    # 16-bit x fp8 with a plain epilogue and the 16-bit output: the dot writes it directly (its f32 sums rounded
    # once, as the f32 product's cast would), so XLA's GEMM that widens the fp8 operand writes it too (at one
    # token, the f32 output and its cast measured ~3 us more per GEMM than lax.dot_general, H200 2026-11-27).
    plain = (epilogue.alpha == 1.0 and epilogue.activation is None and not epilogue.has_bias and not epilogue.has_c
             and not epilogue.has_scale)
    if plain and (_arch.mixed_pair(lhs.dtype, rhs.dtype) or _arch.mixed_pair(rhs.dtype, lhs.dtype)) and \
            np.dtype(lhs_c.dtype) == np.dtype(out_dtype):
        acc_t = np.dtype(out_dtype)
    if jnp.issubdtype(lhs_c.dtype, jnp.integer):  # int8 x int8: exact int32 accumulation, then f32
        y = lax.dot_general(lhs_c, rhs_c, lax_dn, preferred_element_type=jnp.int32, out_sharding=osh).astype(acc_t)
    else:
        def dot(a, b):
            return lax.dot_general(a, b, lax_dn, precision=precision, preferred_element_type=acc_t, out_sharding=osh)
        if np.dtype(lhs_c.dtype) in (np.dtype(jnp.bfloat16), np.dtype(jnp.float16)) and np.dtype(acc_t) == np.float32:
            # XLA:CPU's dot thunk refuses some 16-bit x 16-bit -> float32 dots (seen in eager backward passes with a
            # 3-D operand: "Unsupported element type for DotThunk::Execute: BF16 x BF16 = F32"): on the CPU the
            # operands are widened to float32 first (exact; the same f32 sums).
            f32 = lambda a, b: dot(a.astype(jnp.float32), b.astype(jnp.float32))
            y = lax.platform_dependent(lhs_c, rhs_c, cpu=f32, default=dot)
        else:
            y = dot(lhs_c, rhs_c)
    # lax order: [both batch] [lhs free incl. lhs-only batch] [rhs free incl. rhs-only batch];
    # ours: batch dims in dimension-number order, then lhs free, then rhs free.
    lfree = [d for d in range(lhs.ndim) if d not in lc and d not in both_l]
    rfree = [d for d in range(rhs.ndim) if d not in rc and d not in both_r]
    lax_axes = [("b", i) for i in range(len(both_l))] + [("l", d) for d in lfree] + [("r", d) for d in rfree]
    want, bi = [], 0
    for l, r in zip(lb, rb):
        if l is not None and r is not None:
            want.append(("b", bi)); bi += 1
        elif r is None:
            want.append(("l", l))
        else:
            want.append(("r", r))
    want += [("l", d) for d in lfree if d not in lhs_only] + [("r", d) for d in rfree if d not in rhs_only]
    perm = [lax_axes.index(a) for a in want]
    if perm != list(range(len(perm))):
        y = jnp.transpose(y, perm)
    y = y * jnp.float32(epilogue.alpha) if epilogue.alpha != 1.0 else y
    rest = list(rest)  # in role order: bias, c, scale
    bias = rest.pop(0) if epilogue.has_bias else None
    c = rest.pop(0) if epilogue.has_c else None
    if epilogue.has_scale:
        y = y * rest.pop(0).astype(acc_t).reshape(())
    if bias is not None:
        nshape = tuple(rhs.shape[d] for d in rfree if d not in rhs_only)
        y = y + bias.astype(acc_t).reshape(nshape)
    return finish_epilogue(y, c, epilogue).astype(out_dtype)


def _xla_lowering(ctx, *args, dimension_numbers, out_dtype, epilogue, allow_tf32, **_):
    fn = lambda *a: xla_reference(*a, dimension_numbers=dimension_numbers, out_dtype=out_dtype,
                                  epilogue=epilogue, allow_tf32=allow_tf32)
    return mlir.lower_fun(fn, multiple_results=False)(ctx, *args)


# ---- the FFI lowering -------------------------------------------------------------------------

def _ffi_call(*args, dimension_numbers, out_dtype, epilogue: Epilogue, config, canon: _canon.Canon, platform,
              a_dtype, b_dtype, problem=""):
    # The CUDA plan (menu entry, K splits, workspace) is resolved now, with the launcher's own C++ code:
    # split-K / swap-AB plans need an f32 workspace, which XLA allocates as the call's second output
    # (so the handler never allocates and stays command-buffer compatible).
    if platform == "cuda":
        cfg, splits, ws, in_kernel = _arch.lowering_plan(canon, a_dtype, config, out_dtype, b_dtype,
                                                         activation_code(epilogue))
        if epilogue.act_grad:  # where the handler runs the derivative (C++ menu::act_grad_in_kernel), logged
            _config.record(_config.Decision("gemm act_grad", problem, "kernel", *(
                (f"in the epilogue of config {cfg}", "c through the output boxes, act' under the next tile's MMAs")
                if in_kernel
                else (f"config {cfg}, then a second pass", "in the kernel: bf16 relu / silu / gelu_tanh on sm_90a's "
                      "20 / 22 only"))))
    else:
        (cfg, splits), ws = _arch.split_config(config), 0
    out_types = (jax.ShapeDtypeStruct(canon.out_shape, np.dtype(out_dtype)),
                 jax.ShapeDtypeStruct((max(ws, 1),), np.float32))
    roles = ["a", "b"] + ["bias"] * epilogue.has_bias + ["c"] * epilogue.has_c + ["scale"] * epilogue.has_scale
    # c accumulates in place, but not for act_grad (its second pass, cpp act_grad_pass, reads c after the product).
    aliases = {roles.index("c"): 0} if epilogue.has_c and not epilogue.act_grad else None
    call = jax.ffi.ffi_call("jax_tmem_gemm", out_types, input_output_aliases=aliases)
    attrs = _ext.gemm_attrs(roles, **canon.attrs(), activation=activation_code(epilogue),
                            alpha=epilogue.alpha, config=cfg, splits=splits)
    out, _workspace = call(*args, **attrs)
    return out


def _make_lowering(platform: str):
    def rule(ctx, *args, dimension_numbers, out_dtype, epilogue, path, requested, problem, allow_tf32, config,
             local=False):
        if path == "kernel":
            ok, why = _ext.ensure_registered(platform)
            if not ok:  # decided at trace time for another platform; never silent
                _config.record(_config.Decision("gemm", problem, "xla", "lax.dot_general",
                                                f"lowering for {platform}: {why}"))
            elif not local and _partition.wanted(ctx):  # several devices: partition like lax.dot_general
                fn = _partition.wrapped(dimension_numbers, np.dtype(out_dtype), epilogue, allow_tf32, config,
                                        tuple(tuple(a.shape) for a in ctx.avals_in[:2]), _local_gemm, finish_epilogue,
                                        _partition.explicit_mesh(ctx))
                return mlir.lower_fun(lambda *a: fn(*a), multiple_results=False)(ctx, *args)
            elif epilogue.act_grad and not ACT_GRAD_IN_KERNEL.get(platform, False):
                # The kernel writes the product in the output type and XLA multiplies, as the unfused program does
                # (one more rounding than the fused epilogue; no float32 intermediate, which would cost more than
                # not fusing at all).
                _config.record(_config.Decision("gemm act_grad", problem, "xla", "the product, then XLA's multiply",
                                                f"the {platform} kernels have no activation-derivative epilogue yet"))
                return mlir.lower_fun(functools.partial(_act_grad_unfused, dimension_numbers=dimension_numbers,
                                                        out_dtype=out_dtype, epilogue=epilogue, problem=problem,
                                                        allow_tf32=allow_tf32, config=config),
                                      multiple_results=False)(ctx, *args)
            else:
                lhs_aval, rhs_aval = ctx.avals_in[0], ctx.avals_in[1]
                canon = _canon.canonicalize(lhs_aval.shape, rhs_aval.shape, dimension_numbers)
                fn = lambda *a: _ffi_call(*a, dimension_numbers=dimension_numbers, out_dtype=out_dtype,
                                          epilogue=epilogue, config=config, canon=canon, platform=platform,
                                          a_dtype=lhs_aval.dtype, b_dtype=rhs_aval.dtype, problem=problem)
                return mlir.lower_fun(fn, multiple_results=False)(ctx, *args)
        return _xla_lowering(ctx, *args, dimension_numbers=dimension_numbers, out_dtype=out_dtype,
                             epilogue=epilogue, allow_tf32=allow_tf32)
    return rule


def _act_grad_unfused(lhs, rhs, *rest, dimension_numbers, out_dtype, epilogue, problem, allow_tf32, config):
    """An ``act_grad`` GEMM as the kernel's product in the output type (alpha, scale and bias fused) and XLA's
    multiply by the derivative (in float32, rounded once more)."""
    rest = list(rest)  # role order: bias, c, scale
    bias = rest.pop(0) if epilogue.has_bias else None
    c = rest.pop(0)
    scale = rest.pop(0) if epilogue.has_scale else None
    epi = Epilogue(alpha=epilogue.alpha, has_bias=bias is not None, has_scale=scale is not None)
    y = gemm_p.bind(lhs, rhs, *[x for x in (bias, scale) if x is not None], dimension_numbers=dimension_numbers,
                    out_dtype=np.dtype(out_dtype), epilogue=epi, path="kernel", requested="prefer", problem=problem,
                    allow_tf32=allow_tf32, config=config, local=True)
    return finish_epilogue(y.astype(jnp.float32), c, epilogue).astype(out_dtype)


def _local_gemm(*args, dn, out_dtype, epilogue, allow_tf32, config):
    """One device's GEMM inside a partitioned program: the path decided again for the local shapes."""
    a, b = args[0], args[1]
    path, problem = _decide(a.shape, b.shape, a.dtype, b.dtype, dn, out_dtype, "prefer", allow_tf32, config)
    return gemm_p.bind(*args, dimension_numbers=dn, out_dtype=np.dtype(out_dtype), epilogue=epilogue, path=path,
                       requested="prefer", problem=problem, allow_tf32=allow_tf32, config=config, local=True)


# The kernel-path lowering of a multi-device program goes through custom_partitioning (ops/partition.py),
# whose lowering needs the program's devices: JAX passes them to lowering rules only for the primitives of
# this registry.
_dispatch.prim_requires_devices_during_lowering.add(gemm_p)

mlir.register_lowering(gemm_p, _make_lowering("cpu"), platform="cpu")
mlir.register_lowering(gemm_p, _make_lowering("cuda"), platform="cuda")
mlir.register_lowering(gemm_p, _xla_lowering)  # every other platform


# ---- batching ---------------------------------------------------------------------------------

def _at_front(x, bdim, size):
    """x with its vmapped axis first (broadcast along a new leading axis if it has none)."""
    if bdim is None:
        return jnp.broadcast_to(x, (size,) + x.shape)
    return jnp.moveaxis(x, bdim, 0)


def _shift(dims, at):
    """Renumbers dims after inserting a new axis at position ``at``."""
    return tuple(None if d is None else (d + 1 if d >= at else d) for d in dims)


def _batch_rule(args, bdims, *, dimension_numbers, out_dtype, epilogue, requested, allow_tf32, config, **_):
    lhs, rhs, *rest = args
    lbd, rbd, *rest_bd = bdims
    (lc, rc), (lb, rb) = dimension_numbers
    size = next(a.shape[d] for a, d in zip(args, bdims) if d is not None)
    # The vmapped axis becomes a new leading batch pair; an unbatched operand is broadcast over it
    # (None), which the kernels read with batch stride 0 - no copy of the operand.
    nl = nr = None
    if lbd is not None:
        lc, lb, nl = _shift(lc, lbd), _shift(lb, lbd), lbd
    if rbd is not None:
        rc, rb, nr = _shift(rc, rbd), _shift(rb, rbd), rbd
    new_dn = ((lc, rc), ((nl,) + tuple(lb), (nr,) + tuple(rb)))
    kw = dict(dimension_numbers=new_dn, requested=requested, allow_tf32=allow_tf32, config=config)
    rest, rest_bd = list(rest), list(rest_bd)  # role order: bias, c, scale
    bias, bias_bd = (rest.pop(0), rest_bd.pop(0)) if epilogue.has_bias else (None, None)
    c, c_bd = (rest.pop(0), rest_bd.pop(0)) if epilogue.has_c else (None, None)
    scale, scale_bd = (rest.pop(0), rest_bd.pop(0)) if epilogue.has_scale else (None, None)
    if lbd is None and rbd is None:
        # Only epilogue operands are batched: one GEMM, broadcast; the epilogue per example in XLA.
        y = bind_gemm(lhs, rhs, out_dtype=jnp.float32, epilogue=Epilogue(alpha=epilogue.alpha),
                      **dict(kw, dimension_numbers=dimension_numbers))
        y = jnp.broadcast_to(y, (size,) + y.shape)
    elif bias_bd is None and scale_bd is None:
        if c is not None:
            c = _at_front(c, c_bd, size)
        args = [x for x in (bias, c, scale) if x is not None]
        return bind_gemm(lhs, rhs, *args, out_dtype=out_dtype, epilogue=epilogue, **kw), 0
    else:
        # A batched bias or scale cannot be fused (the kernels take one of each per call): the GEMM runs
        # with alpha only and scale, bias, activation and c are applied by XLA.
        y = bind_gemm(lhs, rhs, out_dtype=jnp.float32, epilogue=Epilogue(alpha=epilogue.alpha), **kw)
    if scale is not None:
        scale = _at_front(scale, scale_bd, size).astype(jnp.float32)
        y = y * scale.reshape((size,) + (1,) * (y.ndim - 1))
    if bias is not None:
        n_free = rhs.ndim - (rbd is not None) - len(rc) - sum(d is not None for d in rb)
        nshape = y.shape[y.ndim - n_free:]
        y = y + _at_front(bias, bias_bd, size).astype(jnp.float32).reshape((size,) + (1,) * (y.ndim - 1 - n_free) + nshape)
    c = None if c is None else _at_front(c, c_bd, size)
    return finish_epilogue(y, c, epilogue).astype(out_dtype), 0


batching.primitive_batchers[gemm_p] = _batch_rule


# ---- the path decision ------------------------------------------------------------------------

def _target(lhs_shape, rhs_shape, a_dtype, b_dtype, dn, out_dtype, requested: str, allow_tf32: bool,
            config: int = -1):
    """(kernel target, why not, problem description) of a GEMM, recording nothing: the target is "" where
    XLA runs it (a zero-sized dimension: why not is "")."""
    canon = _canon.canonicalize(lhs_shape, rhs_shape, dn)
    problem = (f"{np.dtype(a_dtype).name}{list(lhs_shape)} x {np.dtype(b_dtype).name}{list(rhs_shape)} "
               f"-> {np.dtype(out_dtype).name}")
    if isinstance(canon, _canon.Canon):
        problem += " as " + canon.describe()
    backend = jax.default_backend()
    target, reason = "", ""
    if requested == "xla":
        reason = 'path "xla" requested'
    elif 0 in tuple(lhs_shape) + tuple(rhs_shape):
        pass  # nothing to multiply: XLA produces act(bias) + c or an empty array, even on a forced kernel path
    elif isinstance(canon, str):
        reason = canon
    elif backend == "cpu":
        ok, why = _ext.ensure_registered("cpu")
        if not ok:
            reason = why
        elif requested not in ("kernel", "prefer"):
            reason = ('on CPU "auto" uses XLA\'s dot; the C++ CPU handler (the reference the GPU kernels are '
                      'tested against) runs with path "kernel"')
        else:
            target = "cpu reference handler"
    elif backend in ("gpu", "cuda"):
        built, why = _ext.cuda_built()
        cc, cc_why = _arch.device_cc()
        if not built:
            reason = why
        elif cc < 0:
            reason = cc_why
        else:
            arch, reason = _arch.arch_target(cc)
            if arch:
                reason = _arch.check(arch, canon, a_dtype, b_dtype, out_dtype, allow_tf32, config)
            if arch in ("sm_100a", "sm_103a"):
                if not reason and requested == "auto" and not _arch.sm100_trusted():
                    reason = (f"the {arch} tcgen05 kernels are compiled but have never been executed on Blackwell "
                              "hardware, so auto uses XLA; path='kernel' or JAX_TMEM_ENABLE_SM100=1 runs them")
            if arch and not reason:
                ok, reason = _ext.ensure_registered("cuda")
                target = (f"cuda {arch}, {_arch.menu_entry(arch, canon, a_dtype, config, out_dtype, b_dtype)}"
                          if ok else "")
    else:
        reason = f"no jax_tmem kernels for backend {backend!r}"
    return target, reason, problem


def _decide(lhs_shape, rhs_shape, a_dtype, b_dtype, dn, out_dtype, requested: str, allow_tf32: bool,
            config: int = -1, moved_reason: str = "", decided=None):
    """Returns (path, problem description) and records the decision. Raises ValueError if path "kernel" is
    forced but impossible. ``moved_reason``: why no kernel takes the problem with its MN-major operands
    transposed to K-major (so they were left as they are), reported instead of the majorness. ``decided``:
    ``_target``'s answer for this very problem, if already asked."""
    target, reason, problem = decided or _target(lhs_shape, rhs_shape, a_dtype, b_dtype, dn, out_dtype, requested,
                                                 allow_tf32, config)
    if requested != "xla" and 0 in tuple(lhs_shape) + tuple(rhs_shape):
        _config.record(_config.Decision("gemm", problem, "xla", "lax.dot_general", "a zero-sized dimension"))
        return "xla", problem
    if target:
        _config.record(_config.Decision("gemm", problem, "kernel", target, f'path "{requested}"'))
        return "kernel", problem
    if moved_reason:
        reason = f"{moved_reason} (with its MN-major operands transposed to K-major, as the kernels read them)"
    if requested == "kernel":
        raise ValueError(f"jax_tmem: path 'kernel' was forced but no kernel takes {problem}: {reason}")
    _config.record(_config.Decision("gemm", problem, "xla", "lax.dot_general", reason))
    return "xla", problem


def bind_gemm(lhs, rhs, *rest, dimension_numbers, out_dtype, epilogue: Epilogue, requested: str,
              allow_tf32: bool, config: int = -1):
    """Decides the path and binds the primitive (no autodiff; see ``_gemm`` for the differentiable one).

    ``requested`` is "auto", "kernel", "xla", or the internal "prefer" (the kernel where one applies,
    else XLA without raising: what the backward pass of a forced-kernel call uses for gradient GEMMs
    whose layout no kernel takes)."""
    if _canon.symbolic(lhs.shape, rhs.shape):  # jax.export shape polymorphism (a forced kernel path raised in api)
        _config.record(_config.Decision("gemm", f"{lhs.dtype}{list(lhs.shape)} x {rhs.dtype}{list(rhs.shape)}", "xla",
                                        "lax.dot_general", "symbolic dimensions: the kernels need concrete shapes"))
        return xla_reference(lhs, rhs, *rest, dimension_numbers=dimension_numbers, out_dtype=out_dtype,
                             epilogue=epilogue, allow_tf32=allow_tf32)
    moved = []  # _target's answer for the problem with its MN-major operands transposed, if asked
    if requested != "xla":
        def accept(lhs_shape, rhs_shape, dn):  # a kernel takes the transposed problem: else none is transposed
            moved.append(_target(lhs_shape, rhs_shape, lhs.dtype, rhs.dtype, dn, out_dtype, requested, allow_tf32,
                                 config))
            return bool(moved[0][0])
        lhs, rhs, dimension_numbers = _transpose.to_k_major(lhs, rhs, dimension_numbers, requested, accept)
    accepted = bool(moved and moved[0][0])
    path, problem = _decide(lhs.shape, rhs.shape, lhs.dtype, rhs.dtype, dimension_numbers, out_dtype,
                            requested, allow_tf32, config, moved[0][1] if moved and not accepted else "",
                            moved[0] if accepted else None)
    return gemm_p.bind(lhs, rhs, *rest, dimension_numbers=dimension_numbers, out_dtype=np.dtype(out_dtype),
                       epilogue=epilogue, path=path, requested=requested, problem=problem,
                       allow_tf32=allow_tf32, config=config if isinstance(config, tuple) else int(config))


# ---- differentiation --------------------------------------------------------------------------

def _grad_dims(lhs_ndim, rhs_ndim, dn):
    """dimension numbers and output permutations for dlhs = g . rhs and drhs = lhs . g."""
    (lc, rc), (lb, rb) = dn
    nb = len(lb)
    lfree = [d for d in range(lhs_ndim) if d not in lc and d not in lb]
    rfree = [d for d in range(rhs_ndim) if d not in rc and d not in rb]
    g_l = list(range(nb, nb + len(lfree)))                    # g positions of lhs free dims
    g_r = list(range(nb + len(lfree), nb + len(lfree) + len(rfree)))
    pair = dict(zip(rc, lc))
    # dlhs = dot_general(g, rhs): contract rhs free (+ batch pairs lhs lacks); batch pairs lhs has.
    c_g = tuple(g_r) + tuple(i for i in range(nb) if lb[i] is None)
    c_r = tuple(rfree) + tuple(rb[i] for i in range(nb) if lb[i] is None)
    keep = [i for i in range(nb) if lb[i] is not None]
    dn_l = ((c_g, c_r), (tuple(keep), tuple(rb[i] for i in keep)))
    order_l = [lb[i] for i in keep] + lfree + [pair[r] for r in sorted(rc)]
    # drhs = dot_general(lhs, g): contract lhs free (+ batch pairs rhs lacks); batch pairs rhs has.
    pair_r = dict(zip(lc, rc))
    c_l = tuple(lfree) + tuple(lb[i] for i in range(nb) if rb[i] is None)
    c_g2 = tuple(g_l) + tuple(i for i in range(nb) if rb[i] is None)
    keep_r = [i for i in range(nb) if rb[i] is not None]
    dn_r = ((c_l, c_g2), (tuple(lb[i] for i in keep_r), tuple(keep_r)))
    order_r = [rb[i] for i in keep_r] + [pair_r[l] for l in sorted(lc)] + rfree
    return dn_l, list(np.argsort(order_l)), dn_r, list(np.argsort(order_r))


def _grad_out_dtype(dt):
    dt = np.dtype(dt)
    return dt if dt in _arch.OUT_TYPES else np.dtype("bfloat16")


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5, 6, 7, 8, 9))
def gemm(lhs, rhs, bias, c, dn, out_dtype, epilogue, requested, allow_tf32, config):
    rest = [x for x in (bias, c) if x is not None]
    return bind_gemm(lhs, rhs, *rest, dimension_numbers=dn, out_dtype=out_dtype, epilogue=epilogue,
                     requested=requested, allow_tf32=allow_tf32, config=config)


def _gemm_fwd(lhs, rhs, bias, c, dn, out_dtype, epilogue, requested, allow_tf32, config):
    if epilogue.act_grad:
        raise NotImplementedError("jax_tmem: the activation-derivative GEMM (the backward pass of input_activation=) "
                                  "has no derivative of its own; differentiate twice without input_activation")
    if epilogue.activation is None:
        y = gemm(lhs, rhs, bias, c, dn, out_dtype, epilogue, requested, allow_tf32, config)
        return y, (lhs, rhs, None, bias is not None, c is not None)
    # Keep the pre-activation z for the backward pass; the activation (and c) run in XLA here.
    z_epi = Epilogue(alpha=epilogue.alpha, has_bias=epilogue.has_bias)
    z = gemm(lhs, rhs, bias, None, dn, np.dtype("float32"), z_epi, requested, allow_tf32, config)
    y = apply_activation(z, epilogue.activation)
    if c is not None:
        y = y + c.astype(jnp.float32)
    return y.astype(out_dtype), (lhs, rhs, z, bias is not None, c is not None)


def _gemm_bwd(dn, out_dtype, epilogue, requested, allow_tf32, config, res, g):
    lhs, rhs, z, has_bias, has_c = res
    # A forced kernel path applies to the gradient GEMMs where their layouts allow it.
    requested = "prefer" if requested == "kernel" else requested
    dc = g if has_c else None
    if z is not None:
        _, act_vjp = jax.vjp(lambda t: apply_activation(t, epilogue.activation), z)
        (gz,) = act_vjp(g.astype(jnp.float32))
    else:
        gz = g
    dbias = None
    if has_bias:
        n_free = rhs.ndim - len(dn[0][1]) - sum(d is not None for d in dn[1][1])
        dbias = jnp.sum(gz.astype(jnp.float32), axis=tuple(range(gz.ndim - n_free))).reshape(-1)
    gz = gz.astype(_grad_out_dtype(g.dtype)) if np.dtype(gz.dtype) != np.dtype(g.dtype) else gz
    dn_l, perm_l, dn_r, perm_r = _grad_dims(lhs.ndim, rhs.ndim, dn)
    grad_epi = Epilogue(alpha=epilogue.alpha)

    def gradgemm(x, y, dims, out_dt):
        if np.dtype(x.dtype) != np.dtype(y.dtype):  # e.g. bf16 cotangent x fp8 operand
            common = _arch.common_dtype(x.dtype, y.dtype)
            common = common if common.itemsize >= 2 else np.dtype("bfloat16")
            x, y = x.astype(common), y.astype(common)
        return gemm(x, y, None, None, dims, _grad_out_dtype(out_dt), grad_epi, requested, allow_tf32, config)

    def cotangent(x, compute):  # integer operands have no gradient (float0 cotangents)
        if jnp.issubdtype(x.dtype, jnp.integer):
            return np.zeros(x.shape, dtype=jax.dtypes.float0)
        return compute().astype(x.dtype)

    dlhs = cotangent(lhs, lambda: jnp.transpose(gradgemm(gz, rhs, dn_l, lhs.dtype), perm_l))
    drhs = cotangent(rhs, lambda: jnp.transpose(gradgemm(lhs, gz, dn_r, rhs.dtype), perm_r))
    return dlhs, drhs, dbias, dc


gemm.defvjp(_gemm_fwd, _gemm_bwd)
