"""Public matmul API: ``matmul`` and ``dot_general`` (a drop-in for ``lax.dot_general``).

Both validate their inputs at trace time, decide the path (kernel or XLA, see ``_config``), and bind the
``jax_tmem_gemm`` primitive under a ``custom_vjp`` whose backward pass is two more GEMMs through the same
path (dA and dB read the saved operands with flipped majorness; nothing is transposed in memory for
the common layouts).
"""

from __future__ import annotations

import functools
from typing import Any, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jax_tmem import _canon, _config, _ext, _kernels
from jax_tmem._primitive import ACTIVATIONS, Epilogue, apply_activation, gemm_p

SUPPORTED_DTYPES = tuple(np.dtype(d) for d in ("bfloat16", "float16", "float32", "float8_e4m3fn", "float8_e5m2",
                                                "int8"))
_SUPPORTED_NAMES = ", ".join(d.name for d in SUPPORTED_DTYPES)
_OUT_NAMES = "float32, bfloat16, float16"


# ---- input checking ---------------------------------------------------------------------------

def _check_array(x, name: str):
    if not isinstance(x, (jax.Array, np.ndarray, jax.core.Tracer)) and not hasattr(x, "__jax_array__"):
        raise TypeError(f"jax_tmem: {name} must be a JAX or NumPy array, got {type(x).__name__}")
    return jnp.asarray(x)


def _check_dtype(x, name: str):
    if np.dtype(x.dtype) not in SUPPORTED_DTYPES:
        raise TypeError(f"jax_tmem: {name} has dtype {x.dtype}; supported: {_SUPPORTED_NAMES}")


def _check_out_dtype(dt, name: str):
    dt = np.dtype(dt)
    if dt not in _kernels.OUT_TYPES:
        raise TypeError(f"jax_tmem: {name}={dt} is not supported; use one of {_OUT_NAMES}")
    return dt


def _check_path(path):
    if path is not None and path not in ("auto", "kernel", "xla"):
        raise ValueError(f"jax_tmem: path={path!r} is not supported; use 'auto', 'kernel' or 'xla' (or None)")


def _check_activation(activation):
    if activation not in ACTIVATIONS:
        raise ValueError(f"jax_tmem: activation={activation!r} is not supported; use one of "
                         f"{[k for k in ACTIVATIONS]}")


def _allow_tf32(precision) -> bool:
    """tf32 tensor cores are allowed where JAX's precision allows them (DEFAULT, or the config default)."""
    if precision is None:
        precision = jax.config.jax_default_matmul_precision
    if isinstance(precision, (tuple, list)):
        return all(_allow_tf32(p if p is not None else jax.config.jax_default_matmul_precision) for p in precision)
    if precision is None:
        return True
    if isinstance(precision, str):
        return precision.lower() in ("default", "bfloat16", "tensorfloat32", "fastest")
    return precision == lax.Precision.DEFAULT


# ---- the path decision ------------------------------------------------------------------------

def _decide(lhs_shape, rhs_shape, a_dtype, b_dtype, dn, out_dtype, requested: str, allow_tf32: bool,
            config: int = -1):
    """Returns (path, problem description). Raises ValueError if path "kernel" is forced but impossible."""
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
        # Nothing to multiply: XLA produces act(bias) + c or an empty array, even on a forced kernel path.
        _config.record(_config.Decision("gemm", problem, "xla", "lax.dot_general", "a zero-sized dimension"))
        return "xla", problem
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
        cc, cc_why = _kernels.device_cc()
        if not built:
            reason = why
        elif cc < 0:
            reason = cc_why
        else:
            arch, reason = _kernels.arch_target(cc)
            if arch == "sm_90a":
                reason = _kernels.check_sm90(canon, a_dtype, b_dtype, out_dtype, allow_tf32)
            elif arch in ("sm_100a", "sm_103a"):
                reason = _kernels.check_sm100(canon, a_dtype, b_dtype, out_dtype, allow_tf32, cc)
                if not reason and requested == "auto" and not _kernels.sm100_trusted():
                    reason = (f"the {arch} tcgen05 kernels are compiled but have never been executed on Blackwell "
                              "hardware, so auto uses XLA; path='kernel' or JAX_TMEM_ENABLE_SM100=1 runs them")
            if arch and not reason:
                ok, reason = _ext.ensure_registered("cuda")
                target = f"cuda {arch}, {_kernels.menu_entry(arch, canon, a_dtype, config, out_dtype)}" if ok else ""
    else:
        reason = f"no jax_tmem kernels for backend {backend!r}"
    if target:
        _config.record(_config.Decision("gemm", problem, "kernel", target, f'path "{requested}"'))
        return "kernel", problem
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
    if requested != "xla":
        lhs, rhs, dimension_numbers = _k_major_for_gpu(lhs, rhs, dimension_numbers, requested)
    path, problem = _decide(lhs.shape, rhs.shape, lhs.dtype, rhs.dtype, dimension_numbers, out_dtype,
                            requested, allow_tf32, config)
    return gemm_p.bind(lhs, rhs, *rest, dimension_numbers=dimension_numbers, out_dtype=np.dtype(out_dtype),
                       epilogue=epilogue, path=path, requested=requested, problem=problem,
                       allow_tf32=allow_tf32, config=config if isinstance(config, tuple) else int(config))


