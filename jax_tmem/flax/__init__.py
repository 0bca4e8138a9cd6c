"""Flax drop-ins (the ``flax`` extra: ``pip install "jax_tmem[flax]"``): Flax's own layers with their
constructor arguments and parameter trees (``kernel``, ``bias``), so existing checkpoints load unchanged,
plus ``recipe=`` (``jax_tmem.RECIPES``: "bf16" default, "fp8", "mxfp8", "nvfp4", "nvfp4_sr") choosing
how their GEMMs quantize.

- ``jax_tmem.flax.linen``: ``Dense``, ``DenseGeneral``.
- ``jax_tmem.flax.nnx``: ``Linear``, ``LinearGeneral``, ``Einsum``.

Each is a subclass of the Flax layer whose ``dot_general`` (``einsum_op`` for ``Einsum``) is
:func:`jax_tmem.dot_general_op` (``recipe``) unless one is passed explicitly; everything else is
Flax's code.
"""

try:
    import flax  # noqa: F401
except ImportError as e:  # pragma: no cover - the extra is missing
    raise ImportError('jax_tmem.flax needs Flax: pip install "jax_tmem[flax]" (or pip install flax)') from e

from jax_tmem.flax import linen, nnx

__all__ = ["linen", "nnx"]
