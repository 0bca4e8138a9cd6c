"""FP8 decode weights stored (K, N), as Flax stores a Dense kernel (issue 15): sm_90a's swap-AB kernel reads
such a weight in place (its A operand, MN-major, transposed tile by tile in shared memory: Config::kATrans
in cpp/include/jax_tmem/kernels/sm90_gemm.cuh), and for M <= 8 the mma.sync decode kernel (ldmatrix.trans
and byte permutes: kernels/dense_decode.cuh), so the program holds no transpose of the weight.

Host tests (any machine): which problems take that path. GPU tests (sm_90a): decode shapes against the
float64 reference, NaN-poisoned outputs, bitwise repeatable, bitwise equal to the same weight stored
(N, K), no transpose in the compiled program, command buffers on and off identical."""
from __future__ import annotations

import os
import re
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_tmem
from jax_tmem import isa, report
from jax_tmem._core import arch as _arch, canon as _canon
from jax_tmem.ops import gemm as gemm_op

from conftest import BF16, E4M3, E5M2, F32, command_buffer_runs, lower_for_cuda, rand, seed_of

KN = (((1,), (0,)), ((), ()))  # x (M, K) . w (K, N)
NK = (((1,), (1,)), ((), ()))  # x (M, K) . w (N, K)


def _canon_of(m, n, k, dn=KN):
    return _canon.canonicalize((m, k), (k, n) if dn == KN else (n, k), dn)


@pytest.mark.parametrize("m,a,b,arch,expect", [
    (16, E4M3, E4M3, "sm_90a", True),
    (1, E4M3, E4M3, "sm_90a", True),
    (64, E4M3, E4M3, "sm_90a", True),
    (65, E4M3, E4M3, "sm_90a", True),     # the 128-token entry (config 18)
    (256, E4M3, E4M3, "sm_90a", True),    # the 256-token entry (config 19)
    (257, E4M3, E4M3, "sm_90a", False),   # a dense plan: wgmma cannot read the weight MN-major
    (16, E4M3, E5M2, "sm_90a", False),    # no swap-only family for this pair (XLA transposes the weight)
    (16, BF16, BF16, "sm_90a", False),    # 16-bit weights are read MN-major by wgmma itself
    (16, E4M3, E4M3, "sm_100a", False),   # tcgen05 reads MN-major 8-bit operands directly
])
def test_which_problems_read_the_weight_in_place(m, a, b, arch, expect):
    assert _arch.reads_mn_weight(arch, _canon_of(m, 4096, 4096), a, b) is expect
    # the same weight stored (N, K) is K-major: nothing to read in place
    assert _arch.reads_mn_weight(arch, _canon_of(m, 4096, 4096, NK), a, b) is False


@pytest.mark.parametrize("m", [16, 200])
def test_a_weight_row_pitch_tma_cannot_take_is_transposed_first(m):
    """A (K, N) fp8 weight with N = 136 (a 136-byte row pitch, not a multiple of 16) cannot be read by TMA
    in place: it is transposed to K-major first (pitch K = 48), and the kernels take the problem."""
    canon = _canon_of(m, 136, 48)
    assert _arch.reads_mn_weight("sm_90a", canon, E4M3, E4M3) is False
    assert _arch.reads_mn_weight("sm_90a", _canon_of(m, 144, 48), E4M3, E4M3) is True


def test_fp8_stays_k_major_elsewhere():
    """The swap-only family does not make fp8 an MN-major type for the other kernels: a prefill-sized
    (K, N) fp8 problem is still refused by the kernels (so XLA transposes it first), a decode one is not."""
    assert np.dtype(E4M3) in _arch.k_major_dtypes("sm_90a")
    assert _arch.check("sm_90a", _canon_of(300, 4096, 4096), E4M3, E4M3, BF16, False) != ""
    for m in (16, 128, 256):
        assert _arch.check("sm_90a", _canon_of(m, 4096, 4096), E4M3, E4M3, BF16, False) == ""