def _k_major_for_gpu(lhs, rhs, dn, requested):
    """The tensor cores read some operand types K-major only (wgmma: fp8 and tf32; tcgen05 as built:
    tf32). An MN-major operand of such a type is transposed to K-major by XLA first (what XLA's own
    cuBLASLt fp8 path does); 16-bit operands are always read in place. Returns possibly transposed
    operands and their new dimension numbers."""
    if jax.default_backend() != "gpu":
        return lhs, rhs, dn
    cc = _kernels.device_cc()[0]
    if cc != 90 and not (requested in ("kernel", "prefer") or _kernels.sm100_trusted()):
        return lhs, rhs, dn  # the kernels will not run this call: leave the layout to XLA
    k_major_only = _kernels.k_major_dtypes(cc)
    if not k_major_only:
        return lhs, rhs, dn
    canon = _canon.canonicalize(lhs.shape, rhs.shape, dn)
    if not isinstance(canon, _canon.Canon):
        return lhs, rhs, dn
    (lc, rc), (lb, rb) = dn
    pairs = sorted(zip(lc, rc))

    def to_k_major(x, batch, contract, name):
        free = [d for d in range(x.ndim) if d not in contract and d not in batch]
        perm = [d for d in batch if d is not None] + free + list(contract)
        _config.record(_config.Decision("layout", f"{np.dtype(x.dtype).name}{list(x.shape)}", "kernel",
                                        "xla transpose", f"{name} is MN-major {np.dtype(x.dtype).name}: XLA transposes "
                                        "it to K-major first (the tensor cores read it K-major only)"))
        new_pos = {d: i for i, d in enumerate(perm)}
        return (jnp.transpose(x, perm), tuple(new_pos[d] for d in contract),
                tuple(None if d is None else new_pos[d] for d in batch))

    needs = lambda x: np.dtype(x.dtype) in k_major_only
    if canon.a_mn_major and canon.m > 1 and needs(lhs):
        lhs, lc_new, lb = to_k_major(lhs, lb, tuple(l for l, _ in pairs), "lhs")
        rc = tuple(r for _, r in pairs)
        lc = lc_new
        pairs = list(zip(lc, rc))
    if canon.b_mn_major and canon.n > 1 and needs(rhs):
        rhs, rc_new, rb = to_k_major(rhs, rb, tuple(r for _, r in pairs), "rhs")
        lc = tuple(l for l, _ in pairs)
        rc = rc_new
    return lhs, rhs, ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))


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
    return dt if dt in _kernels.OUT_TYPES else np.dtype("bfloat16")


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5, 6, 7, 8, 9))
def _gemm(lhs, rhs, bias, c, dn, out_dtype, epilogue, requested, allow_tf32, config):
    rest = [x for x in (bias, c) if x is not None]
    return bind_gemm(lhs, rhs, *rest, dimension_numbers=dn, out_dtype=out_dtype, epilogue=epilogue,
                     requested=requested, allow_tf32=allow_tf32, config=config)


