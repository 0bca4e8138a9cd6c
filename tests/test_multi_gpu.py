"""jax_tmem on several GPUs of one process: every device, in any order, at once, from many threads.

Each kernel instantiation keeps per-device state (the dynamic shared-memory attribute, the cluster
occupancy), so these tests touch the devices in both orders in fresh processes, run both devices in
one program (shard_map; jit with sharded operands; a collective right after our call; a
tensor-parallel MLP training step against lax.dot_general), dispatch from many threads, and check that
an error on one device comes back as an exception that names it. They need at least two GPUs and skip
with the reason elsewhere.
"""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import jax_tmem
from jax_tmem._core import arch as _arch, ext as _ext
from jax_tmem.report import collectives as count_collectives

from conftest import BF16, rand, seed_of

pytestmark = pytest.mark.gpu

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "multi_gpu_worker.py")


def _gpus():
    if jax.default_backend() != "gpu":
        return []
    return [d for d in jax.local_devices() if d.platform == "gpu"]


def _require_two_gpus():
    gpus = _gpus()
    if len(gpus) < 2:
        pytest.skip(f"needs at least two GPUs in this process (it sees {len(gpus)})")
    cc, why = _arch.device_cc()
    arch, why = _arch.arch_target(cc) if cc > 0 else ("", why)
    if not arch:
        pytest.skip(why)
    return gpus[:2]


def _mesh(gpus, name="d"):
    return Mesh(np.array(gpus), (name,))


def _ref64(a, b):
    return np.asarray(a.astype(jnp.float32), np.float64) @ np.asarray(b.astype(jnp.float32), np.float64)


def _rel_err(got, ref):
    return np.abs(np.asarray(got, np.float64) - ref).max() / np.abs(ref).max()


