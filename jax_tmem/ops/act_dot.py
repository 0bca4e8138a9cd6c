"""``act(lhs) . rhs`` with the activation's backward inside a GEMM (``dot_general(..., input_activation=)``).

A transformer MLP computes ``h = act(z)`` and then ``h . w``; autodiff then runs ``dh = g . w^T`` and, in a separate
pass over two activation-sized tensors, ``dz = dh * act'(z)``. Here the second GEMM owns the activation: its
forward applies ``act`` in XLA exactly as the unfused program does (``jax.nn.gelu`` on ``z``'s dtype), and its
backward computes ``dz = (g . w^T) * act'(z)`` in the GEMM's epilogue (``Epilogue.act_grad``: the float32 product
times the derivative, rounded once), so no pass reads ``dh`` back. ``dw = h^T . g`` as usual. The C++ CPU handler
runs that epilogue. On Hopper the bf16 GEMMs planned on the 128x256 TMA-store-overlap entries (20 / 22: the heuristic's
large tiles) run relu', silu' or gelu_tanh' in the kernel: z comes by TMA into the output's shared-memory boxes and
the packed product is multiplied there under the next tile's MMAs (cpp/include/jax_tmem/kernels/sm90_act_grad.cuh;
the product is rounded to bf16 first, as in the unfused program; 6 % over the plain GEMM, 1.06x XLA's unfused
backward on an 8192 x 8192 x 4096 one, H200 2026-11-30). Every other GPU plan writes the product and multiplies in a
second pass inside the same call (the unfused program's arithmetic and cost; cpp/src/act_grad_pass.cu).
``JAX_TMEM_LOG=1`` says which (decision "gemm act_grad"); where a platform's handler had neither, gemm.py's lowering
would write the product and let XLA multiply (``ACT_GRAD_IN_KERNEL``).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jax_tmem.ops.gemm import Epilogue, _grad_dims, _grad_out_dtype, apply_activation, gemm

ACT_NAMES = ("relu", "gelu", "gelu_tanh", "silu")
_DTYPES = (np.dtype(jnp.bfloat16), np.dtype(jnp.float16), np.dtype(jnp.float32))


def check(lhs, rhs, activation, combined: bool):
    """The trace-time errors of ``dot_general(lhs, rhs, ..., input_activation=activation)``; ``combined``: with
    ``quantize``, a quantizing recipe or ``c``."""
    if activation not in ACT_NAMES:
        raise ValueError(f"jax_tmem.dot_general: input_activation={activation!r} is not supported; use one of "
                         f"{list(ACT_NAMES)} (or None)")
    if combined:
        raise ValueError("jax_tmem.dot_general: input_activation= is not combined with quantize=, a quantizing "
                         "recipe or c=; apply the activation to lhs yourself")
    if np.dtype(lhs.dtype) != np.dtype(rhs.dtype) or np.dtype(lhs.dtype) not in _DTYPES:
        raise TypeError(f"jax_tmem.dot_general: input_activation= takes lhs and rhs of one dtype, bfloat16, float16 "
                        f"or float32; got {lhs.dtype} x {rhs.dtype} (cast them)")


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4, 5, 6))
def act_dot_general(lhs, rhs, dn, activation, out_dtype, requested, allow_tf32):
    """``dot_general(apply_activation(lhs, activation), rhs, dn)`` (operands of one dtype, dn canonical tuples)."""
    return _fwd(lhs, rhs, dn, activation, out_dtype, requested, allow_tf32)[0]


def _fwd(lhs, rhs, dn, activation, out_dtype, requested, allow_tf32):
    h = apply_activation(lhs, activation)
    y = gemm(h, rhs, None, None, dn, out_dtype, Epilogue(), requested, allow_tf32, -1)
    return y, (lhs, h, rhs)


def _bwd(dn, activation, out_dtype, requested, allow_tf32, res, g):
    z, h, rhs = res
    requested = "prefer" if requested == "kernel" else requested
    g = g.astype(rhs.dtype) if g.dtype != rhs.dtype else g
    dn_l, perm_l, dn_r, perm_r = _grad_dims(z.ndim, rhs.ndim, dn)
    # dz = (g . rhs) * act'(z): the GEMM writes z's dims in the order perm_l puts back, so z goes in that order too.
    inv = [int(i) for i in np.argsort(perm_l)]
    c = z if inv == list(range(z.ndim)) else jnp.transpose(z, inv)
    c = c.astype(_grad_out_dtype(z.dtype))
    epi = Epilogue(activation=activation, act_grad=True, has_c=True)
    dz = gemm(g, rhs, None, c, dn_l, c.dtype, epi, requested, allow_tf32, -1)
    dz = jnp.transpose(dz, perm_l).astype(z.dtype)
    drhs = gemm(h, g, None, None, dn_r, _grad_out_dtype(rhs.dtype), Epilogue(), requested, allow_tf32, -1)
    return dz, jnp.transpose(drhs, perm_r).astype(rhs.dtype)


act_dot_general.defvjp(_fwd, _bwd)