def _gemm_fwd(lhs, rhs, bias, c, dn, out_dtype, epilogue, requested, allow_tf32, config):
    if epilogue.activation is None:
        y = _gemm(lhs, rhs, bias, c, dn, out_dtype, epilogue, requested, allow_tf32, config)
        return y, (lhs, rhs, None, bias is not None, c is not None)
    # Keep the pre-activation z for the backward pass; the activation (and c) run in XLA here.
    z_epi = Epilogue(alpha=epilogue.alpha, has_bias=epilogue.has_bias)
    z = _gemm(lhs, rhs, bias, None, dn, np.dtype("float32"), z_epi, requested, allow_tf32, config)
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

    def grad_gemm(x, y, dims, out_dt):
        if np.dtype(x.dtype) != np.dtype(y.dtype):  # e.g. bf16 cotangent x fp8 operand
            common = _common_dtype(x.dtype, y.dtype)
            common = common if common.itemsize >= 2 else np.dtype("bfloat16")
            x, y = x.astype(common), y.astype(common)
        return _gemm(x, y, None, None, dims, _grad_out_dtype(out_dt), grad_epi, requested, allow_tf32, config)

    def cotangent(x, compute):  # integer operands have no gradient (float0 cotangents)
        if jnp.issubdtype(x.dtype, jnp.integer):
            return np.zeros(x.shape, dtype=jax.dtypes.float0)
        return compute().astype(x.dtype)

    dlhs = cotangent(lhs, lambda: jnp.transpose(grad_gemm(gz, rhs, dn_l, lhs.dtype), perm_l))
    drhs = cotangent(rhs, lambda: jnp.transpose(grad_gemm(lhs, gz, dn_r, rhs.dtype), perm_r))
    return dlhs, drhs, dbias, dc


_gemm.defvjp(_gemm_fwd, _gemm_bwd)


# ---- public API -------------------------------------------------------------------------------

def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, *,
                path: Optional[str] = None, **kwargs: Any):
    """A drop-in for :func:`jax.lax.dot_general` that runs jax_tmem's kernels where they apply.

    Contracting and batch dims may sit anywhere: they become operand majorness (K-major or MN-major)
    and strides for the kernels, never a transpose in memory; layouts the kernels cannot read go to
    ``lax.dot_general`` (``JAX_TMEM_LOG=1`` says so). Extra keywords that Flax passes (``out_sharding``,
    ...) are accepted; ``out_sharding`` must be None (use ``jax.shard_map`` for sharded GEMMs).
    Operands of other dtypes (integers, float64, complex) go to ``lax.dot_general`` unchanged.

    Example::

        y = jax_tmem.dot_general(x, w, (((x.ndim - 1,), (0,)), ((), ())))
        nn.Dense(128, dot_general=jax_tmem.dot_general)
    """
    if kwargs.get("out_sharding") is not None:
        raise ValueError("jax_tmem.dot_general: out_sharding is not supported; run it under jax.shard_map")
    unknown = set(kwargs) - {"out_sharding"}
    if unknown:
        raise TypeError(f"jax_tmem.dot_general: unexpected keyword(s) {sorted(unknown)}")
    _check_path(path)
    lhs, rhs = _check_array(lhs, "lhs"), _check_array(rhs, "rhs")
    (lc, rc), (lb, rb) = dimension_numbers
    lc, rc, lb, rb = (tuple(int(d) for d in x) for x in (lc, rc, lb, rb))
    if np.dtype(lhs.dtype) not in SUPPORTED_DTYPES or np.dtype(rhs.dtype) not in SUPPORTED_DTYPES:
        _config.record(_config.Decision("dot_general", f"{lhs.dtype} x {rhs.dtype}", "xla", "lax.dot_general",
                                        "dtype not handled by jax_tmem"))
        return lax.dot_general(lhs, rhs, dimension_numbers, precision=precision,
                               preferred_element_type=preferred_element_type)
    _check_dims(lhs, rhs, lc, rc, lb, rb)
    if preferred_element_type is None:
        out_dtype = _common_dtype(lhs.dtype, rhs.dtype)
        if out_dtype not in _kernels.OUT_TYPES:  # fp8 result: what lax would give; kernels don't write fp8
            _config.record(_config.Decision("dot_general", f"{lhs.dtype} x {rhs.dtype}", "xla",
                                            "lax.dot_general", f"{out_dtype} output (kernels write {_OUT_NAMES})"))
            return lax.dot_general(lhs, rhs, dimension_numbers, precision=precision)
    elif (jnp.issubdtype(lhs.dtype, jnp.integer) and jnp.issubdtype(rhs.dtype, jnp.integer)
          and jnp.issubdtype(preferred_element_type, jnp.integer)):
        # e.g. int8 x int8 -> int32: the kernels write float outputs only.
        _config.record(_config.Decision("dot_general", f"{lhs.dtype} x {rhs.dtype}", "xla", "lax.dot_general",
                                        f"{np.dtype(preferred_element_type).name} output (kernels write {_OUT_NAMES})"))
        return lax.dot_general(lhs, rhs, dimension_numbers, precision=precision,
                               preferred_element_type=preferred_element_type)
    else:
        out_dtype = _check_out_dtype(preferred_element_type, "preferred_element_type")
    lhs, rhs = _promote_pair(lhs, rhs)
    requested = path or _config.current_path()
    return _gemm(lhs, rhs, None, None, ((lc, rc), (lb, rb)), out_dtype, Epilogue(), requested,
                 _allow_tf32(precision), -1)


