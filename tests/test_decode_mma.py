"""sm_90a's decode entries (cpp/include/jax_tmem/kernels/dense_decode.cuh; issue 15): mma.sync (25-31) for
up to 16 tokens times a 16-bit or fp8 weight stored (N, K) (16 or 32 weight rows per CTA) or (K, N) (64 or,
fp8, 128 rows, read by ldmatrix.trans), and its wgmma form (32-34: 16-64 tokens, 64 rows, the weight as
wgmma's register A); K split over the CTA's warps (warpgroups) and summed in it (no workspace, no reduce
pass); 51-54 (forced only) are 32-34 and 28 with the K range split over a cluster of 2 CTAs, their sums met in
distributed shared memory (K below one stage: the first CTA of a cluster has no stage; 54 reads a (K, N) weight only).

Host tests (any machine): which problems the plan sends there, and the error for a forced entry on
operands it cannot read. GPU tests (sm_90a): every entry forced on shapes with tails in M, N and K
(K below one stage, M over one token tile), batches (and a weight broadcast over them), every output
dtype, the full epilogue, against the float64 reference; NaN-poisoned outputs, bitwise repeatable; the
heuristic's choice in the decision log; command buffers on and off identical."""
from __future__ import annotations

import textwrap

import jax
import numpy as np
import pytest

import jax_tmem
from jax_tmem import isa
from jax_tmem.ops import gemm as gemm_op

from conftest import BF16, E4M3, E5M2, F16, F32, command_buffer_runs, rand, seed_of
from test_gpu_gemm import _ref, _require_config, _require_kernels, _run_poisoned, _tol, epilogue_case

NK = (((1,), (1,)), ((), ()))  # x (M, K) . w (N, K)
KN = (((1,), (0,)), ((), ()))  # x (M, K) . w (K, N)
DECODE = (25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 51, 52, 53, 54)


@pytest.mark.parametrize("m,n,dtype,b_mn_major,expect", [
    (1, 4096, BF16, False, 25),
    (8, 4096, BF16, False, 25),
    (5, 28672, F16, False, 25),
    (9, 4096, BF16, False, None),   # two token tiles did not pay (26, 27: sweep-only): wgmma swap-AB
    (16, 28672, BF16, False, None),
    (1, 4096, E4M3, False, 25),     # fp8 (N, K)
    (1, 4096, E4M3, True, 28),      # fp8 (K, N): 64-row CTAs filling at most half the SMs: 4 stages
    (8, 6144, E4M3, True, 30),      # more 64-row CTAs: 3 stages (two CTAs per SM)
    (1, 28672, E4M3, True, 31),     # enough 128-row CTAs (128-byte k-rows) to fill the SMs
    (16, 4096, E4M3, True, 32),     # 9-64 tokens: the wgmma form (a warpgroup per K chunk)
    (17, 6144, E4M3, True, 33),
    (64, 6144, E4M3, True, 34),
    (16, 28672, E4M3, True, 32),
    (33, 28672, E4M3, True, None),  # > 16 tokens and many 64-row CTAs (each re-reading the activations):
                                    # the transposing swap-AB entries
    (65, 4096, E4M3, True, None),   # more tokens: the transposing swap-AB entries (tests/test_decode_fp8.py)
    (16, 4096, E4M3, False, None),  # fp8 (N, K) at 9-64 tokens: wgmma's swap-AB
    (1, 4096, BF16, True, 28),      # a (K, N) weight: 64-row CTAs, ldmatrix.trans
    (8, 6144, F16, True, 30),
    (1, 28672, BF16, True, 30),     # 16-bit: no 128-row entry (256-byte k-rows)
    (16, 4096, BF16, True, None),
    (1, 4096, F32, False, None),
])
def test_which_problems_take_the_mma_decode_entries(m, n, dtype, b_mn_major, expect):
    plan = isa.kernel_plan("sm_90a", m, n, 4096, a_dtype=dtype, b_mn_major=b_mn_major)
    if expect is None:
        assert plan["config"] not in DECODE, plan
    else:
        assert (plan["config"], plan["splits"], plan["workspace_floats"]) == (expect, 1, 0), plan
    # Blackwell's plan keeps its own entries (these are sm_90a's)
    assert isa.kernel_plan("sm_100a", m, n, 4096, a_dtype=dtype, b_mn_major=b_mn_major)["config"] not in DECODE


