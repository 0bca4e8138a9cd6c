"""dot_general(..., input_activation=): act(lhs) . rhs with the activation's backward in the gradient GEMM's
epilogue (Epilogue.act_grad: y = (alpha acc + bias) * act'(c)), the Flax drop-ins' ``input_activation``, and the
epilogue itself on every path (the C++ CPU handler, XLA's semantics), all against float64."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_tmem
from jax_tmem import isa
from jax_tmem.ops import gemm as gemm_op
from conftest import BF16, F32, PATHS, assert_close, f64, rand, ref_activation as act64, run_path

ACTS = ["relu", "gelu", "gelu_tanh", "silu"]
_erf = np.vectorize(math.erf)


def dact64(x, act):
    x = f64(x)
    if act == "relu":
        return (x > 0).astype(np.float64)
    if act == "gelu":
        return 0.5 * (1 + _erf(x / math.sqrt(2))) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    if act == "gelu_tanh":
        b, c = math.sqrt(2 / math.pi), 0.044715
        t = np.tanh(b * (x + c * x ** 3))
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * b * (1 + 3 * c * x * x)
    s = 1 / (1 + np.exp(-x))
    return s * (1 + x * (1 - s))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("out_dtype", [BF16, F32], ids=lambda d: np.dtype(d).name)
def test_act_grad_epilogue(path, act, out_dtype, seed):
    """y = (alpha a.b + bias) * act'(c): batch, tails in M / N / K, b stored (N, K)."""
    a, b = rand(seed, (2, 37, 72), BF16), rand(seed + 1, (53, 72), BF16)
    bias, c = rand(seed + 2, (53,), F32), rand(seed + 3, (2, 37, 53), out_dtype, scale=2.0)
    dn = (((2,), (1,)), ((), ()))
    epi = gemm_op.Epilogue(activation=act, act_grad=True, has_c=True, has_bias=True, alpha=0.5)
    f = lambda a, b, bias, c: gemm_op.gemm(a, b, bias, c, dn, np.dtype(out_dtype), epi, path, True, -1)
    out = run_path(path, f, a, b, bias, c)
    ref = (0.5 * np.einsum("bmk,nk->bmn", f64(a), f64(b)) + f64(bias)) * dact64(c, act)
    gpu = jax.default_backend() == "gpu"
    if path == "kernel":  # the kernel's epilogue (or the handler's second pass), not the product and XLA's multiply
        assert not any(d.op == "gemm act_grad" and d.path == "xla" for d in jax_tmem.decisions())
    assert_close(out, ref, out_dtype, 72, factor=2.0 if gpu else 1.0)  # (on a GPU the product is rounded first)


def test_act_grad_without_the_kernel_epilogue(monkeypatch, seed):
    """Where a platform's kernels lack the derivative epilogue, the lowering writes the product in the output type and
    XLA multiplies (logged): that route on this platform's kernels, against float64."""
    platform = {"gpu": "cuda"}.get(jax.default_backend(), jax.default_backend())  # the lowering's platform name
    monkeypatch.setitem(gemm_op.ACT_GRAD_IN_KERNEL, platform, False)
    a, b, c = rand(seed, (40, 72), BF16), rand(seed + 1, (72, 24), BF16), rand(seed + 2, (40, 24), BF16, scale=2.0)
    epi = gemm_op.Epilogue(activation="gelu_tanh", act_grad=True, has_c=True)
    f = lambda a, b, c: gemm_op.gemm(a, b, None, c, (((1,), (0,)), ((), ())), np.dtype(BF16), epi, "kernel", True, -1)
    out = run_path("kernel", f, a, b, c)
    assert any(d.op == "gemm act_grad" and d.path == "xla" for d in jax_tmem.decisions())
    assert_close(out, (f64(a) @ f64(b)) * dact64(c, "gelu_tanh"), BF16, 72, factor=2.0)


def test_act_grad_epilogue_has_no_derivative():
    a, b, c = rand(0, (8, 16), BF16), rand(1, (16, 8), BF16), rand(2, (8, 8), BF16)
    epi = gemm_op.Epilogue(activation="gelu", act_grad=True, has_c=True)
    f = lambda a: jnp.sum(gemm_op.gemm(a, b, None, c, (((1,), (0,)), ((), ())), np.dtype(BF16), epi, "xla", True, -1))
    with pytest.raises(NotImplementedError, match="no derivative of its own"):
        jax.grad(f)(a)