def _check_dims(lhs, rhs, lc, rc, lb, rb):
    if len(lc) != len(rc):
        raise ValueError(f"jax_tmem: lhs has {len(lc)} contracting dims and rhs {len(rc)}; they must pair up")
    if len(lb) != len(rb):
        raise ValueError(f"jax_tmem: lhs has {len(lb)} batch dims and rhs {len(rb)}; they must pair up")
    for name, x, dims in (("lhs", lhs, lc + lb), ("rhs", rhs, rc + rb)):
        if any(d < 0 or d >= x.ndim for d in dims) or len(set(dims)) != len(dims):
            raise ValueError(f"jax_tmem: {name} dims {dims} are out of range or repeated for shape {x.shape}")
    for l, r in zip(lc, rc):
        if lhs.shape[l] != rhs.shape[r]:
            raise ValueError(f"jax_tmem: contracting dim lhs[{l}]={lhs.shape[l]} != rhs[{r}]={rhs.shape[r]} "
                             f"(shapes {lhs.shape} and {rhs.shape})")
    for l, r in zip(lb, rb):
        if lhs.shape[l] != rhs.shape[r]:
            raise ValueError(f"jax_tmem: batch dim lhs[{l}]={lhs.shape[l]} != rhs[{r}]={rhs.shape[r]} "
                             f"(shapes {lhs.shape} and {rhs.shape})")


def _promote_pair(lhs, rhs):
    """Same-width float operands stay as they are; fp8 x fp8 mixes stay (the kernels take them);
    other mixes are promoted like jnp.matmul (e.g. bf16 x f32 -> f32)."""
    a, b = np.dtype(lhs.dtype), np.dtype(rhs.dtype)
    if a == b or (a in _kernels.FP8 and b in _kernels.FP8):
        return lhs, rhs
    common = _common_dtype(a, b)
    return lhs.astype(common), rhs.astype(common)


def _common_dtype(a, b) -> np.dtype:
    """jnp promotion, except that fp8 (which JAX refuses to promote implicitly) joins the wider type,
    and an fp8 x fp8 mix computes in bfloat16 (exact for the products)."""
    a, b = np.dtype(a), np.dtype(b)
    if a == b:
        return a
    if a in _kernels.FP8 and b in _kernels.FP8:
        return np.dtype("bfloat16")
    if a in _kernels.FP8:
        return b
    if b in _kernels.FP8:
        return a
    return np.dtype(jnp.promote_types(a, b))


