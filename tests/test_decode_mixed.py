"""16-bit activations x an fp8 weight (bf16 / f16 tokens times e4m3 weights: weight-only fp8 serving; issue 15).

sm_90a's decode entries (cpp/include/jax_tmem/kernels/dense_decode.cuh, kMix) read an fp8 weight stored (K, N)
(Flax's layout) in place, one byte per element, widen it on chip (exactly) to the activations' type and run
bf16 / f16 mma.sync (M <= 8) or wgmma (9-32 tokens where its 64-column CTAs fill the SMs). Every other problem
with the mix goes to XLA's dot of the pair as it is (XLA widens the weight inside its GEMM: faster than our
16-bit kernels after a widening pass, and than our (N, K) form of the mix); only a forced "kernel" path widens
the weight in memory for the 16-bit kernels. The decision log says which and why. The result is the widened
problem's either way: fp8 -> 16-bit is exact.

Host tests (any machine): the families and plans (cpp/include/jax_tmem/menu_decode.h), the C++ reference
(path "kernel" on the CPU) computing the mix bitwise as the widened problem, the decision log. GPU tests
(sm_90a): the heuristic's plans against the float64 reference on either weight layout with tails, NaN-poisoned
outputs, bitwise repeatable, no widening in the compiled program where a kernel reads the mix; XLA's dot
elsewhere. (Every decode entry forced on the mix, (N, K) too, with the full epilogue: tests/test_decode_mma.py.)"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_tmem
from jax_tmem import isa
from jax_tmem._core import arch as _arch, canon as _canon

from conftest import BF16, E4M3, F16, F32, rand, seed_of
from test_gpu_gemm import _ref, _require_kernels, _run_poisoned, _tol

NK = (((1,), (1,)), ((), ()))  # x (M, K) . w (N, K)
KN = (((1,), (0,)), ((), ()))  # x (M, K) . w (K, N)


def test_the_mixed_families_are_decode_only_and_sm90a_only():
    raw = _arch._families_raw("sm_90a")
    for a in ("bfloat16", "float16"):
        for bmn in (False, True):
            assert (a, "float8_e4m3fn", False, bmn, True) in raw  # decode problems only
    assert not any(f[0] in ("bfloat16", "float16") and f[1].startswith("float8") for f in _arch._families_raw("sm_100a"))
    # the dense (non-decode) entries refuse the mix, by name
    assert "runs the decode" in isa.entry_reads("sm_90a", 9, BF16, E4M3)  # 128x256 cooperative


@pytest.mark.parametrize("m,n,kn,expect", [
    (1, 4096, True, 28), (8, 6144, True, 30),         # (K, N): ldmatrix.trans, 64 rows per CTA
    (1, 28672, True, 31),                             # 128-row CTAs once they fill the SMs
    (16, 8192, True, 32), (17, 28672, True, 33), (32, 57344, True, 33),  # the wgmma form where it fills the SMs
    (16, 6144, True, None), (32, 4096, True, None),   # ... and not where it does not (96 / 64 CTAs: XLA),
    (33, 57344, True, None),                          # nor above 32 tokens (each CTA reads them all)
    (1, 4096, False, None), (8, 28672, False, None),  # (N, K): XLA's GEMM, which widens the weight too
    (65, 57344, True, None),                          # more tokens: no kernel reads the mix
])
def test_which_mixed_problems_the_decode_entries_take(m, n, kn, expect):
    plan = isa.kernel_plan("sm_90a", m, n, 4096, a_dtype=BF16, b_dtype=E4M3, b_mn_major=kn, num_sms=132)
    dn = KN if kn else NK
    canon = _canon.canonicalize((m, 4096), (4096, n) if kn else (n, 4096), dn)
    if expect is None:
        assert plan["config"] not in range(25, 35), plan
        assert not _arch.decode_reads("sm_90a", canon, BF16, E4M3)
        assert _arch.check("sm_90a", canon, BF16, E4M3, BF16, True)  # a reason, so the pair is widened
    else:
        assert (plan["config"], plan["splits"], plan["workspace_floats"]) == (expect, 1, 0), plan
        assert _arch.decode_reads("sm_90a", canon, BF16, E4M3)
        assert _arch.check("sm_90a", canon, BF16, E4M3, BF16, True) == ""
    # a forced wgmma entry does not read an (N, K) weight of the mix (its fragments are in mma.sync's K order)
    with pytest.raises(ValueError, match="16-bit x fp8: mma.sync entries only"):
        isa.kernel_plan("sm_90a", 16, 512, 512, a_dtype=BF16, b_dtype=E4M3, config=32)
    assert isa.kernel_plan("sm_90a", 4, 512, 512, a_dtype=BF16, b_dtype=E4M3, config=25)["config"] == 25  # forced


@pytest.mark.parametrize("adt", [BF16, F16], ids=["bf16", "f16"])
@pytest.mark.parametrize("kn", [False, True], ids=["w_NK", "w_KN"])
def test_cpu_reference_computes_the_mix_as_the_widened_problem(adt, kn):
    """path "kernel" on the CPU runs the C++ reference on the mix as it is (no widening in the program):
    bitwise the widened problem's result, and the float64 one within the output's rounding."""
    if jax.default_backend() != "cpu":
        pytest.skip("the C++ CPU reference handler")
    for m, n, k in ((1, 40, 64), (5, 200, 1008), (17, 136, 272)):
        s = seed_of("mixed_cpu", adt, kn, m, n, k)
        x, w = rand(s, (m, k), adt), rand(s + 1, (k, n) if kn else (n, k), E4M3)
        dn = KN if kn else NK
        f = jax.jit(lambda a, b: jax_tmem.dot_general(a, b, dn, preferred_element_type=F32, path="kernel"))
        assert "convert" not in f.lower(x, w).as_text().split("custom_call")[0].split("func.func")[-1]
        jax_tmem.clear_decisions()
        out = np.asarray(f(x, w))
        assert not [d for d in jax_tmem.decisions() if d.op.endswith("widen")]
        widened = np.asarray(jax_tmem.dot_general(x, w.astype(adt), dn, preferred_element_type=F32, path="kernel"))
        np.testing.assert_array_equal(out, widened)
        ref = _ref(x, w, dn)
        assert np.abs(out - ref).max() <= 2e-5 * np.abs(ref).max()
        # matmul takes the mix the same way
        b = w if kn else w.T
        np.testing.assert_array_equal(np.asarray(jax_tmem.matmul(x, b, out_dtype=F32, path="kernel")), widened)


def test_where_no_kernel_reads_the_mix_xla_multiplies_it_as_it_is():
    """Where no kernel reads the mix (here: path "xla", or the CPU's "auto"), XLA's dot gets the pair as it is
    (it widens the weight inside its GEMM); the log names the op, the pair and why. A forced "kernel" path
    with no kernel for the mix widens the weight for the 16-bit kernels (the CPU reference reads the mix)."""
    x, w = rand(1, (3, 64), BF16), rand(2, (64, 32), E4M3)
    ref = _ref(x, w, KN)
    for path in ("xla", "auto"):
        jax_tmem.clear_decisions()
        f = jax.jit(lambda a, b: jax_tmem.dot_general(a, b, KN, preferred_element_type=BF16, path=path))
        y = f(x, w)
        mix = [d for d in jax_tmem.decisions() if d.op == "dot_general mix"]
        if path == "auto" and jax.default_backend() != "cpu":
            continue  # (on a GPU, "auto" may find the kernel: the GPU tests below)
        assert mix and mix[0].problem == "bfloat16 x float8_e4m3fn" and mix[0].path == "xla", jax_tmem.decisions()
        assert "XLA widens the fp8 rhs inside its GEMM" in mix[0].reason, mix[0].reason
        assert not [d for d in jax_tmem.decisions() if d.op.endswith("widen")]
        assert "f8E4M3FN" in f.lower(x, w).as_text()  # the weight enters the program as it is
        assert np.abs(np.asarray(y, np.float64) - ref).max() <= 1e-2 * np.abs(ref).max()


def _require_mix():
    arch = _require_kernels()
    if arch != "sm_90a":
        pytest.skip(f"16-bit x fp8 runs on sm_90a's decode entries ({arch} widens the weight first)")


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k,kn,kernel", [
    (1, 4096, 4096, True, True), (5, 1008, 2064, True, True), (8, 28672, 4096, True, True),
    (9, 8192, 4096, True, True), (16, 8208, 2064, True, True), (32, 28672, 4096, True, True),
    (64, 8192, 1040, True, False),
    (16, 4096, 4096, True, False), (1, 4096, 4096, False, False), (64, 1000, 2064, False, False),
    (65, 8192, 4096, True, False),
])
def test_mixed_decode_on_the_gpu(m, n, k, kn, kernel):
    """The heuristic's plan (no config forced) for bf16 tokens x an e4m3 weight: a decode entry in the log and no
    convert of the weight in the program where a kernel reads the mix, else XLA's dot of the pair (logged); the
    float64 reference of the widened weight, NaN-poisoned output, bitwise repeatable, N / K with tails."""
    _require_mix()
    s = seed_of("mixed_gpu", m, n, k, kn)
    x, w = rand(s, (m, k), BF16), rand(s + 1, (k, n) if kn else (n, k), E4M3)
    dn = KN if kn else NK
    fn = lambda a, b: jax_tmem.dot_general(a, b, dn, preferred_element_type=BF16)
    jax_tmem.clear_decisions()
    o1, o2 = _run_poisoned(fn, (m, n), BF16, x, w)
    gemm = [d for d in jax_tmem.decisions() if d.op == "gemm"]
    if kernel:
        assert gemm and gemm[-1].path == "kernel" and "decode" in gemm[-1].target, jax_tmem.decisions()
        hlo = jax.jit(fn).lower(x, w).compile().as_text()
        assert not any(" convert(" in ln and "f8e4m3fn[" in ln for ln in hlo.splitlines()), "the weight was widened"
    else:
        assert gemm and gemm[-1].path == "xla", jax_tmem.decisions()
        assert [d for d in jax_tmem.decisions() if d.op == "dot_general mix"], jax_tmem.decisions()
    assert not [d for d in jax_tmem.decisions() if d.op.endswith("widen")]
    ref = _ref(x, w, dn)
    assert np.abs(o1 - ref).max() / np.abs(ref).max() < _tol(BF16, BF16)
    np.testing.assert_array_equal(o1, o2)


@pytest.mark.gpu
def test_a_forced_kernel_path_widens_the_mix_no_kernel_reads():
    _require_mix()
    x, w = rand(3, (4, 512), BF16), rand(4, (256, 512), E4M3)  # (N, K): no kernel reads the mix
    jax_tmem.clear_decisions()
    y = np.asarray(jax_tmem.dot_general(x, w, NK, preferred_element_type=F32, path="kernel"))
    widen = [d for d in jax_tmem.decisions() if d.op == "dot_general widen"]
    assert widen and "no kernel reads this bfloat16 x float8_e4m3fn problem" in widen[0].reason, widen
    assert jax_tmem.decisions()[-1].path == "kernel"
    ref = _ref(x, w, NK)
    assert np.abs(y - ref).max() / np.abs(ref).max() < _tol(BF16, F32)