def _plan(config=-1, act="gelu_tanh", arch="sm_90a", **kw):
    return isa.kernel_plan(arch, 8192, 8192, 4096, config=config, act_grad=act, **kw)


@pytest.mark.parametrize("act", ACTS)
def test_act_grad_in_kernel_rule(act):
    """Where the CUDA handler runs the derivative inside the kernel (C++ menu::act_grad_in_kernel, which both the
    handler and the decision log ask): the sm_90a entries with the TMA-store-overlap epilogue and whole pairs of
    128-byte chunks, bf16 operands and output, relu / silu / gelu_tanh; everywhere else a second pass."""
    fused = act in ("relu", "silu", "gelu_tanh")
    assert _plan(act=act)["act_grad_in_kernel"] == fused  # this problem's heuristic plan: entry 20 or 22
    assert not _plan(act=None)["act_grad_in_kernel"]
    assert not _plan(act=act, out_dtype=F32)["act_grad_in_kernel"]
    assert not _plan(act=act, a_dtype=np.float16, out_dtype=np.float16)["act_grad_in_kernel"]
    assert not _plan(act=act, arch="sm_100a", num_sms=148)["act_grad_in_kernel"]
    seen = set()
    for e in isa.kernel_menu("sm_90a"):
        try:
            got = _plan(e["config"], act)["act_grad_in_kernel"]
        except ValueError:  # an entry this problem cannot be forced on (decode-only, not built)
            continue
        want = fused and e["epilogue"] == "tma-store-overlap" and e["block_n"] % 128 == 0 and not e["split_k"]
        assert got == want, e
        seen.add(got)
    assert seen == ({True, False} if fused else {False})
    with pytest.raises(ValueError, match="act_grad must be"):
        _plan(act="tanh")


# (lhs shape, rhs shape, dimension numbers): a Dense layer, 3-D tokens, a weight stored (N, K), lhs stored (K, M)
# (its gradient GEMM writes z's dims in another order; M = 40: 80-byte rows, which TMA reads on a GPU), a batched pair.
CASES = [((48, 80), (80, 40), (((1,), (0,)), ((), ()))),
         ((2, 24, 64), (64, 72), (((2,), (0,)), ((), ()))),
         ((40, 96), (56, 96), (((1,), (1,)), ((), ()))),
         ((64, 40), (64, 24), (((0,), (0,)), ((), ()))),
         ((3, 16, 40), (3, 40, 24), (((2,), (1,)), ((0,), (0,))))]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_input_activation_value_and_gradients(path, act, case, seed):
    """dot_general(z, w, input_activation=act) is dot_general(act(z), w) (the same ops: bitwise), and its gradients
    are (g . w^T) * act'(z) and act(z)^T . g, against float64."""
    zs, ws, dn = CASES[case]
    z, w = rand(seed, zs, BF16, scale=2.0), rand(seed + 1, ws, BF16)
    fused = lambda z, w: jax_tmem.dot_general(z, w, dn, input_activation=act)
    plain = lambda z, w: jax_tmem.dot_general(gemm_op.apply_activation(z, act), w, dn)
    y = run_path(path, fused, z, w)
    np.testing.assert_array_equal(f64(y), f64(run_path(path, plain, z, w)))
    r = rand(seed + 2, y.shape, F32)
    loss = lambda z, w: jnp.sum(fused(z, w).astype(jnp.float32) * r)
    with jax_tmem.use_path(path):
        gz, gw = jax.jit(jax.grad(loss, argnums=(0, 1)))(z, w)
    assert gz.dtype == BF16 and gw.dtype == BF16
    h = act64(z, act)
    # float64 reference through jax's own autodiff of the unfused product (x64 off: numpy does the float64 math)
    (lc, rc), (lb, rb) = dn
    y64, vjp = jax.vjp(lambda hh, ww: jax.lax.dot_general(hh, ww, dn, precision="highest"),
                       h.astype(np.float32), f64(w).astype(np.float32))
    dh, dw = (f64(t) for t in vjp(np.asarray(r, np.float32)))
    want_z, want_w = dh * dact64(z, act), dw
    for got, want, name in ((gz, want_z, "z"), (gw, want_w, "w")):
        np.testing.assert_allclose(f64(got), want, rtol=0, atol=2e-2 * float(np.max(np.abs(want))), err_msg=name)