def matmul(a, b, *, bias=None, activation: Optional[str] = None, out_dtype=None, alpha: float = 1.0,
           c=None, precision=None, path: Optional[str] = None):
    """``jnp.matmul`` with a fused epilogue: ``act(alpha * (a @ b) + bias) + c``.

    Shapes: ``(..., M, K) @ (K, N)``, ``(B, M, K) @ (B, K, N)`` (batch dims broadcast like jnp.matmul;
    a 2-D ``a`` against a batched ``b`` is read without copying ``a``), and 1-D operands as in jnp.matmul.

    Args:
      a, b: arrays of bfloat16, float16, float32 (tf32 tensor cores where ``precision`` allows),
        float8_e4m3fn or float8_e5m2 (any fp8 mix), or int8 x int8 (exact int32 accumulation; the
        epilogue converts it to float).
      bias: optional ``(N,)`` array, added before the activation.
      activation: None, "relu", "gelu", "gelu_tanh" or "silu".
      out_dtype: float32, bfloat16 or float16. Default: the input dtype (bfloat16 for fp8 inputs,
        float32 for int8).
      alpha: a Python float scaling the product (e.g. the product of per-tensor fp8 scales).
      c: optional array of the output's shape and dtype, added last (accumulate into an existing output).
      precision: as in ``jnp.matmul``; float32 runs as tf32 only for DEFAULT precision.
      path: "auto", "kernel" or "xla" for this call (default: see ``jax_tmem.use_path``).

    Example::

        @jax.jit
        def loss(w, x):
            return jnp.sum(jax_tmem.matmul(x, w, activation="gelu") ** 2)
        g = jax.grad(loss)(w, x)
    """
    _check_path(path)
    a, b = _check_array(a, "a"), _check_array(b, "b")
    _check_dtype(a, "a")
    _check_dtype(b, "b")
    _check_activation(activation)
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool):
        raise TypeError(f"jax_tmem.matmul: alpha must be a Python float, got {type(alpha).__name__}")
    for name, x in (("a", a), ("b", b)):
        if x.ndim == 0:
            raise ValueError(f"jax_tmem.matmul: {name} must have rank >= 1, got a scalar (shape {x.shape})")
    squeeze = []
    if a.ndim == 1:
        a = a[None, :]
        squeeze.append(-2)
    if b.ndim == 1:
        if bias is not None:
            raise ValueError("jax_tmem.matmul: bias needs a 2-D b (it has shape (N,))")
        b = b[:, None]
        squeeze.append(-1)
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"jax_tmem.matmul: contracting dims differ: a {a.shape} has K={a.shape[-1]}, "
                         f"b {b.shape} has K={b.shape[-2]}")
    n = b.shape[-1]
    if out_dtype is None:
        dt = _common_dtype(a.dtype, b.dtype)
        # fp8 -> bfloat16 and int8 (int32 accumulation) -> float32: the kernels do not write 8-bit outputs.
        out_dtype = dt if dt in _kernels.OUT_TYPES else np.dtype("float32" if dt == _kernels.I8 else "bfloat16")
    out_dtype = _check_out_dtype(out_dtype, "out_dtype")
    if bias is not None:
        bias = _check_array(bias, "bias")
        if bias.shape != (n,):
            raise ValueError(f"jax_tmem.matmul: bias must have shape (N,) = ({n},), got {bias.shape}")
        if not jnp.issubdtype(bias.dtype, jnp.floating):
            raise TypeError(f"jax_tmem.matmul: bias must be floating point, got {bias.dtype}")
        bias = bias.astype(jnp.float32)
    a, b = _promote_pair(a, b)
    # Batch handling, like jnp.matmul: a (..., M, K), b (..., K, N).
    if b.ndim == 2:
        lead = a.ndim - 2
        dn = (((a.ndim - 1,), (0,)), ((), ()))
    else:
        ba, bb = a.shape[:-2], b.shape[:-2]
        bshape = tuple(jnp.broadcast_shapes(ba, bb))
        if a.ndim == 2:
            # b batched, a not: broadcast a over the batch without copying it.
            nbd = len(bshape)
            dn = (((1,), (nbd,)), ((None,) * nbd, tuple(range(nbd))))
        else:
            if ba != bshape:
                a = jnp.broadcast_to(a, bshape + a.shape[-2:])
            if bb != bshape:
                b = jnp.broadcast_to(b, bshape + b.shape[-2:])
            nbd = len(bshape)
            dn = (((nbd + 1,), (nbd,)), (tuple(range(nbd)), tuple(range(nbd))))
    if c is not None:
        c = _check_array(c, "c")
        want = _canon.output_shape(a.shape, b.shape, dn)
        if c.shape != want or np.dtype(c.dtype) != out_dtype:
            raise ValueError(f"jax_tmem.matmul: c must have the output's shape {want} and dtype {out_dtype}, "
                             f"got {c.shape} {c.dtype}")
    requested = path or _config.current_path()
    epi = Epilogue(activation=activation, alpha=float(alpha), has_bias=bias is not None, has_c=c is not None)
    y = _gemm(a, b, bias, c, dn, out_dtype, epi, requested, _allow_tf32(precision), -1)
    for ax in squeeze:
        y = jnp.squeeze(y, axis=ax)
    return y
