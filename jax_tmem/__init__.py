"""jax_tmem: fast matmuls for JAX on NVIDIA Hopper (wgmma) and Blackwell (tcgen05 / TMEM).

``jax_tmem.matmul`` and ``jax_tmem.dot_general`` are ordinary jit/vmap/grad-compatible JAX functions. On
a supported GPU they run jax_tmem's CUDA kernels through XLA FFI custom calls; everywhere else they run
the same semantics through XLA. ``python -m jax_tmem`` reports which path each dtype takes and why.
"""

from jax_tmem._core.config import Decision, clear_decisions, current_path, decisions, use_path
from jax_tmem.api import (SUPPORTED_DTYPES, checkpoint_policies, dot_general, dot_general_op, einsum, einsum_op, matmul,
                          scaled_dot_general, scaled_matmul)
from jax_tmem.ops.recipes import RECIPES, Recipe
from jax_tmem.ops.block_scale import FORMATS, dequantize, quantize, swizzle_scales, unswizzle_scales
from jax_tmem import export  # noqa: E402 - jax.export of programs holding jax_tmem's GEMMs

__version__ = "0.1.0"

__all__ = ["matmul", "dot_general", "dot_general_op", "einsum", "einsum_op", "Recipe", "RECIPES", "scaled_matmul", "scaled_dot_general", "quantize", "dequantize", "swizzle_scales",
           "unswizzle_scales", "FORMATS", "use_path", "current_path", "decisions", "clear_decisions", "Decision",
           "SUPPORTED_DTYPES", "checkpoint_policies", "export", "__version__"]
