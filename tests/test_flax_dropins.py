"""jax_tmem.flax drop-ins (linen Dense / DenseGeneral, nnx Linear / LinearGeneral / Einsum): Flax's
parameter trees from the same init key, Flax's outputs (bf16 recipe: within dtype tolerance; quantized
recipes: within their rounding), checkpoints of plain Flax loading into them and back, check_grads, and
nn.scan / nnx.scan over layers, remat and vmap."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import jax_tmem
from conftest import PATHS, rand, recipe_kernel_path, seed_of

flax = pytest.importorskip("flax")
from flax import linen as nn  # noqa: E402
from flax import nnx  # noqa: E402
from flax import serialization  # noqa: E402

from jax_tmem.flax import linen as jl  # noqa: E402
from jax_tmem.flax import nnx as jn  # noqa: E402

RECIPES = ["bf16", "fp8", "mxfp8", "nvfp4"]
# max |ours - flax| / max |flax| allowed per recipe (f32 parameters, unit-scale inputs). On a GPU both
# sides multiply float32 with DEFAULT precision on tf32 tensor cores (10-bit mantissas, rounded
# differently by cuBLAS and by our kernels), hence 3e-3 there for "bf16".
REL = {"bf16": 1e-5 if jax.default_backend() == "cpu" else 3e-3, "fp8": 0.08, "mxfp8": 0.08, "nvfp4": 0.3}


def _rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / np.abs(b).max())


def _same_tree(p, q):
    assert jax.tree.structure(p) == jax.tree.structure(q)
    for a, b in zip(jax.tree.leaves(p), jax.tree.leaves(q)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


LINEN = [
    (lambda r: jl.Dense(48, recipe=r), lambda: nn.Dense(48), (3, 5, 64)),
    (lambda r: jl.DenseGeneral((4, 12), axis=-1, recipe=r), lambda: nn.DenseGeneral((4, 12), axis=-1), (6, 64)),
    (lambda r: jl.DenseGeneral(40, axis=(-2, -1), recipe=r), lambda: nn.DenseGeneral(40, axis=(-2, -1)), (6, 2, 32)),
]


@pytest.mark.parametrize("case", range(len(LINEN)))
@pytest.mark.parametrize("recipe", RECIPES)
def test_linen_dropins_match_flax(case, recipe):
    ours_f, ref_f, shape = LINEN[case]
    x = rand(seed_of("linen", case, recipe), shape, jnp.float32)
    ours, ref = ours_f(recipe), ref_f()
    p_ref = ref.init(jax.random.key(3), x)
    _same_tree(ours.init(jax.random.key(3), x), p_ref)
    # a checkpoint written by plain Flax loads into the drop-in, and the drop-in's back into Flax
    p = serialization.from_bytes(ours.init(jax.random.key(9), x), serialization.to_bytes(p_ref))
    _same_tree(p, p_ref)
    _same_tree(serialization.from_bytes(p_ref, serialization.to_bytes(p)), p_ref)
    with jax_tmem.use_path(recipe_kernel_path(recipe)):
        y = jax.jit(ours.apply)(p, x)
    assert _rel(y, ref.apply(p_ref, x)) < REL[recipe]
    loss = lambda m: (lambda p: jnp.sum(jnp.sin(m.apply(p, x))))
    with jax_tmem.use_path(recipe_kernel_path(recipe)):
        g = jax.jit(jax.grad(loss(ours)))(p)
    for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(jax.grad(loss(ref))(p_ref))):
        assert _rel(a, b) < 2 * REL[recipe]


@pytest.mark.parametrize("recipe", RECIPES)
def test_nnx_dropins_match_flax(recipe):
    s = seed_of("nnx", recipe)
    x = rand(s, (4, 6, 64), jnp.float32)
    pairs = [
        (jn.Linear(64, 40, recipe=recipe, rngs=nnx.Rngs(1)), nnx.Linear(64, 40, rngs=nnx.Rngs(1)), x),
        (jn.LinearGeneral(64, (2, 20), recipe=recipe, rngs=nnx.Rngs(2)),
         nnx.LinearGeneral(64, (2, 20), rngs=nnx.Rngs(2)), x),
        (jn.LinearGeneral((6, 64), 24, axis=(-2, -1), recipe=recipe, rngs=nnx.Rngs(3)),
         nnx.LinearGeneral((6, 64), 24, axis=(-2, -1), rngs=nnx.Rngs(3)), x),
        (jn.Einsum("btd,dnh->btnh", (64, 2, 16), (2, 16), recipe=recipe, rngs=nnx.Rngs(4)),
         nnx.Einsum("btd,dnh->btnh", (64, 2, 16), (2, 16), rngs=nnx.Rngs(4)), x),
    ]
    for ours, ref, inp in pairs:
        _same_tree(nnx.state(ours, nnx.Param), nnx.state(ref, nnx.Param))
        with jax_tmem.use_path(recipe_kernel_path(recipe)):
            y = nnx.jit(lambda m, v: m(v))(ours, inp)
        assert _rel(y, ref(inp)) < REL[recipe], type(ours).__name__
        # Flax's state into the drop-in and back (what an orbax / serialization checkpoint restores)
        nnx.update(ours, jax.tree.map(lambda t: t * 1.5, nnx.state(ref, nnx.Param)))
        nnx.update(ref, nnx.state(ours, nnx.Param))
        _same_tree(nnx.state(ours, nnx.Param), nnx.state(ref, nnx.Param))
        grad_fn = nnx.grad(lambda m: jnp.sum(jnp.sin(m(inp))))
        with jax_tmem.use_path(recipe_kernel_path(recipe)):
            g = grad_fn(ours)
        g_ref = grad_fn(ref)
        for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(g_ref)):
            assert _rel(a, b) < 2 * REL[recipe], type(ours).__name__
        assert ours.recipe == recipe


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_check_grads_bf16_recipe(path, dtype):
    """jax.test_util.check_grads (reverse mode against finite differences) of a Dense drop-in."""
    x = rand(seed_of("cg", path), (3, 16), jnp.float32)
    m = jl.Dense(8, dtype=dtype, param_dtype=jnp.float32)
    p = m.init(jax.random.key(0), x)
    f = lambda k, b, x: jnp.sum(jnp.tanh(m.apply({"params": {"kernel": k, "bias": b}}, x)).astype(jnp.float32))
    with jax_tmem.use_path(path):
        tol = 2e-2 if dtype == jnp.float32 else 2e-1
        check_grads(f, (p["params"]["kernel"], p["params"]["bias"], x), order=1, modes=["rev"], atol=tol, rtol=tol,
                    eps=1e-2 if dtype == jnp.float32 else 1e-1)


@pytest.mark.parametrize("recipe", ["bf16", "fp8"])
def test_linen_scan_remat_vmap(recipe):
    """A stack of Dense layers under nn.scan and nn.remat gives the loop's output and gradients; the
    drop-in under jax.vmap gives per-example results."""

    class Block(nn.Module):
        @nn.compact
        def __call__(self, h, _):
            return jnp.tanh(jl.Dense(32, recipe=recipe)(h)), None

    class Scanned(nn.Module):
        remat: bool

        @nn.compact
        def __call__(self, h):
            blk = nn.remat(Block) if self.remat else Block
            return nn.scan(blk, variable_axes={"params": 0}, split_rngs={"params": True}, length=3)(name="layers")(h, None)[0]

    x = rand(seed_of("scan", recipe), (8, 32), jnp.float32)
    p = Scanned(False).init(jax.random.key(0), x)
    with jax_tmem.use_path(recipe_kernel_path(recipe)):
        y = jax.jit(Scanned(False).apply)(p, x)
        y_remat = jax.jit(Scanned(True).apply)(p, x)
        g = jax.jit(jax.grad(lambda p: jnp.sum(Scanned(False).apply(p, x) ** 2)))(p)
        g_remat = jax.jit(jax.grad(lambda p: jnp.sum(Scanned(True).apply(p, x) ** 2)))(p)
    np.testing.assert_allclose(np.asarray(y_remat), np.asarray(y), rtol=1e-6, atol=1e-6)
    for a, b in zip(jax.tree.leaves(g_remat), jax.tree.leaves(g)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    # the loop over the scanned parameters, layer by layer
    h = x
    for i in range(3):
        kp = jax.tree.map(lambda t: t[i], p["params"]["layers"]["Dense_0"])
        with jax_tmem.use_path(recipe_kernel_path(recipe)):
            h = jnp.tanh(jl.Dense(32, recipe=recipe).apply({"params": kp}, h))
    np.testing.assert_allclose(np.asarray(y), np.asarray(h), rtol=1e-5, atol=1e-5)
    dense = jl.Dense(32, recipe=recipe)
    with jax_tmem.use_path(recipe_kernel_path(recipe)):
        yv = jax.vmap(lambda v: dense.apply({"params": kp}, v))(x.reshape(2, 4, 32))
        for i in range(2):
            np.testing.assert_allclose(np.asarray(yv[i]), np.asarray(dense.apply({"params": kp}, x.reshape(2, 4, 32)[i])),
                                       rtol=1e-5, atol=1e-5)


def test_nnx_scan_over_layers():
    """nnx.vmap-created layers applied by nnx.scan (the nnx idiom for stacked layers) with the fp8 recipe:
    the scan's output equals the layer-by-layer loop."""

    @nnx.vmap(in_axes=0, out_axes=0)
    def make(key):
        return jn.Linear(32, 32, recipe="fp8", rngs=nnx.Rngs(key))

    layers = make(jax.random.split(jax.random.key(0), 3))
    x = rand(seed_of("nnxscan"), (8, 32), jnp.float32)

    @nnx.scan(in_axes=(0, nnx.Carry), out_axes=nnx.Carry)
    def run(layer, h):
        return jnp.tanh(layer(h))

    with jax_tmem.use_path(recipe_kernel_path("fp8")):
        y = nnx.jit(run)(layers, x)
    state = nnx.state(layers, nnx.Param)
    h = x
    for i in range(3):
        one = jn.Linear(32, 32, recipe="fp8", rngs=nnx.Rngs(0))
        nnx.update(one, jax.tree.map(lambda t: t[i], state))
        with jax_tmem.use_path(recipe_kernel_path("fp8")):
            h = jnp.tanh(one(h))
    np.testing.assert_allclose(np.asarray(y), np.asarray(h), rtol=1e-5, atol=1e-5)