def test_input_activation_under_vmap(seed):
    z, w = rand(seed, (3, 16, 32), BF16), rand(seed + 1, (32, 24), BF16)
    f = lambda z: jax_tmem.dot_general(z, w, (((1,), (0,)), ((), ())), input_activation="silu")
    with jax_tmem.use_path("kernel"):
        y = jax.jit(jax.vmap(f))(z)
        g = jax.jit(jax.grad(lambda z: jnp.sum(jax.vmap(f)(z).astype(jnp.float32) ** 2)))(z)
    assert_close(y, np.einsum("bmk,kn->bmn", act64(z, "silu"), f64(w)), BF16, 32)
    y64 = np.einsum("bmk,kn->bmn", act64(z, "silu"), f64(w))
    want = np.einsum("bmn,kn->bmk", 2 * y64, f64(w)) * dact64(z, "silu")
    np.testing.assert_allclose(f64(g), want, rtol=0, atol=2e-2 * float(np.max(np.abs(want))))


def test_input_activation_errors():
    z, w = rand(0, (8, 16), BF16), rand(1, (16, 8), BF16)
    dn = (((1,), (0,)), ((), ()))
    with pytest.raises(ValueError, match="input_activation='tanh' is not supported"):
        jax_tmem.dot_general(z, w, dn, input_activation="tanh")
    with pytest.raises(ValueError, match="not combined with quantize=, a quantizing recipe or c="):
        jax_tmem.dot_general(z, w, dn, input_activation="gelu", recipe="fp8")
    with pytest.raises(ValueError, match="not combined with quantize="):
        jax_tmem.dot_general(z, w, dn, input_activation="gelu", c=jnp.zeros((8, 8), BF16))
    with pytest.raises(TypeError, match="lhs and rhs of one dtype"):
        jax_tmem.dot_general(z, w.astype(F32), dn, input_activation="gelu")
    with pytest.raises(ValueError, match="an unquantized recipe"):
        jax_tmem.dot_general_op("mxfp8", input_activation="gelu")


def test_flax_linen_dense_input_activation(seed):
    """Dense(d, input_activation="gelu_tanh")(z) has nn.Dense(d)(nn.gelu(z))'s parameters, value and gradients."""
    nn = pytest.importorskip("flax.linen")
    import jax_tmem.flax.linen as jtl
    z = rand(seed, (4, 24, 48), BF16, scale=2.0)
    ours, theirs = jtl.Dense(32, input_activation="gelu_tanh", dtype=BF16), nn.Dense(32, dtype=BF16)
    params = theirs.init(jax.random.key(0), z)
    assert jax.tree.structure(ours.init(jax.random.key(0), z)) == jax.tree.structure(params)
    loss = lambda m, f: lambda p: jnp.sum(m.apply(p, f(z)).astype(jnp.float32) ** 2)
    with jax_tmem.use_path("kernel"):
        y, g = jax.jit(jax.value_and_grad(loss(ours, lambda t: t)))(params)
    y2, g2 = jax.jit(jax.value_and_grad(loss(theirs, nn.gelu)))(params)
    np.testing.assert_allclose(float(y), float(y2), rtol=2e-2)
    for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(g2)):
        np.testing.assert_allclose(f64(a), f64(b), rtol=0, atol=3e-2 * float(np.max(np.abs(f64(b)))))
    with pytest.raises(ValueError, match="cannot be combined with a dot_general"):
        jtl.Dense(8, input_activation="gelu", dot_general=jax.lax.dot_general)


def test_flax_nnx_linear_input_activation(seed):
    nnx = pytest.importorskip("flax.nnx")
    import jax_tmem.flax.nnx as jtn
    z = rand(seed, (16, 24), BF16, scale=2.0)
    ours = jtn.Linear(24, 8, input_activation="silu", dtype=BF16, rngs=nnx.Rngs(0))
    theirs = nnx.Linear(24, 8, dtype=BF16, rngs=nnx.Rngs(0))
    with jax_tmem.use_path("kernel"):
        y = ours(z)
    assert_close(y, f64(theirs(jax.nn.silu(z))), BF16, 24, factor=2.0)
    with pytest.raises(ValueError, match="cannot be combined with a dot_general"):
        jtn.Linear(24, 8, input_activation="silu", dot_general=jax.lax.dot_general, rngs=nnx.Rngs(0))
