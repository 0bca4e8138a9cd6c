"""The transpose of 1-byte (fp8) operands (jax_tmem/ops/transpose.py, kernels/transpose8.cuh).

Host tests (any machine): which permutations are batched 2-D swaps, the partitionable call with XLA's
transpose as its local code (jit, vmap) against NumPy, the reasons recorded when XLA transposes. GPU tests:
the CUDA kernel bitwise against NumPy on random bytes (every byte value, tails of partial 128-byte tiles,
batches), and the fp8 GEMMs whose operands are MN-major run it instead of an XLA transpose."""
from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_tmem
from jax_tmem.ops import transpose as tr

from conftest import E4M3, E5M2, seed_of


def _bytes(seed, shape, dtype=E4M3):
    """Random bytes of every value (fp8 NaNs included) viewed as ``dtype``."""
    b = np.random.default_rng(seed).integers(0, 256, size=shape, dtype=np.uint8)
    return jax.lax.bitcast_convert_type(jnp.asarray(b), dtype), b


@pytest.mark.parametrize("perm,want", [
    ((0, 1), None), ((1, 0), (0, 1)), ((0, 2, 1), (1, 2)), ((2, 0, 1), (0, 2)), ((1, 2, 0), (0, 1)),
    ((1, 0, 2), None), ((2, 1, 0), None), ((0, 1, 3, 2), (2, 3)), ((0, 3, 1, 2), (1, 3)), ((2, 3, 0, 1), (0, 2)),
    ((3, 2, 1, 0), None), ((0, 2, 3, 1), (1, 2)),
])
def test_swap_form(perm, want):
    assert tr.swap_form(perm) == want


def test_swap_form_is_a_reshape_swap_for_every_permutation():
    """Every permutation that swap_form accepts is the reshaped 2-D swap; every one it refuses is not one."""
    shape = (2, 3, 5, 7)
    x = np.arange(np.prod(shape)).reshape(shape)
    for perm in itertools.permutations(range(4)):
        form = tr.swap_form(perm)
        ident = list(perm) == sorted(perm)
        swaps = [(j, i) for j in range(4) for i in range(j + 1, 4)
                 if list(perm) == list(range(j)) + list(range(i, 4)) + list(range(j, i))]
        assert form == (swaps[0] if swaps and not ident else None), perm
        if form:
            j, i = form
            y = x.reshape(shape[:j] + (int(np.prod(shape[j:i])), int(np.prod(shape[i:])))).swapaxes(-1, -2)
            np.testing.assert_array_equal(y.reshape(np.transpose(x, perm).shape), np.transpose(x, perm))


@pytest.mark.parametrize("shape,perm", [((8, 12), (1, 0)), ((3, 8, 12), (0, 2, 1)), ((4, 6, 20), (2, 0, 1)),
                                        ((4, 6, 20), (1, 2, 0)), ((2, 4, 8, 4), (0, 3, 1, 2))])
@pytest.mark.parametrize("dtype", [E4M3, E5M2])
def test_partitionable_call_with_xla_local_code(shape, perm, dtype):
    """The call the kernel runs in (reshape, swap, reshape), with jnp.swapaxes as its local code: equal to
    NumPy bit for bit, under jit and vmap."""
    x, b = _bytes(seed_of(shape, perm, str(dtype)), shape, dtype)
    got = jax.jit(lambda v: tr.transpose(v, perm, impl="xla"))(x)
    assert got.dtype == dtype and got.shape == tuple(shape[p] for p in perm)
    np.testing.assert_array_equal(np.asarray(jax.lax.bitcast_convert_type(got, jnp.uint8)), np.transpose(b, perm))
    if len(shape) == 2:  # vmap over a new leading dim: one call with one more batch dim
        xs, bs = _bytes(seed_of(shape, "vmap"), (3,) + shape, dtype)
        got = jax.jit(jax.vmap(lambda v: tr.transpose(v, perm, impl="xla")))(xs)
        np.testing.assert_array_equal(np.asarray(jax.lax.bitcast_convert_type(got, jnp.uint8)), np.swapaxes(bs, 1, 2))


@pytest.mark.parametrize("shape,perm,why", [
    ((8, 12), (1, 0), "no GPU"), ((6, 12), (1, 0), "multiples of 4"), ((8, 4, 12), (1, 0, 2), "not a swap"),
])
def test_xla_transposes_with_a_reason(shape, perm, why):
    if why == "no GPU" and jax.default_backend() == "gpu":
        pytest.skip("a GPU is present: the kernel takes this one")
    x, b = _bytes(seed_of(shape, perm), shape)
    jax_tmem.clear_decisions()
    got = tr.transpose(x, perm)
    np.testing.assert_array_equal(np.asarray(jax.lax.bitcast_convert_type(got, jnp.uint8)), np.transpose(b, perm))
    d = [d for d in jax_tmem.decisions() if d.op == "transpose"]
    assert d and d[-1].path == "xla" and why in d[-1].reason, d


def test_wider_types_are_not_taken():
    x = jnp.ones((8, 8), jnp.bfloat16)
    assert "1-byte" in tr.kernel_reason(x, (1, 0))
    assert "1-byte" in tr.kernel_reason(jnp.ones((8, 8), jnp.float4_e2m1fn), (1, 0))