@pytest.mark.parametrize("order", ["0,1", "1,0"])
def test_every_menu_entry_on_each_device_in_either_order(order):
    """A fresh process runs every menu entry (split-K and swap-AB included) on one GPU, then on the
    other: the second device must work although each instantiation first ran elsewhere."""
    _require_two_gpus()
    r = subprocess.run([sys.executable, "-P", WORKER, order, "menu"], capture_output=True, text=True,
                       timeout=600, env=dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false"))
    assert r.returncode == 0 and "ALL OK" in r.stdout, (r.stdout[-3000:], r.stderr[-3000:])
    assert f"ok device {order[-1]} config 14" in r.stdout, r.stdout[-2000:]


def test_every_menu_entry_on_the_second_device_in_process():
    """The same sweep in this process (where other tests ran kernels on the first GPU before), on the
    second GPU."""
    _require_two_gpus()
    import multi_gpu_worker
    multi_gpu_worker.run_cases([0, 1], "menu", log=lambda s: None)


def test_shard_map_rows_and_psum_after_the_call():
    """Both devices run our kernel in one program under shard_map: rows split across devices, and K
    split across devices with a psum (a collective) right after the call."""
    gpus = _require_two_gpus()
    mesh = _mesh(gpus)
    s = seed_of("shard_map")
    x = rand(s, (512, 1024), BF16)
    w = rand(s + 1, (1024, 768), BF16)
    ref = _ref64(x, w)

    rows = jax.jit(jax.shard_map(lambda a, b: jax_tmem.matmul(a, b, out_dtype=jnp.float32, path="kernel"),
                                 mesh=mesh, in_specs=(P("d", None), P()), out_specs=P("d", None)))
    got = rows(x, w)
    assert {sh.device for sh in got.addressable_shards} == set(gpus)
    assert _rel_err(got, ref) < 1e-4

    def k_split(a, b):
        return jax.lax.psum(jax_tmem.matmul(a, b, out_dtype=jnp.float32, path="kernel"), "d")

    ksum = jax.jit(jax.shard_map(k_split, mesh=mesh, in_specs=(P(None, "d"), P("d", None)), out_specs=P()))
    assert _rel_err(ksum(x, w), ref) < 1e-4


def test_jit_with_sharded_operands():
    """jit with NamedSharding operands (XLA moves data around our call as it needs): the value equals
    the unsharded product, and the result lives on both devices."""
    gpus = _require_two_gpus()
    mesh = _mesh(gpus)
    s = seed_of("jit_sharded")
    x = jax.device_put(rand(s, (1024, 512), BF16), NamedSharding(mesh, P("d", None)))
    w = jax.device_put(rand(s + 1, (512, 1040), BF16), NamedSharding(mesh, P(None, "d")))
    f = jax.jit(lambda a, b: jax_tmem.matmul(a, b, out_dtype=jnp.float32, path="kernel"),
                out_shardings=NamedSharding(mesh, P("d", None)))
    got = f(x, w)
    assert _rel_err(got, _ref64(x, w)) < 1e-4
    assert {sh.device for sh in got.addressable_shards} == set(gpus)


def _mlp_loss(mm, params, x):
    w1, w2 = params
    h = jax.nn.gelu(mm(x, w1).astype(jnp.float32)).astype(jnp.bfloat16)
    y = mm(h, w2).astype(jnp.float32)
    return jnp.mean((y - x.astype(jnp.float32)) ** 2)


def _tp_mlp(mm, mesh, x, w1, w2):
    rep = NamedSharding(mesh, P())
    col, row = NamedSharding(mesh, P(None, "d")), NamedSharding(mesh, P("d", None))
    step = jax.jit(jax.value_and_grad(lambda p, xx: _mlp_loss(mm, p, xx)),
                   in_shardings=((col, row), rep), out_shardings=(rep, (col, row)))
    return step((w1, w2), x)


def test_tensor_parallel_mlp_training_step_matches_lax():
    """The Megatron MLP step (w1 split by columns, w2 by rows, jit + NamedSharding, forward and
    backward) completes on two GPUs and gives lax.dot_general's loss and gradients."""
    gpus = _require_two_gpus()
    mesh = _mesh(gpus)
    s = seed_of("tp_mlp")
    x = rand(s, (1024, 1024), BF16)
    w1 = rand(s + 1, (1024, 4096), BF16, scale=0.03)
    w2 = rand(s + 2, (4096, 1024), BF16, scale=0.03)
    ours = lambda a, b: jax_tmem.matmul(a, b, out_dtype=jnp.bfloat16, path="kernel")
    lax_mm = lambda a, b: jax.lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=jnp.bfloat16)
    jax_tmem.clear_decisions()
    loss, (g1, g2) = jax.block_until_ready(_tp_mlp(ours, mesh, x, w1, w2))
    assert any(d.path == "kernel" for d in jax_tmem.decisions())
    loss_x, (g1x, g2x) = _tp_mlp(lax_mm, mesh, x, w1, w2)
    np.testing.assert_allclose(float(loss), float(loss_x), rtol=2e-3)
    for g, gx in ((g1, g1x), (g2, g2x)):
        gx64 = np.asarray(gx.astype(jnp.float32), np.float64)
        assert _rel_err(g.astype(jnp.float32), gx64) < 2e-2
    # and the same step on one GPU (unsharded): equal within accumulation tolerance (the sharded step sums
    # w2's partial products in bf16 over the devices, the one-GPU step accumulates all of K in f32)
    one = jax.device_put((w1, w2, x), gpus[0])
    loss1, (g11, g21) = jax.jit(jax.value_and_grad(lambda p, xx: _mlp_loss(ours, p, xx)))(one[:2], one[2])
    np.testing.assert_allclose(float(loss), float(loss1), rtol=2e-3)
    for g, g1gpu in ((g1, g11), (g2, g21)):
        assert _rel_err(g.astype(jnp.float32), np.asarray(g1gpu.astype(jnp.float32), np.float64)) < 2e-2


def test_many_threads_dispatch_to_both_devices():
    """Eight threads call jitted GEMMs on both devices at once (XLA runs the devices' thunks from
    different threads); every result is bitwise the first one computed on that device."""
    gpus = _require_two_gpus()
    s = seed_of("threads")
    x = rand(s, (2056, 520), BF16)
    w = rand(s + 1, (520, 1032), BF16)
    xs = [jax.device_put(x, g) for g in gpus]
    ws = [jax.device_put(w, g) for g in gpus]
    f = jax.jit(lambda a, b: jax_tmem.matmul(a, b, out_dtype=jnp.float32, path="kernel"))
    first = [np.asarray(f(xs[i], ws[i])) for i in range(2)]
    assert _rel_err(first[0], _ref64(x, w)) < 1e-4
    np.testing.assert_array_equal(first[0], first[1])

    def work(t):
        i = t % 2
        for _ in range(10):
            out = f(xs[i], ws[i])
            assert out.devices() == {gpus[i]}
            np.testing.assert_array_equal(np.asarray(out), first[i])
        return i

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        assert sorted(pool.map(work, range(16))) == [0] * 8 + [1] * 8