def test_a_forced_decode_entry_names_the_operands_it_reads():
    for dtype, a_mn, b_mn, config in ((E4M3, False, True, 25), (F32, False, False, 25), (BF16, True, False, 25),
                                      (BF16, False, True, 31),  # 16-byte / 256-byte k-rows of a (K, N) weight
                                      (BF16, False, False, 54)):  # its K split over a cluster: (K, N) only
        with pytest.raises(ValueError, match="decode entries .*read a K-major lhs"):
            isa.kernel_plan("sm_90a", 16, 512, 512, a_dtype=dtype, config=config, a_mn_major=a_mn, b_mn_major=b_mn)
    assert isa.kernel_plan("sm_90a", 1, 512, 512, a_dtype=E4M3, config=27, b_mn_major=True)["config"] == 27
    with pytest.raises(ValueError, match="decode entries .*read a K-major lhs"):  # (N, K): <= 64 rows
        isa.kernel_plan("sm_90a", 1, 512, 512, a_dtype=E4M3, config=31)
    assert isa.kernel_plan("sm_90a", 300, 512, 512, config=26)["config"] == 26  # any M, when forced


def _require_decode_entries():
    arch = _require_kernels()
    if arch != "sm_90a":
        pytest.skip(f"the mma.sync decode entries are sm_90a's ({arch} has its own)")


@pytest.mark.gpu
@pytest.mark.parametrize("config", DECODE)
@pytest.mark.parametrize("dtypes", [(BF16, BF16), (F16, F16), (E4M3, E4M3), (E5M2, E4M3), (BF16, E4M3), (F16, E4M3)],
                         ids=["bf16", "f16", "e4m3", "e5m2_e4m3", "bf16_e4m3", "f16_e4m3"])
@pytest.mark.parametrize("w_major", ["K", "MN"], ids=["w_NK", "w_KN"])
def test_mma_decode_entries(config, dtypes, w_major):
    """Each entry forced, on either weight layout: tails in M (1, 5, 13: partial token tiles; 40: several), N
    (not a multiple of 16 / 32 / 64) and K (below one 256-element stage, and a multiple of 8 only); batches with
    the weight batched and broadcast; every output dtype; bias + gelu + alpha, and accumulation into c."""
    _require_decode_entries()
    _require_config("sm_90a", config)
    why = isa.entry_reads("sm_90a", config, *dtypes, b_mn_major=w_major == "MN")  # the extension's own rule
    if why:
        pytest.skip(why)
    cases = [(1, 1000, 4104, 0, BF16, False), (5, 4144, 1032, 0, F32, True), (13, 136, 40, 3, F16, False),
             (16, 777, 2056, 0, F32, False), (40, 264, 520, 2, BF16, True), (8, 16, 4096, 0, F32, False)]
    fp8_kn = dtypes[1].itemsize == 1 and w_major == "MN"
    for m, n, k, batch, out_dtype, with_c in cases:
        isz = min(dtypes[0].itemsize, dtypes[1].itemsize)
        k = -(-k * isz // 16) * 16 // isz  # 16-byte rows (TMA)
        n = -(-n // 16) * 16 if w_major == "MN" else n  # 16-byte weight rows (TMA; fp8: else XLA transposes first)
        epilogue_case(config, dtypes, w_major, m, n, k, batch, out_dtype, with_c,
                      seed_of("mma_decode", config, dtypes, w_major, m, n, k, batch))
    # a plain epilogue (the kernel's direct stores) and a weight broadcast over a batch of activations
    dn = NK if w_major == "K" else KN
    k = 4104 if dtypes[1].itemsize == 2 else 4112
    nw = 1008 if fp8_kn else 1000
    w = rand(seed_of("mma_decode_w", config), (nw, k) if w_major == "K" else (k, nw), dtypes[1])
    xs = rand(seed_of("mma_decode_x", config), (3, 7, k), dtypes[0])
    f = jax.jit(jax.vmap(lambda x: gemm_op.gemm(x, w, None, None, dn, np.dtype(F32), gemm_op.Epilogue(), "kernel",
                                                 True, config)))
    out = np.asarray(f(xs))
    ref = np.stack([_ref(xs[i], w, dn) for i in range(3)])
    assert np.abs(out - ref).max() / np.abs(ref).max() < _tol(dtypes[0], F32)
    np.testing.assert_array_equal(out, np.asarray(f(xs)))


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,dn,entry", [(1, 4096, NK, "decode 16(N)x8(M)"), (8, 6144, NK, "decode 16(N)x8(M)"),
                                          (3, 4096, KN, "decode 64(N)x8(M)"), (8, 6144, KN, "decode 64(N)x8(M)"),
                                          (12, 6144, NK, "swap-AB 64(N)x16(M)")])
