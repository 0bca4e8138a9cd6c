"""jax_tmem.dot_general as Flax's dot_general: the same parameters, the same numbers as the default."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_tmem
from conftest import PATHS, f32_tol, rand, seed_of

flax = pytest.importorskip("flax")
from flax import linen as nn  # noqa: E402
from flax import nnx  # noqa: E402


@pytest.mark.parametrize("path", PATHS)
def test_linen_dense_drop_in(path):
    x = rand(seed_of("linen", path), (4, 7, 24), jnp.float32)
    ref_mod = nn.Dense(40)
    ours = nn.Dense(40, dot_general=jax_tmem.dot_general)
    params = ref_mod.init(jax.random.key(0), x)
    assert jax.tree.structure(params) == jax.tree.structure(ours.init(jax.random.key(0), x))
    jax_tmem.clear_decisions()
    with jax_tmem.use_path(path):
        y = jax.jit(lambda p, x: ours.apply(p, x))(params, x)
    y_ref = ref_mod.apply(params, x)
    np.testing.assert_allclose(np.asarray(y), np.asarray(y_ref), rtol=f32_tol(1e-5),
                               atol=f32_tol(1e-5) * float(jnp.abs(y_ref).max()))
    assert [d.path for d in jax_tmem.decisions() if d.op == "gemm"] == [path]
    # and its gradient w.r.t. the parameters
    loss = lambda m: (lambda p, x: jnp.sum(m.apply(p, x) ** 2))
    with jax_tmem.use_path(path):
        g = jax.jit(jax.grad(loss(ours)))(params, x)
    g_ref = jax.grad(loss(ref_mod))(params, x)
    for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(g_ref)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=f32_tol(1e-4),
                                   atol=f32_tol(1e-4) * float(jnp.abs(b).max()))


@pytest.mark.parametrize("path", PATHS)
def test_nnx_linear_drop_in(path):
    x = rand(seed_of("nnx", path), (5, 16), jnp.bfloat16)
    ref_mod = nnx.Linear(16, 32, dtype=jnp.bfloat16, rngs=nnx.Rngs(0))
    ours = nnx.Linear(16, 32, dtype=jnp.bfloat16, dot_general=jax_tmem.dot_general, rngs=nnx.Rngs(0))
    np.testing.assert_array_equal(np.asarray(ref_mod.kernel[...]), np.asarray(ours.kernel[...]))
    with jax_tmem.use_path(path):
        y = ours(x)
    y_ref = ref_mod(x)
    np.testing.assert_allclose(np.asarray(y, np.float32), np.asarray(y_ref, np.float32), rtol=2e-2, atol=2e-2)
