"""jax.export of programs holding jax_tmem's GEMMs (jax_tmem/export.py): shape-polymorphic exports run XLA's ops
with the same semantics (the kernels are planned for concrete shapes), concrete ones keep the custom calls and
serialize with jax_tmem.export.disabled_checks(). Runs on every platform (the CPU handler on the CPU)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

import jax_tmem
from conftest import F32, assert_close, rand, ref_epilogue, ref_matmul, seed_of

BF16 = jnp.bfloat16
DN = (((1,), (0,)), ((), ()))


def _cases(s):
    w = rand(s, (64, 48), F32)
    bias = rand(s + 1, (48,), F32)
    return {  # name: (fn of x, symbolic spec of x, concrete shape, float64 reference of x or None)
        "matmul, bias, gelu": (lambda x: jax_tmem.matmul(x, w, bias=bias, activation="gelu"), "b, 64", (5, 64),
                               lambda x: ref_epilogue(ref_matmul(x, w), bias=np.asarray(bias, np.float64),
                                                      activation="gelu")),
        "matmul, batched": (lambda x: jax_tmem.matmul(x, w), "b, s, 64", (2, 3, 64),
                            lambda x: ref_matmul(x, w)),
        "dot_general, c": (lambda x: jax_tmem.dot_general(x, w, DN, c=jnp.ones((x.shape[0], 48), F32)), "b, 64",
                           (7, 64), lambda x: ref_epilogue(ref_matmul(x, w), c=np.ones((7, 48)))),
        "einsum": (lambda x: jax_tmem.einsum("bsk,kn->bsn", x, w), "b, s, 64", (2, 5, 64),
                   lambda x: ref_matmul(x, w)),
        "grad": (lambda x: jax.grad(lambda x: jnp.sum(jax_tmem.matmul(x, w, precision="highest") ** 2))(x), "b, 64",
                 (3, 64),  # (float32 products: no tf32 on a GPU)
                 lambda x: 2 * (np.asarray(x, np.float64) @ np.asarray(w, np.float64)) @ np.asarray(w, np.float64).T),
        "vmap": (lambda x: jax.vmap(lambda r: jax_tmem.matmul(r, w))(x), "b, 4, 64", (3, 4, 64),
                 lambda x: ref_matmul(x, w)),
        "fp8 recipe": (lambda x: jax_tmem.dot_general(x, w, DN, recipe="fp8"), "b, 64", (6, 64), None),
        "mxfp8 quantize=": (lambda x: jax_tmem.dot_general(x, w, DN, quantize="mxfp8"), "b, 64", (6, 64), None),
        "quantize": (lambda x: jax_tmem.quantize(x, "mxfp8")[0].astype(F32), "b, 64", (4, 64), None),
    }


@pytest.mark.parametrize("case", list(_cases(0)))
def test_shape_polymorphic_export_runs_xla_with_the_same_semantics(case):
    """A jax_tmem call with symbolic dimensions traces to XLA's ops (it raised InconclusiveDimensionOperation
    before 2026-11-28), says so in the log, and the exported program computes what the call computes on the
    "xla" path for each concrete shape."""
    s = seed_of("export-sym", case)
    fn, spec, shape, ref = _cases(s)[case]
    jax_tmem.clear_decisions()
    exp = export.export(jax.jit(fn))(jax.ShapeDtypeStruct(export.symbolic_shape(spec), F32))
    assert any("symbolic dimensions" in d.reason for d in jax_tmem.decisions()), jax_tmem.decisions()
    assert "jax_tmem_" not in exp.mlir_module(), "a jax_tmem custom call with symbolic shapes was exported"
    x = rand(s + 7, shape, F32)
    got = exp.call(x)
    with jax_tmem.use_path("xla"):
        want = jax.jit(lambda x: fn(x))(x)
    if ref is None:  # the quantized forms: what the same ops give under jit on the "xla" path
        np.testing.assert_array_equal(np.asarray(got, np.float64), np.asarray(want, np.float64))
    else:
        assert_close(got, ref(x), F32, 64)
        assert_close(want, ref(x), F32, 64)


def test_symbolic_dims_with_a_forced_kernel_path_raise_in_words():
    w = rand(1, (64, 32), F32)
    spec = jax.ShapeDtypeStruct(export.symbolic_shape("b, 64"), F32)
    for fn in (lambda x: jax_tmem.matmul(x, w, path="kernel"),
               lambda x: jax_tmem.dot_general(x, w, DN, path="kernel"),
               lambda x: jax_tmem.quantize(x, "mxfp8", path="kernel")[0]):
        with pytest.raises(ValueError, match="symbolic dimensions|no GPU"):
            export.export(jax.jit(fn))(spec)


def test_shape_polymorphic_export_for_cuda_holds_no_custom_call(as_if_on):
    """Lowered for an sm_90a GPU (as if on one: nothing compiled), the polymorphic program has no jax_tmem call,
    and the same function with concrete shapes has the GEMM's."""
    as_if_on(90, 132)
    w = rand(2, (256, 512), BF16)
    fn = jax.jit(lambda x: jax_tmem.matmul(x, w))
    poly = export.export(fn, platforms=("cuda",))(jax.ShapeDtypeStruct(export.symbolic_shape("b, 256"), BF16))
    assert "jax_tmem_gemm" not in poly.mlir_module()
    conc = export.export(fn, platforms=("cuda",), disabled_checks=jax_tmem.export.disabled_checks())(
        jax.ShapeDtypeStruct((128, 256), BF16))
    assert "jax_tmem_gemm" in conc.mlir_module()


def test_concrete_export_serializes_with_the_disabled_checks():
    """With concrete shapes on the kernel path the program holds jax_tmem_gemm: jax.export refuses it by default
    (JAX's message), takes it with jax_tmem.export.disabled_checks(), and the deserialized program, its handlers
    registered, gives the same bits as the jitted call."""
    s = seed_of("export-conc")
    w, x = rand(s, (64, 48), F32), rand(s + 1, (16, 64), F32)
    fn = jax.jit(lambda x: jax_tmem.matmul(x, w, activation="relu", path="kernel"))
    spec = jax.ShapeDtypeStruct(x.shape, F32)
    with pytest.raises(ValueError, match="custom calls whose targets have no compatibility guarantees"):
        export.export(fn)(spec)
    exp = export.export(fn, disabled_checks=jax_tmem.export.disabled_checks())(spec)
    assert "jax_tmem_gemm" in exp.mlir_module()
    assert jax_tmem.export.register()["cpu"] == ""
    try:  # (serialization needs the flatbuffers package, which jax does not require)
        import flatbuffers  # noqa: F401
        exp = export.deserialize(exp.serialize())
    except ImportError:
        pass
    got = exp.call(x)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(fn(x)))
    assert_close(got, ref_epilogue(ref_matmul(x, w), activation="relu"), F32, 64)


def test_targets_name_every_handler_of_the_build():
    from jax_tmem._core import ext
    mod, why = ext.load()
    if mod is None:
        pytest.skip(why)
    names = {n for targets in mod.registrations().values() for n in targets}
    assert names <= set(jax_tmem.export.TARGETS)
    if mod.build_info()["cuda"]:
        assert names == set(jax_tmem.export.TARGETS)