def test_error_on_one_device_names_it():
    """An inconsistent call on the second GPU raises a Python exception that names that GPU and the
    cause; both devices keep working afterwards."""
    gpus = _require_two_gpus()
    ok, why = _ext.ensure_registered("cuda")
    assert ok, why
    m, n, k = 64, 32, 48
    out_types = (jax.ShapeDtypeStruct((m, n), jnp.float32), jax.ShapeDtypeStruct((1,), jnp.float32))
    attrs = _ext.gemm_attrs(["a", "b"], batch=1, m=m, n=n, k=k, a_mn_major=False, b_mn_major=True, lda=k, ldb=n,
                            stride_a=0, stride_b=0)
    call = jax.ffi.ffi_call("jax_tmem_gemm", out_types)
    bad = jax.jit(lambda a, b: call(a, b, **{**attrs, "m": np.int64(2 * m)})[0])
    a = rand(1, (m, k), BF16)
    b = rand(2, (k, n), BF16)
    with pytest.raises(RuntimeError, match=r"jax_tmem gemm on GPU 1: .*operand a"):
        jax.block_until_ready(bad(jax.device_put(a, gpus[1]), jax.device_put(b, gpus[1])))
    good = jax.jit(lambda x, y: jax_tmem.matmul(x, y, out_dtype=jnp.float32, path="kernel"))
    for g in gpus:
        assert _rel_err(good(jax.device_put(a, g), jax.device_put(b, g)), _ref64(a, b)) < 1e-4


def _collectives(f, *args):
    return count_collectives(f.lower(*args).compile().as_text())


@pytest.mark.parametrize("fmt", ["mxfp8", "nvfp4"])
@pytest.mark.parametrize("axis", [-1, 0])
def test_fused_quantize_kernel_partitions(fmt, axis):
    """The CUDA quantize kernel under jit with x split by rows and along the quantized axis (whole blocks):
    no communication, bit-identical to the one-GPU call, data and scales sharded like x."""
    gpus = _require_two_gpus()
    mesh = _mesh(gpus)
    x = rand(seed_of(f"q-{fmt}-{axis}"), (512, 1024), BF16, 1.0)
    gs = jnp.float32(0.5) if fmt == "nvfp4" else None
    q = jax.jit(lambda v: jax_tmem.quantize(v, fmt, axis=axis, global_scale=gs, path="kernel"))
    want = q(jax.device_put(x, gpus[0]))
    for spec in (P("d", None), P(None, "d")):
        xs = jax.device_put(x, NamedSharding(mesh, spec))
        got = q(xs)
        assert not any(_collectives(q, xs).values()), _collectives(q, xs)
        for g, w in zip(got, want):
            assert np.array_equal(np.asarray(g).view(np.uint8), np.asarray(w).view(np.uint8)), spec
        # (equivalence, not spec equality: jax 0.11 writes P('d', None) as P('d',))
        assert got[0].sharding.is_equivalent_to(NamedSharding(mesh, spec), got[0].ndim), got[0].sharding


@pytest.mark.parametrize("split", ["m", "k"])
def test_block_scaled_kernel_partitions(split):
    """The sm_90a block-scaled GEMM (path='kernel') with its scales following the data: M split: no
    communication, bitwise the one-GPU result; K split: one all-reduce of the partial products."""
    gpus = _require_two_gpus()
    mesh = _mesh(gpus)
    a = rand(seed_of("sm-a"), (1, 512, 1024), BF16, 1.0)
    b = rand(seed_of("sm-b"), (1, 256, 1024), BF16, 1.0)
    aq, sa = jax_tmem.quantize(a, "mxfp8", path="xla")
    bq, sb = jax_tmem.quantize(b, "mxfp8", path="xla")
    f = jax.jit(lambda *v: jax_tmem.scaled_matmul(*v, jnp.float32, path="kernel"))
    want = np.asarray(f(*(jax.device_put(v, gpus[0]) for v in (aq, bq, sa, sb))))
    sp = (P(None, "d", None), P()) if split == "m" else (P(None, None, "d"), P(None, None, "d"))
    args = [jax.device_put(v, NamedSharding(mesh, s)) for v, s in zip((aq, bq, sa, sb), sp + sp)]
    got = np.asarray(f(*args))
    c = _collectives(f, *args)
    assert c["all-gather"] == 0 and c["all-reduce"] == (split == "k"), c
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err == 0.0 if split == "m" else err < 1e-6, err


