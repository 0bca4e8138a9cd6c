"""``jax.export`` of programs that hold jax_tmem's GEMMs.

Shape-polymorphic exports (``jax.export.symbolic_shape``) work as they are: a jax_tmem call whose operands
have symbolic dimensions runs XLA's ops with the same semantics (the kernels are planned for concrete shapes
at trace time; ``JAX_TMEM_LOG=1`` says so, and a forced ``path="kernel"`` raises), so the exported program
holds no jax_tmem custom call.

With concrete shapes the program holds jax_tmem's XLA FFI custom calls (``jax_tmem_gemm`` and, on a GPU,
``jax_tmem_quantize`` / ``jax_tmem_transpose8``), which have no compatibility guarantee, so ``jax.export``
refuses them unless told::

    exp = jax.export.export(jax.jit(step), disabled_checks=jax_tmem.export.disabled_checks())(*specs)
    blob = exp.serialize()
    # in the serving process, with the same jax_tmem version installed:
    jax_tmem.export.register()                        # the handlers the custom calls name
    y = jax.export.deserialize(blob).call(*args)

The custom calls' attributes (the planned GEMM, its kernel configuration) belong to the jax_tmem version that
exported them: run the program with that version, on the platform and GPU architecture it was exported on.
"""

from __future__ import annotations

import jax

from jax_tmem._core import ext as _ext

# Every XLA FFI target jax_tmem's programs may name (cpp/src/module.cc, ``registrations``).
TARGETS = ("jax_tmem_gemm", "jax_tmem_quantize", "jax_tmem_transpose8")


def disabled_checks() -> list:
    """``jax.export.DisabledSafetyCheck``s that let ``jax.export.export`` serialize jax_tmem's custom calls."""
    return [jax.export.DisabledSafetyCheck.custom_call(t) for t in TARGETS]


def register() -> dict[str, str]:
    """Registers jax_tmem's FFI handlers for every platform this build has (a deserialized program's custom
    calls need them before its first call; tracing a jax_tmem op registers them too). Returns
    ``{platform: ""}`` where registered, ``{platform: why not}`` elsewhere."""
    out = {}
    for platform in ("cpu", "cuda"):
        ok, why = _ext.ensure_registered(platform)
        out[platform] = "" if ok else why
    return out