@pytest.mark.parametrize("m,n,entry", [(64, 4096, 34), (65, 4096, 18), (128, 4096, 18), (129, 8192, 19),
                                         (256, 8192, 19), (256, 6144, 19), (256, 4096, 18)])
def test_kn_plans_above_64_tokens(m, n, entry):
    """M 65-256 with an MN-major e4m3 weight: the 128- and 256-token swap-AB entries (the 128-token one in
    two column tiles where the 256-token one would split K more than twice: 32 tiles x 4 splits at
    N = 4096 on 132 SMs); the same M with a K-major weight (or bf16) keeps the dense entries, but at 129-192 tokens
    against at most #SMs weight tiles: two token tiles (entry 41 at 129-160 tokens, 38 above; menu.h sm90_token_tiles;
    test_isa.py)."""
    e4 = np.dtype(E4M3).name
    plan = lambda dt, mn, sms=132: isa.kernel_plan("sm_90a", m, n, 4096, a_dtype=dt, b_mn_major=mn, num_sms=sms)
    assert plan(e4, True)["config"] == entry
    # 64 SMs: 2 splits of the 32 tiles; 129-192 tokens against >= 64 weight tiles: entry 40 / 37 (menu.h
    # sm90_wide_tokens)
    wide = 40 if m <= 160 else 37
    assert plan(e4, True, 64)["config"] == (wide if m <= 192 and n >= 64 * 128 else 19 if m > 128 else entry)
    if m > 64:  # (bf16 at N = 4096, M <= 128: the cluster-decode plan on swap-AB entry 13, test_isa.py)
        for dt, mn in ((e4, False),) + ((("bfloat16", True), ("bfloat16", False)) if n != 4096 or m > 128 else ()):
            cfg = plan(dt, mn)["config"]
            if 129 <= m <= 192 and 2 * ((n + 127) // 128) <= 132:
                assert cfg == (41 if m <= 160 else 38), (dt, mn, cfg)
            else:
                assert not _arch.menu("sm_90a")[cfg]["swap_ab"], (dt, mn, cfg)


def _require_sm90():
    if jax.default_backend() != "gpu":
        pytest.skip("no CUDA GPU")
    if _arch.device_cc()[0] != 90:
        pytest.skip("the in-shared-memory fp8 weight transpose is the sm_90a swap-AB kernel's (sm_100a reads "
                    "MN-major 8-bit operands directly)")


def _fp8_pair(seed, m, n, k):
    return rand(seed, (m, k), E4M3), rand(seed + 1, (k, n), E4M3)


def _ref(x, w):
    return np.einsum("...k,kn->...n", np.asarray(x, np.float64), np.asarray(w, np.float64))


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k", [(1, 4096, 4096), (16, 6144, 4096), (7, 1040, 1008), (33, 272, 4112),
                                   (3, 28672, 512), (8, 10240, 1040), (1, 16, 208),
                                   (64, 16, 208), (16, 28672, 256), (64, 4112, 14336),
                                   (65, 1040, 1008), (128, 4096, 4096), (129, 272, 4112), (200, 16, 208),
                                   (256, 6144, 4096)])