def test_decode_heuristic_runs_the_mma_entries(m, n, dn, entry):
    """A decode GEMM of up to 8 tokens with a bfloat16 weight, stored (N, K) or (K, N), goes to the mma.sync
    entries by default (more tokens to wgmma's swap-AB), says so in the log, and matches the float64
    reference, bitwise repeatably."""
    _require_decode_entries()
    s = seed_of("mma_decode_heuristic", m, n, dn)
    x, w = rand(s, (m, 4096), BF16), rand(s + 1, (n, 4096) if dn == NK else (4096, n), BF16)
    jax_tmem.clear_decisions()
    o1, o2 = _run_poisoned(lambda a, b: jax_tmem.dot_general(a, b, dn, preferred_element_type=BF16, path="kernel"),
                           (m, n), BF16, x, w)
    target = jax_tmem.decisions()[-1].target
    assert entry in target, target
    ref = _ref(x, w, dn)
    assert np.abs(o1 - ref).max() / np.abs(ref).max() < _tol(BF16, BF16)
    np.testing.assert_array_equal(o1, o2)


@pytest.mark.gpu
def test_mma_decode_under_command_buffers():
    """The entries' launches are the same under XLA's command buffers and without: bitwise equal outputs."""
    _require_decode_entries()
    prog = textwrap.dedent("""
        import sys
        import jax, jax.numpy as jnp, numpy as np, jax_tmem
        dn = (((1,), (1,)), ((), ()))
        ks = jax.random.split(jax.random.key(7), 4)
        x = jax.random.normal(ks[0], (5, 4104), jnp.bfloat16)
        ws = [jax.random.normal(k, (4104 + 8 * i, 4104), jnp.bfloat16) for i, k in enumerate(ks[1:])]
        ws[1] = ws[1].T  # a weight stored (K, N) too
        ws[2] = ws[2].astype(jnp.float8_e4m3fn)  # and an fp8 weight times the bf16 activations (kMix)

        @jax.jit
        def chain(x, ws):
            for i, w in enumerate(ws):  # each output feeds the next GEMM, as in a decode step
                d = (((1,), (0,)), ((), ())) if i == 1 else dn
                x = jax_tmem.dot_general(x, w, d, preferred_element_type=jnp.bfloat16, path="kernel")[:, :4104]
                x = x / (jnp.abs(x).max() + 1)
            return x
        np.save(sys.argv[1], np.asarray(chain(x, ws), np.float32))
    """)
    outs = command_buffer_runs(prog)
    assert np.isfinite(outs[0]).all()
    np.testing.assert_array_equal(outs[0], outs[1])