def test_layouts_are_left_alone_off_the_gpu():
    if jax.default_backend() == "gpu":
        pytest.skip("a GPU is present")
    a, b = jnp.zeros((512, 384), E4M3), jnp.zeros((384, 640), E4M3)
    dn = (((1,), (0,)), ((), ()))
    la, lb, ldn = tr.to_k_major(a, b, dn, "kernel")
    assert la is a and lb is b and ldn == dn


# ---- GPU --------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("shape,perm", [
    ((4, 4), (1, 0)), ((128, 128), (1, 0)), ((132, 260), (1, 0)), ((260, 132), (1, 0)), ((8, 4096), (1, 0)),
    ((4100, 12), (1, 0)), ((1000, 1004), (1, 0)), ((3, 256, 516), (0, 2, 1)), ((5, 4, 36), (2, 0, 1)),
    ((2, 3, 64, 68), (0, 1, 3, 2)), ((2, 2, 130, 8), (0, 3, 1, 2)),
])
def test_kernel_bitwise(shape, perm):
    """The CUDA kernel against NumPy on random bytes of every value: every output byte written (a byte
    left unwritten would show as whatever the buffer held), partial tiles bounds-checked."""
    assert tr.kernel_reason(jnp.zeros(shape, E4M3), perm) == ""
    for trial in range(2):  # fresh bytes each time
        x, b = _bytes(seed_of(shape, perm, trial), shape)
        jax_tmem.clear_decisions()
        got = jax.jit(lambda v: tr.transpose(v, perm))(x)
        assert [d.path for d in jax_tmem.decisions() if d.op == "transpose"] == ["kernel"]
        np.testing.assert_array_equal(np.asarray(jax.lax.bitcast_convert_type(got, jnp.uint8)), np.transpose(b, perm))


@pytest.mark.gpu
@pytest.mark.parametrize("shape,lead,split", [((6, 10), 0, 1), ((3, 5, 7), 1, 2), ((2, 6, 3, 5), 1, 3)])
def test_kernel_byte_path(shape, lead, split):
    """Dims that are not whole words (a sharded program's local blocks can be anything): the handler's
    byte-per-thread kernel, bitwise."""
    from jax_tmem.ops import part_call
    call = tr.TransposeCall(lead, split)
    x, b = _bytes(seed_of(shape, lead), shape)
    (got,) = jax.jit(lambda v: part_call.bind(call, v))(x)
    np.testing.assert_array_equal(np.asarray(jax.lax.bitcast_convert_type(got, jnp.uint8)),
                                  np.transpose(b, call.perm(len(shape))))


@pytest.mark.gpu
def test_kernel_under_vmap_and_in_the_hlo():
    x, b = _bytes(seed_of("vmap-gpu"), (3, 64, 96))
    f = jax.jit(jax.vmap(lambda v: tr.transpose(v, (1, 0))))
    np.testing.assert_array_equal(np.asarray(jax.lax.bitcast_convert_type(f(x), jnp.uint8)), np.swapaxes(b, 1, 2))
    assert "jax_tmem_transpose8" in f.lower(x).compile().as_text()


@pytest.mark.gpu
def test_large_m_fp8_gemm_operands_use_the_kernel():
    """An fp8 GEMM at M = 512 whose weight is stored (K, N) (Flax's layout) and the weight gradient's
    x^T g (both operands MN-major): the operands are transposed by the kernel, and the results equal
    the same GEMM with the operands transposed by NumPy first."""
    if jax.devices()[0].compute_capability != "9.0":
        pytest.skip("the K-major-only fp8 operands are an sm_90a (wgmma) matter")
    key = jax.random.key(seed_of("gemm-kn"))
    x = jax.random.normal(key, (512, 384), jnp.float32).astype(E4M3)
    w = jax.random.normal(jax.random.fold_in(key, 1), (384, 640), jnp.float32).astype(E4M3)
    g = jax.random.normal(jax.random.fold_in(key, 2), (512, 640), jnp.float32).astype(E4M3)
    kn = (((1,), (0,)), ((), ()))
    wgrad = (((0,), (0,)), ((), ()))
    for a, b, dn, a_t, b_t, dn_t in ((x, w, kn, x, w.T, (((1,), (1,)), ((), ()))),
                                      (x, g, wgrad, x.T, g.T, (((1,), (1,)), ((), ())))):
        f = jax.jit(lambda u, v, dn=dn: jax_tmem.dot_general(u, v, dn, preferred_element_type=jnp.float32))
        hlo = f.lower(a, b).compile().as_text()
        assert "jax_tmem_transpose8" in hlo
        assert not [ln for ln in hlo.splitlines() if " transpose(" in ln and "f8e" in ln], hlo
        ref = jax.jit(lambda u, v, dn=dn_t: jax_tmem.dot_general(u, v, dn, preferred_element_type=jnp.float32))(
            jnp.asarray(np.asarray(a_t)), jnp.asarray(np.asarray(b_t)))
        np.testing.assert_array_equal(np.asarray(f(a, b)), np.asarray(ref))