@pytest.mark.parametrize("out_dtype", [BF16, F32])
def test_fp8_kn_decode_matches_reference(m, n, k, out_dtype):
    _require_sm90()
    s = seed_of("fp8kn", m, n, k, out_dtype)
    x, w = _fp8_pair(s, m, n, k)
    jax_tmem.clear_decisions()
    f = jax.jit(lambda a, b: jax_tmem.dot_general(a, b, KN, preferred_element_type=out_dtype, path="kernel"))
    runs = []
    for _ in range(2):
        poison = jnp.full((m, n), jnp.nan, out_dtype)
        g = jax.jit(lambda p, a, b: f(a, b), donate_argnums=0)
        runs.append(np.asarray(g(poison, x, w).astype(jnp.float32)))
    assert not np.isnan(runs[0]).any(), "unwritten (NaN-poisoned) outputs"
    np.testing.assert_array_equal(runs[0], runs[1])
    ref = _ref(x, w)
    err = np.abs(runs[0] - ref).max() / np.abs(ref).max()
    # Hopper's fp8 wgmma accumulates with ~14 bits inside an instruction chain (tests/test_gpu_gemm.py's
    # _tol): up to ~4e-3 of max |ref| at K = 4112 (2026-11-24); the (N, K) equality below is the exact check
    assert err < 1e-2, err
    gemm = [d for d in jax_tmem.decisions() if d.op == "gemm"][-1]
    # decode entries up to 64 tokens where the GPU has SMs for them (17-64 tokens: N <= 128 x SMs), else
    # the transposing swap-AB entries: what the plan says for this GPU's SM count
    plan = isa.kernel_plan("sm_90a", m, n, k, a_dtype="float8_e4m3fn", b_mn_major=True, num_sms=_arch.device_sms())
    family = "decode" if _arch.menu("sm_90a")[plan["config"]]["split"] == "decode" else "swap-AB"
    assert gemm.path == "kernel" and family in gemm.target, gemm
    assert not [d for d in jax_tmem.decisions() if d.op == "layout"], "the weight was transposed by XLA"
    if m <= 8:
        # the mma.sync entries: exact fp8 products summed in f32 (m16n8k32 runs as f16 HMMA on sm_90a), their
        # K order per weight layout their own (no bitwise (N, K) twin): the reference alone, more tightly
        assert err < (1e-5 if out_dtype == F32 else 8e-3), err
        return
    # the same weight stored (N, K), forced through the entry and K splits of this plan (its own heuristic
    # picks other entries), runs the same MMAs on the same K steps: bitwise equal (the wgmma decode entries,
    # M 9-64: the same A fragments, loaded by ldmatrix instead of ldmatrix.trans + byte permutes, their rows
    # in another order; the swap-AB ones: the same K-major tiles)
    cfg = int(re.search(r"config (\d+)", gemm.target).group(1))
    splits = re.search(r"(\d+) K splits", gemm.target)
    forced = (cfg, int(splits.group(1)) if splits else 1)
    wt = jnp.asarray(np.asarray(w).T)
    nk = jax.jit(lambda a, b: gemm_op.gemm(a, b, None, None, NK, np.dtype(out_dtype), gemm_op.Epilogue(), "kernel",
                                           True, forced))
    np.testing.assert_array_equal(runs[0], np.asarray(nk(x, wt).astype(jnp.float32)))


@pytest.mark.gpu
def test_fp8_kn_program_has_no_transpose():
    _require_sm90()
    x, w = _fp8_pair(seed_of("fp8kn-hlo"), 16, 4096, 4096)
    f = jax.jit(lambda a, b: jax_tmem.dot_general(a, b, KN, preferred_element_type=BF16))
    hlo = f.lower(x, w).compile().as_text()
    ops = report.hlo_ops(hlo)
    assert ops["custom-call"] >= 1 and ops["transpose"] == 0 and ops["copy"] == 0, ops
    # vmapped activations against one weight: still read in place
    xs = rand(seed_of("fp8kn-vmap"), (3, 5, 4096), E4M3)
    out = np.asarray(jax.jit(jax.vmap(lambda a: jax_tmem.dot_general(a, w, KN, preferred_element_type=F32)))(xs))
    ref = _ref(xs, w)
    assert np.abs(out - ref).max() / np.abs(ref).max() < 1e-2


@pytest.mark.gpu
def test_fp8_kn_command_buffers_on_and_off_agree():
    _require_sm90()
    prog = textwrap.dedent("""
        import sys
        import jax, jax.numpy as jnp, numpy as np, jax_tmem
        k = jax.random.split(jax.random.key(3), 5)
        x = jax.random.normal(k[0], (16, 1024), jnp.float32).astype(jnp.bfloat16)
        ws = [(jax.random.normal(k[i + 1], (1024, 1024), jnp.float32) / 32).astype(jnp.float8_e4m3fn)
              for i in range(4)]
        @jax.jit
        def step(x, ws):
            for w in ws:  # a decode chain: each GEMM reads the previous one's output
                x = x + jax_tmem.dot_general(x.astype(jnp.float8_e4m3fn), w, (((1,), (0,)), ((), ())),
                                             preferred_element_type=jnp.bfloat16)
            return x
        np.save(sys.argv[1], np.asarray(step(x, ws), np.float32))
    """)
    outs = command_buffer_runs(prog)
    assert np.isfinite(outs[0]).all()
    np.testing.assert_array_equal(outs[0], outs[1])