def test_linen_clone_takes_the_new_recipe():
    """clone(recipe=...) of a drop-in swaps its GEMM op (the op the first recipe set is ours, not the user's)."""
    x = rand(seed_of("clone"), (4, 64), jnp.float32)
    m = jl.Dense(16, recipe="fp8")
    p = m.init(jax.random.key(0), x)
    m2 = m.clone(recipe="bf16")
    assert m2.dot_general.jax_tmem_recipe.name == "bf16" and m2.dot_general is jl.Dense(16).dot_general
    tol = 1e-2 if jax.default_backend() == "gpu" else 1e-5  # float32 operands: tf32 in the GPU kernels
    np.testing.assert_allclose(np.asarray(m2.apply(p, x)), np.asarray(nn.Dense(16).apply(p, x)), rtol=tol, atol=tol)


def test_linen_keeps_the_users_jax_tmem_op():
    """A jax_tmem op passed as ``dot_general=`` is the one the layer runs, with its own recipe and path (the
    default recipe's op replaced it before 2026-11-28: an mxfp8 op silently ran bf16, path="xla" was dropped);
    with a quantized recipe as well it is an error, as in the nnx drop-ins."""
    x = rand(seed_of("users-op"), (4, 64), jnp.float32)
    for op, want in ((jax_tmem.dot_general_op("mxfp8"), "scaled_matmul"), (jax_tmem.dot_general_op("bf16", "xla"), "gemm")):
        m = jl.Dense(16, dot_general=op)
        assert m.dot_general is op and m.clone().dot_general is op
        p = m.init(jax.random.key(0), x)
        jax_tmem.clear_decisions()
        jax.block_until_ready(jax.jit(m.apply)(p, x))
        ops = [(d.op, d.path) for d in jax_tmem.decisions() if d.op in ("gemm", "scaled_matmul")]
        assert ops and ops[0][0] == want, ops
        if want == "gemm":
            assert all(path == "xla" for _, path in ops), ops
    with pytest.raises(ValueError, match="recipe='fp8' sets dot_general; pass one of them, not both"):
        jl.Dense(16, recipe="fp8", dot_general=jax_tmem.dot_general_op("mxfp8"))


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_bf16_gradients_of_kernels_with_several_output_dims(jit):
    """LinearGeneral with tuple features and Einsum 'bd,dnh->bnh' in bfloat16: their weight gradients contract a
    3-D operand, a dot XLA:CPU's thunk refused in bf16 with a float32 result when run eagerly ("Unsupported element
    type for DotThunk::Execute: BF16 x BF16 = F32", 2026-11-28); the values are plain Flax's."""
    x = rand(seed_of("multi-out"), (64, 32), jnp.float32)
    pairs = ((jn.LinearGeneral(32, (2, 16), dtype=jnp.bfloat16, rngs=nnx.Rngs(0)),
              nnx.LinearGeneral(32, (2, 16), dtype=jnp.bfloat16, rngs=nnx.Rngs(0))),
             (jn.Einsum("bd,dnh->bnh", (32, 2, 16), dtype=jnp.bfloat16, rngs=nnx.Rngs(0)),
              nnx.Einsum("bd,dnh->bnh", (32, 2, 16), dtype=jnp.bfloat16, rngs=nnx.Rngs(0))))
    for ours, theirs in pairs:
        grads = []
        for m in (ours, theirs):
            f = nnx.grad(lambda m: jnp.sum(m(x).astype(jnp.float32) ** 2))
            grads.append(nnx.state(nnx.jit(f)(m) if jit else f(m)))
        for a, b in zip(jax.tree.leaves(grads[0]), jax.tree.leaves(grads[1])):
            a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
            assert np.isfinite(a).all() and np.abs(a - b).max() <= 2e-2 * np.abs(b).max(), type(ours).__name__