def test_output_split_over_the_contraction_is_a_reduce_scatter_on_gpus():
    """Row-parallel GEMM with the output wanted split over the same mesh axis: our program holds one
    reduce-scatter and no all-reduce (XLA's GPU pipeline gives lax.dot_general's the same), the values of
    the one-GPU product."""
    gpus = _require_two_gpus()
    mesh = _mesh(gpus)
    x = rand(seed_of("rs-x"), (512, 1024), BF16, 1.0)
    w = rand(seed_of("rs-w"), (1024, 768), BF16, 0.05)
    xs, ws = jax.device_put(x, NamedSharding(mesh, P(None, "d"))), jax.device_put(w, NamedSharding(mesh, P("d", None)))
    out = NamedSharding(mesh, P("d", None))
    ours = jax.jit(lambda a, b: jax_tmem.matmul(a, b, out_dtype=jnp.float32, path="kernel"), out_shardings=out)
    lax_ = jax.jit(lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32), out_shardings=out)
    c, cx = _collectives(ours, xs, ws), _collectives(lax_, xs, ws)
    assert c["reduce-scatter"] == 1 and c["all-reduce"] == 0 and c["all-gather"] == 0, (c, cx)
    assert sum(c.values()) <= sum(cx.values()), (c, cx)
    assert _rel_err(ours(xs, ws), _ref64(x, w)) < 1e-2


@pytest.mark.parametrize("recipe", ["fp8", "mxfp8"])
def test_recipe_gradients_partition(recipe):
    """A column- then row-parallel MLP's gradients through a quantized recipe on two GPUs: no all-gather,
    the weights' gradients sharded like the weights, the one-GPU gradients."""
    gpus = _require_two_gpus()
    mesh = _mesh(gpus)
    x = rand(seed_of("rg-x"), (256, 512), BF16, 1.0)
    w1 = rand(seed_of("rg-w1"), (512, 1024), BF16, 0.05)
    w2 = rand(seed_of("rg-w2"), (1024, 512), BF16, 0.05)
    dg = lambda a, b: jax_tmem.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32,
                                           recipe=recipe)
    loss = lambda u, v, a: jnp.sum(dg(jnp.tanh(dg(a, u)).astype(jnp.bfloat16), v) ** 2)
    g = jax.jit(jax.grad(loss, argnums=(0, 1)))
    want = g(*(jax.device_put(v, gpus[0]) for v in (w1, w2, x)))
    args = (jax.device_put(w1, NamedSharding(mesh, P(None, "d"))), jax.device_put(w2, NamedSharding(mesh, P("d", None))),
            jax.device_put(x, NamedSharding(mesh, P())))
    got = g(*args)
    assert _collectives(g, *args)["all-gather"] == 0, _collectives(g, *args)
    assert got[0].sharding.is_equivalent_to(NamedSharding(mesh, P(None, "d")), 2), got[0].sharding
    assert got[1].sharding.is_equivalent_to(NamedSharding(mesh, P("d", None)), 2), got[1].sharding
    # Another summation order moves some values across a rounding boundary of the quantized gradients
    # (e5m2 in "fp8": one step is 25 % of that value), so the two-GPU gradients may differ from the
    # one-GPU ones by as much as the recipe's own quantization error (against the bf16 recipe), not more.
    loss16 = lambda u, v, a: jnp.sum(jax_tmem.dot_general(
        jnp.tanh(jax_tmem.dot_general(a, u, (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32)).astype(
            jnp.bfloat16), v, (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32) ** 2)
    exact = jax.jit(jax.grad(loss16, argnums=(0, 1)))(*(jax.device_put(v, gpus[0]) for v in (w1, w2, x)))
    for u, v, e in zip(got, want, exact):
        u, v, e = (np.asarray(t, np.float64) for t in (u, v, e))
        err, qerr = np.abs(u - v).max() / np.abs(v).max(), np.abs(v - e).max() / np.abs(e).max()
        assert err < max(2e-2, 1.5 * qerr), f"gradient max |diff| / max {err:.3g} (the recipe's own error {qerr:.3g})"