# ---- sm_100a / sm_103a: the decode benchmark's programs lowered for a Blackwell GPU, statically -----------

def _bench_decode():
    import importlib.util
    path = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "bench_decode.py")
    spec = importlib.util.spec_from_file_location("bench_decode_for_tests", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _lowered_step(bench, model, dtype, m):
    """The bench_decode step (one layer: QKV, O, gate+up, down; weights (K, N) as Flax stores them), lowered
    for CUDA: (StableHLO text, the GEMM decisions)."""
    hidden, shapes = bench.MODELS[model]
    step = bench._step(lambda x, w, dn: jax_tmem.dot_general(x, w, dn, preferred_element_type=BF16), dtype, "KN",
                       hidden)
    txt, decisions = lower_for_cuda(step, jax.ShapeDtypeStruct((m, hidden), BF16),
                                    [[jax.ShapeDtypeStruct((k, n), dtype) for k, n in shapes]])
    return txt, [d for d in decisions if d.op == "gemm"]


@pytest.mark.parametrize("cc,arch,sms", [(100, "sm_100a", 148), (103, "sm_103a", 148)])
@pytest.mark.parametrize("model", ["8b", "70b"])
@pytest.mark.parametrize("dtype", [E4M3, BF16])
def test_blackwell_decode_programs_read_kn_weights_in_place(as_if_on, cc, arch, sms, model, dtype):
    """Issue 15: on sm_100a / sm_103a, where tcgen05 reads MN-major 8-bit operands, bench_decode's programs
    (M 1-256, fp8 and bf16 weights stored (K, N)) dispatch every GEMM to a kernel with no transpose in the
    program (checked statically; these kernels have never run on Blackwell hardware)."""
    as_if_on(cc, sms)
    bench = _bench_decode()
    for m in (1, 8, 16, 32, 64, 128, 256):
        txt, gemms = _lowered_step(bench, model, dtype, m)
        assert len(gemms) == 4 and all(d.path == "kernel" and f"cuda {arch}" in d.target for d in gemms), \
            "\n".join(map(str, gemms))
        assert txt.count("@jax_tmem_gemm") == 4, (m, txt.count("@jax_tmem_gemm"))
        assert "stablehlo.transpose" not in txt and "@jax_tmem_transpose8" not in txt, (m, arch)


def test_the_static_check_sees_a_transposed_weight(as_if_on):
    """The check above can fail: on sm_90a a prefill-sized fp8 (K, N) weight is transposed (wgmma reads 8-bit
    operands K-major only; the swap-AB decode entries read it in place up to 256 tokens)."""
    bench = _bench_decode()
    as_if_on(90, 132)
    txt, gemms = _lowered_step(bench, "8b", E4M3, 16)
    assert txt.count("@jax_tmem_gemm") == 4 and "@jax_tmem_transpose8" not in txt
    txt, gemms = _lowered_step(bench, "8b", E4M3, 512)
    assert txt.count("@jax_tmem_transpose8") == 4 and all("cuda sm_90a" in d.target for d in gemms[-4:]), txt[:2000]
    as_if_on(100, 148)
    txt, gemms = _lowered_step(bench, "8b", E4M3, 512)
    assert "@jax_tmem_transpose8" not in txt and "stablehlo.transpose" not in txt


def test_bench_decode_variants_parse():
    """bench_decode.py --variants: a weight forced through a menu entry (and K splits), or through XLA's dot."""
    bench = _bench_decode()
    got = bench.parse_variants("a=4096,6144:41:-2/4096,4096:xla;b=14336,4096:48")
    assert got == {"a": {(4096, 6144): (41, -2), (4096, 4096): "xla"}, "b": {(14336, 4096): 48}}