def test_dropin_errors():
    with pytest.raises(ValueError, match="recipe='int4' is not a training recipe"):
        jl.Dense(4, recipe="int4").init(jax.random.key(0), jnp.ones((2, 8)))
    with pytest.raises(ValueError, match="recipe='fp8' sets dot_general; pass one of them, not both"):
        jl.Dense(4, recipe="fp8", dot_general=jax.lax.dot_general).init(jax.random.key(0), jnp.ones((2, 8)))
    with pytest.raises(ValueError, match="recipe='fp8' sets the GEMM op; pass one of them, not both"):
        jn.Linear(8, 4, recipe="fp8", dot_general=jax.lax.dot_general, rngs=nnx.Rngs(0))


def test_nnx_dropins_report_the_recipe_they_run_and_take_dot_general_cls():
    """``layer.recipe`` names the recipe of the GEMM op the layer runs, a user's own jax_tmem op included (it said
    "bf16" for dot_general=dot_general_op("mxfp8")); LinearGeneral takes Flax's dot_general_cls with the default
    recipe (the user's class then runs the GEMM, as in the linen drop-ins; it always raised) and refuses it with a
    quantized one."""
    assert jn.Linear(8, 4, dot_general=jax_tmem.dot_general_op("mxfp8"), rngs=nnx.Rngs(0)).recipe == "mxfp8"
    assert jn.Einsum("bd,dh->bh", (8, 4), einsum_op=jax_tmem.einsum_op("fp8"), rngs=nnx.Rngs(0)).recipe == "fp8"
    calls = []

    class Plain:
        def __call__(self, *args, **kwargs):
            calls.append(1)
            return jax.lax.dot_general(*args, **kwargs)
    x = rand(seed_of("dg-cls"), (4, 8), jnp.float32)
    ours = jn.LinearGeneral(8, 4, dot_general_cls=Plain, rngs=nnx.Rngs(0))
    theirs = nnx.LinearGeneral(8, 4, rngs=nnx.Rngs(0))
    np.testing.assert_array_equal(np.asarray(ours(x)), np.asarray(theirs(x)))
    assert calls and ours.recipe is None
    with pytest.raises(ValueError, match="recipe='fp8' sets the GEMM op; pass one of them, not both"):
        jn.LinearGeneral(8, 4, recipe="fp8", dot_general_cls=Plain, rngs=nnx.Rngs(0))
