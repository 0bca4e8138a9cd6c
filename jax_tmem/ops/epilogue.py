"""The GEMM epilogue's semantics, shared by every path (the kernels compute the same: cpp epilogue_math.h):

    out = act(alpha * scale * acc + bias) + c,   or, with ``act_grad``:   out = (alpha * scale * acc + bias) * act'(c)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import jax
import jax.numpy as jnp

ACTIVATIONS = {None: 0, "relu": 1, "gelu": 2, "gelu_tanh": 3, "silu": 4}
ACT_GRAD_FLAG = 16  # cpp gemm_problem.h kActGradFlag: the "activation" attribute's bit for the derivative epilogue


@dataclass(frozen=True)
class Epilogue:
    activation: Optional[str] = None
    alpha: float = 1.0
    has_bias: bool = False
    has_c: bool = False
    has_scale: bool = False  # a traced float32 (1,) operand multiplying the accumulator with alpha
    # The activation's derivative instead of the activation: y = (alpha * acc + bias) * activation'(c), c holding
    # the activation's input (the backward GEMM of act(x) . w; needs has_c and an activation).
    act_grad: bool = False


def activation_code(epilogue: Epilogue) -> int:
    """The custom call's "activation" attribute: the activation's code, with ACT_GRAD_FLAG for the derivative form."""
    return ACTIVATIONS[epilogue.activation] | (ACT_GRAD_FLAG if epilogue.act_grad else 0)


def apply_activation(x, activation: Optional[str]):
    if activation is None:
        return x
    if activation == "relu":
        return jax.nn.relu(x)  # (its gradient at 0 is 0, as the fused kernels' backward must give: not max's 0.5)
    if activation == "gelu":
        return jax.nn.gelu(x, approximate=False)
    if activation == "gelu_tanh":
        return jax.nn.gelu(x, approximate=True)
    if activation == "silu":
        return jax.nn.silu(x)
    raise ValueError(f"activation={activation!r}")


def activation_grad(x, activation: Optional[str]):
    """d activation / dx at x, in float32, as JAX differentiates :func:`apply_activation` (the kernels' epilogue
    computes the same derivatives: epilogue_math.h apply_activation_grad)."""
    x = x.astype(jnp.float32)
    return jax.jvp(lambda t: apply_activation(t, activation), (x,), (jnp.ones_like(x),))[1]


def finish_epilogue(y, c, epilogue: Epilogue):
    """The epilogue's last steps on the float32 product y (alpha, scale and bias applied): the activation, then
    c added; or, for ``act_grad``, y times the activation's derivative at c."""
    if epilogue.act_grad:
        return y * activation_grad(c, epilogue.activation)
    y = apply_activation(y, epilogue.activation)
    return y if c is None else y + c.astype(jnp.float32)
