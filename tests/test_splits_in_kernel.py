"""K splits of the sm_90a split-K and swap-AB entries summed inside the GEMM kernel (menu::k_splits): no
reduce pass, no workspace. Forced with ``config=(entry, -splits)``; each tile's splits run as one
thread-block cluster (split = rank, one unit per CTA; more units than the GPU holds run in waves); the f32 sums meet in
distributed shared memory and each CTA finishes the rows of its share of the consumer warps, adding the
splits in order 0, 1, ... (the reduce pass's order).

- Host (the extension's own plan code, no GPU): the plan (no workspace; more units than SMs planned too), the
  refusals (more than 8 splits, the 8-bit 256-wide entry, a dense entry, an entry in clusters of its own,
  sm_100a), the decision log's words; the 192-wide entry (35) and the 16-bit 256-wide one (19) planned.
- Entries in weight-multicast pairs (48 / 39, the default build's rules at 65-160 / 161-192 tokens and K >= 8192):
  each split a pair of its own, the sums meeting through a workspace (pair_fixup) from the device's pool, whose ready
  flags the readers lower again (flag_pool.h; the plan sizes XLA's fallback workspace: test_isa).
- GPU (sm_90a): values against float64 for the 64- and 128-row swap-AB entries, the transposing 8-bit one,
  the split-K entry, batches, tails and the fused epilogue; outputs NaN-poisoned; bitwise repeatable; the
  same bits as the reduce pass where the epilogue is a plain cast; XLA's command buffers on and off agree.
"""

from __future__ import annotations

import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_tmem
from jax_tmem import isa
from jax_tmem._core import arch as _arch, ext as _ext
from jax_tmem.ops import gemm as gemm_op

from conftest import (BF16, E4M3, F16, F32, assert_close, command_buffer_runs, forced_gemm_ref, forced_gemm_runs,
                      lower_for_cuda, rand, seed_of)


def _needs_ext():
    if _ext.load()[0] is None:
        pytest.skip(f"extension not built: {_ext.load()[1]}")


@pytest.mark.parametrize("m,n,k,config,splits", [
    (64, 4096, 4096, 13, 3),    # the 8B O projection at 64 tokens: 32 tiles x 3 = 96 CTAs
    (64, 4096, 14336, 13, 4),   # the down projection
    (16, 4096, 4096, 15, 2),    # 64-row entry: 64 tiles x 2
    (256, 512, 8192, 14, 8),    # the split-K entry (not swapped): 2 x 4 tiles x 8
])
def test_plan_has_no_workspace(m, n, k, config, splits):
    _needs_ext()
    p = isa.kernel_plan("sm_90a", m, n, k, config=config, splits=-splits, num_sms=132)
    passed = isa.kernel_plan("sm_90a", m, n, k, config=config, splits=splits, num_sms=132)
    assert (p["config"], p["splits"], p["workspace_floats"]) == (config, -splits, 0), p
    # the reduce pass's plan of the same splits: the output-shaped partial sums
    assert passed["splits"] == splits and passed["workspace_floats"] == splits * m * ((n + 3) // 4 * 4), passed


def test_what_is_refused_and_clamped():
    _needs_ext()
    # 48 tiles x 4 splits = 192 units on 132 SMs: planned (each CTA meets only its cluster: waves)
    p = isa.kernel_plan("sm_90a", 64, 6144, 4096, config=13, splits=-4, num_sms=132)
    assert (p["config"], p["splits"], p["workspace_floats"]) == (13, -4, 0), p
    with pytest.raises(ValueError, match="at most 8 [(]one cluster of CTAs per tile[)], not 9"):
        isa.kernel_plan("sm_90a", 64, 512, 4096, config=13, splits=-9, num_sms=132)
    with pytest.raises(ValueError, match="128 accumulators per thread beside its 8-bit promotion: K splits summed "
                                         "inside the kernel take 8-bit tiles at most 192 wide"):
        isa.kernel_plan("sm_90a", 200, 512, 4096, a_dtype="float8_e4m3fn", config=19, splits=-2, num_sms=132)
    p = isa.kernel_plan("sm_90a", 200, 512, 4096, config=19, splits=-2, num_sms=132)  # 16-bit 256-wide: planned
    assert (p["config"], p["splits"], p["workspace_floats"]) == (19, -2, 0), p
    p = isa.kernel_plan("sm_90a", 192, 4096, 14336, config=35, splits=-4, num_sms=132)  # 96 per thread: planned
    assert (p["config"], p["splits"], p["workspace_floats"]) == (35, -4, 0), p
    with pytest.raises(ValueError, match="has no K splits"):
        isa.kernel_plan("sm_90a", 512, 4096, 4096, config=9, splits=-4, num_sms=132)
    with pytest.raises(ValueError, match="runs in clusters of its own"):  # (36: 35 in clusters that multicast tokens)
        isa.kernel_plan("sm_90a", 192, 4096, 4096, config=36, splits=-2, num_sms=132)
    with pytest.raises(ValueError, match="sm_90a's only"):
        isa.kernel_plan("sm_100a", 64, 4096, 4096, config=13, splits=-4, num_sms=148)
    # the 192-row weight-multicast pair (50) multicasts 96 weight rows per CTA: a K-major weight only, refused at trace
    # time otherwise (an MN-major weight comes in 64-row pieces); 48's 64 rows per CTA take either
    p = isa.kernel_plan("sm_90a", 160, 6144, 4096, config=50, splits=-2, num_sms=132)
    assert (p["config"], p["splits"]) == (50, -2) and p["workspace_floats"] > 0, p
    with pytest.raises(ValueError, match="entry 50: the 192-row weight-multicast entry reads a K-major weight"):
        isa.kernel_plan("sm_90a", 160, 6144, 4096, config=50, splits=-2, num_sms=132, b_mn_major=True)
    p = isa.kernel_plan("sm_90a", 160, 4096, 4096, config=48, splits=-2, num_sms=132, b_mn_major=True)
    assert (p["config"], p["splits"]) == (48, -2), p
    # one K block per split at most: K = 256 bf16 is one ring slot of the 64-row entry (4 x 128 B): one split
    p = isa.kernel_plan("sm_90a", 16, 4096, 256, config=15, splits=-4, num_sms=132)
    assert (p["splits"], p["workspace_floats"]) == (1, 0), p
    # -1 is the heuristic's count, as 0 is
    assert isa.kernel_plan("sm_90a", 64, 4096, 4096, config=13, splits=-1, num_sms=132)["splits"] >= 1
    assert _arch._splits_in_words(-4, True, 132) == "4 K splits summed in the kernel"


def test_the_log_names_the_heuristics_splits_summed_in_the_kernel(as_if_on):
    """JAX_TMEM_LOG / decisions() name the heuristic's in-kernel splits (it has no workspace to name), and the
    lowered custom call carries them (splits = -2) with the 1-float placeholder workspace."""
    as_if_on(90, 132)
    x, w = jax.ShapeDtypeStruct((64, 4096), BF16), jax.ShapeDtypeStruct((4096, 4096), BF16)
    dn = (((1,), (1,)), ((), ()))
    txt, ds = lower_for_cuda(lambda x, w: jax_tmem.dot_general(x, w, dn, preferred_element_type=BF16), x, w)
    assert any("(config 17, 2 K splits summed in the kernel, no workspace, heuristic, 132 SMs)" in d.target
               for d in ds), "\n".join(map(str, ds))
    assert "splits = -2" in txt and "tensor<1xf32>" in txt, txt[-3000:]
    as_if_on(90, 114)  # 64 tiles x 2 > 114 SMs: the 128-row entry, one split
    txt, ds = lower_for_cuda(lambda x, w: jax_tmem.dot_general(x, w, dn, preferred_element_type=BF16), x, w)
    assert any("(config 13, heuristic, 114 SMs)" in d.target for d in ds), "\n".join(map(str, ds))


def test_the_workspace_pool_reports_itself():
    """The pools of workspaces with ready flags (flag_pool.h): where no GPU backend runs, reserving allocates nothing
    and says why; the counters are there for the report."""
    _needs_ext()
    st = _ext.flag_pool()
    assert set(st) >= {"devices", "bytes", "regions", "used", "misses", "error"}, st
    if jax.default_backend() != "gpu":
        st = _ext.flag_pool(reserve=True)
        assert st["devices"] == [] and "no GPU devices" in st["error"], st


def _require_sm90():
    if jax.default_backend() != "gpu":
        pytest.skip("no CUDA GPU")
    if _arch.device_cc()[0] != 90:
        pytest.skip("K splits summed inside the kernel are the sm_90a entries' (sm_100a: the reduce pass)")


# (M, N, K, batch, config, splits, in dtype, weight (K, N), out dtype, epilogue + c)
CASES = [
    (64, 4096, 4096, 1, 13, 3, BF16, False, BF16, False),   # the decode O projection
    (64, 4096, 4096, 1, 13, 2, BF16, False, BF16, False),
    (64, 4104, 1000, 1, 13, 3, BF16, False, F32, True),     # N and K tails, f32 out, bias + gelu + c
    (16, 4096, 4096, 1, 15, 2, BF16, False, BF16, True),    # 64-row entry, 16 tokens
    (5, 2056, 3000, 1, 16, 2, F16, False, F16, False),      # M tail (5 of 32 columns)
    (40, 1024, 4096, 1, 17, 4, BF16, False, BF16, False),   # 16 tiles x 4 splits
    # more units than the GPU holds at once: the clusters run in waves
    (40, 1024, 4096, 1, 17, 8, BF16, False, BF16, False),   # 16 clusters of 8 (an H200 holds 15)
    (64, 6144, 4096, 1, 13, 4, BF16, False, BF16, False),   # 48 x 4 = 192 units > 132 SMs
    (64, 16384, 2048, 1, 13, 8, BF16, True, BF16, True),    # 128 x 8 = 1024 units, (K, N), fused epilogue
    (32, 1024, 2048, 2, 16, 3, BF16, False, BF16, True),    # batch 2: 32 tiles x 3 splits
    (64, 2048, 4096, 1, 13, 4, E4M3, False, BF16, False),   # fp8 (N, K)
    (100, 2048, 2048, 1, 18, 4, E4M3, True, BF16, True),    # fp8 (K, N): the transposing 128-token entry
    (256, 512, 8192, 1, 14, 8, BF16, False, BF16, False),   # the split-K entry, not swapped
    # the heuristic's plans (menu::sm90_cluster_decode): 64-row tiles, 2 splits, 16-bit weights stored either way
    (64, 4096, 4096, 1, 17, 2, BF16, True, BF16, False),    # the O projection at 64 tokens, Flax's (K, N) weight
    (48, 2056, 4096, 1, 17, 2, F16, False, F32, True),      # M and N tails, f32 out, the fused epilogue
    (16, 1024, 8192, 1, 15, 2, BF16, True, BF16, True),
    # 65-128 tokens (sm90_cluster_decode): the 128-row entry's 64-token tiles, 2 splits, 16-bit weights either way
    (128, 4096, 14336, 1, 13, 2, BF16, False, BF16, False),  # the down projection at 128 tokens
    (96, 4096, 4096, 1, 13, 2, BF16, True, BF16, True),     # a half-filled second token tile, (K, N), fused
    (77, 4104, 4096, 1, 13, 2, F16, False, F32, False),     # M and N tails, f32 out
    # fp8 (N, K) weights on the same plans, and the 128-256-token plans of the 8B O / down projections
    # (docs/PERF.md Next steps 2: candidates for the heuristic, timed by bench_decode.py --variants)
    (16, 4096, 14336, 1, 15, 2, E4M3, False, BF16, False),
    (32, 4104, 4096, 1, 16, 2, E4M3, False, BF16, True),    # N tail, the fused epilogue
    (64, 4096, 4096, 1, 17, 2, E4M3, False, BF16, False),
    (128, 4096, 4096, 1, 13, 2, E4M3, False, BF16, False),  # two 64-token column tiles
    (128, 4096, 4096, 1, 14, 4, E4M3, False, BF16, False),
    (256, 4096, 14336, 1, 14, 2, BF16, False, BF16, False),
    (200, 4096, 4096, 1, 14, 2, E4M3, False, F32, True),    # M tail, f32 out
    # entry 35 (swap-AB, 192 tokens wide, a kCandidate): 96 accumulators per thread summed in the cluster
    (192, 4096, 14336, 1, 35, 4, BF16, False, BF16, False),  # the 8B down projection at 192 tokens
    (160, 4096, 4096, 1, 35, 2, BF16, True, BF16, True),    # a 160-token tile, Flax's (K, N), the fused epilogue
    (131, 4104, 4096, 1, 35, 3, F16, False, F32, False),    # M and N tails, f32 out
    (192, 6144, 4096, 1, 35, 2, E4M3, False, BF16, False),  # fp8 (N, K)
    (170, 2048, 2048, 1, 35, 4, E4M3, True, BF16, True),    # fp8 (K, N): transposed in smem, promoted per 64 columns
    # entry 41 (swap-AB, 80 tokens wide, a kCandidate): two token tiles per 160 tokens, 2 splits in the cluster
    (136, 4096, 4096, 1, 41, 2, BF16, False, BF16, False),  # the 8B O projection at 136 tokens
    (150, 4112, 2048, 1, 41, 3, E4M3, True, BF16, True),    # fp8 (K, N): transposed in smem, the fused epilogue
    # entries 48 / 39 (41 / 38 in pairs of token tiles sharing the weight by multicast, kCandidates): a cluster of
    # 2 x splits CTAs, pair q running split q
    (136, 4096, 4096, 1, 48, 2, BF16, False, BF16, False),  # the 8B O projection at 136 tokens
    (160, 4096, 14336, 1, 48, 4, BF16, True, BF16, False),  # the down projection, Flax's (K, N), clusters of 8
    (150, 4104, 2048, 1, 48, 3, F16, False, F32, True),     # N and M tails, clusters of 6, f32 out, fused epilogue
    (70, 2048, 4096, 1, 48, 2, BF16, False, BF16, False),   # each pair's second token tile wholly past M
    (100, 1024, 4096, 2, 48, 2, BF16, True, BF16, True),    # batch 2, (K, N), the fused epilogue
    (136, 4096, 4096, 1, 48, 2, E4M3, False, BF16, False),  # fp8 (N, K)
    (192, 4096, 14336, 1, 39, 2, BF16, False, BF16, False),  # 39: the down projection at 192 tokens
    (181, 4104, 4096, 1, 39, 4, E4M3, False, F32, True),    # fp8, tails, clusters of 8, the fused epilogue
    # entry 49 (192 weight rows x 80 tokens, three consumer warpgroups, sweeps): the QKV projection at 129-160 tokens
    (136, 6144, 4096, 1, 49, 2, BF16, False, BF16, False),  # the 8B QKV at 136 tokens
    (160, 6144, 4096, 1, 49, 2, BF16, True, BF16, True),    # Flax's (K, N), the fused epilogue
    (150, 6152, 2048, 1, 49, 3, F16, False, F32, False),    # N and M tails (the last weight tile 8 rows), f32 out
    (77, 6144, 4096, 2, 49, 2, E4M3, False, BF16, True),    # fp8 (N, K), batch 2, the fused epilogue
    # entry 50 (49's tiles in weight-multicast pairs, a pair per split: cuBLAS's QKV form at 160 tokens; sweeps; a
    # K-major weight only: test_the_192_row_pair_refuses_an_mn_major_weight)
    (160, 6144, 4096, 1, 50, 2, BF16, False, BF16, False),  # the 8B QKV at 160 tokens
    (136, 6144, 4096, 1, 50, 2, BF16, False, BF16, True),   # at 136 tokens, the fused epilogue
    (150, 6152, 2048, 1, 50, 3, F16, False, F32, True),     # N and M tails (the last weight tile 8 rows), f32 out
    (70, 1536, 4096, 2, 50, 2, E4M3, False, BF16, False),   # fp8 (N, K), batch 2, each pair's second token tile past M
    # entry 19 (256 tokens wide) with 16-bit operands: 128 accumulators per thread summed in the cluster
    (256, 4096, 14336, 1, 19, 4, BF16, False, BF16, False),  # the 8B down projection at 256 tokens
    (230, 1032, 2048, 1, 19, 2, F16, True, F32, True),      # M and N tails, (K, N), f32 out, the fused epilogue
]


def _operands(case):
    m, n, k, batch, config, splits, in_dtype, kn, out_dtype, epi_c = case
    s = seed_of("splits-in-kernel", *case)
    bs = (batch,) if batch > 1 else ()
    nb = len(bs)
    a, b = rand(s, bs + (m, k), in_dtype), rand(s + 1, bs + ((k, n) if kn else (n, k)), in_dtype)
    dn = (((nb + 1,), (nb if kn else nb + 1,)), (tuple(range(nb)), tuple(range(nb))))
    bias, c = rand(s + 2, (n,), F32), rand(s + 3, bs + (m, n), out_dtype)
    return bs, a, b, dn, bias, c


@pytest.mark.gpu
def test_the_192_row_pair_refuses_an_mn_major_weight():
    """Entry 50's pair multicasts 96 weight rows per CTA; an MN-major 16-bit weight is loaded in 64-row pieces, so the
    launcher refuses it in words (a launch would wait forever for bytes never requested)."""
    _require_sm90()
    entry = _arch.menu("sm_90a")[50]
    if not entry["built"]:
        pytest.skip(entry["not_built"])
    a, b = rand(1, (136, 4096), BF16), rand(2, (4096, 6144), BF16)
    dn = (((1,), (0,)), ((), ()))
    with pytest.raises(Exception, match="192-row weight-multicast entry reads a K-major weight"):
        forced_gemm_runs((50, -2), (a, b), dn, (136, 6144), BF16, repeats=1)


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[3]}x{c[0]}x{c[1]}x{c[2]}-cfg{c[4]}-s{c[5]}-"
                                                     f"{np.dtype(c[6]).name}{'-kn' if c[7] else ''}-"
                                                     f"{np.dtype(c[8]).name}{'-epi' if c[9] else ''}")
def test_splits_summed_in_the_kernel(case):
    m, n, k, batch, config, splits, in_dtype, kn, out_dtype, epi_c = case
    _require_sm90()
    entry = _arch.menu("sm_90a")[config]
    if not entry["built"]:
        pytest.skip(entry["not_built"])
    bs, a, b, dn, bias, c = _operands(case)
    args = (a, b, bias, c) if epi_c else (a, b)
    run = lambda cfg: forced_gemm_runs(cfg, args, dn, bs + (m, n), out_dtype, repeats=3)  # noqa: E731

    o1, o2, o3 = run((config, -splits))
    assert not np.isnan(o1).any(), "unwritten (NaN-poisoned) outputs"
    np.testing.assert_array_equal(o1, o2)  # bitwise repeatable: splits added in a fixed order
    np.testing.assert_array_equal(o1, o3)
    ref = forced_gemm_ref(args, kn)
    tol = BF16 if np.dtype(in_dtype) == E4M3 else None  # Hopper's fp8 wgmma accumulation (test_gpu_gemm._tol)
    assert_close(o1.astype(out_dtype), ref, out_dtype, k, tol_dtype=tol)
    passed = run((config, splits))[0]  # the reduce pass: the same sums in the same order
    if epi_c:  # its epilogue is the reduce kernel's own code
        assert_close(o1.astype(out_dtype), passed.astype(np.float64), out_dtype, k, tol_dtype=tol)
    else:
        np.testing.assert_array_equal(o1, passed)


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k,kn", [(64, 4096, 4096, False), (64, 4096, 14336, True), (32, 1024, 8192, False),
                                    (128, 4096, 8176, True), (96, 4096, 4096, False)])
def test_the_heuristic_sums_decode_splits_in_a_cluster(m, n, k, kn):
    """The 16-bit decode GEMMs whose swap-AB tiles x 2 fit on the SMs: the heuristic's own plan (config -1)
    is 2 K splits summed in clusters (the 8B O and down projections at 64 tokens on 64-row tiles, at 65-128 on
    the 128-row entry's 64-token tiles; not at K >= 8192, where the 8B down runs 48's pairs: test_gpu_gemm), and its
    values hold against float64, NaN-poisoned, bitwise repeatable."""
    _require_sm90()
    sms = _arch.device_sms()
    plan = isa.kernel_plan("sm_90a", m, n, k, a_dtype="bfloat16", b_mn_major=kn, num_sms=sms)
    if (n + 63) // 64 * 2 > sms:
        pytest.skip(f"{sms} SMs: {(n + 63) // 64} tiles x 2 do not fit")
    assert plan["splits"] == -2 and plan["workspace_floats"] == 0, plan
    s = seed_of("heuristic-cluster", m, n, k, kn)
    x, w = rand(s, (m, k), BF16), rand(s + 1, (k, n) if kn else (n, k), BF16)
    dn = (((1,), (0 if kn else 1,)), ((), ()))
    g = jax.jit(lambda poison, x, w: gemm_op.gemm(x, w, None, None, dn, np.dtype(BF16), gemm_op.Epilogue(),
                                                  "kernel", True, -1), donate_argnums=0)
    outs = [np.asarray(g(jnp.full((m, n), jnp.nan, BF16), x, w).astype(jnp.float32)) for _ in range(2)]
    assert not np.isnan(outs[0]).any(), "unwritten (NaN-poisoned) outputs"
    np.testing.assert_array_equal(outs[0], outs[1])
    x64, w64 = (np.asarray(t.astype(jnp.float32), np.float64) for t in (x, w))
    assert_close(outs[0].astype(BF16), x64 @ (w64 if kn else w64.T), BF16, k)


@pytest.mark.gpu
@pytest.mark.parametrize("config,splits,m", [(13, -4, 64), (48, -2, 136)], ids=["cluster", "pairs"])
def test_command_buffers_on_and_off_agree(config, splits, m):
    """The cluster launches inside XLA's command buffers, and launched one by one: the same bits (a jitted
    chain of decode GEMMs with their K splits summed in the kernel; "pairs": entry 48's, through the workspace
    in a region of the device's pool whose ready flags their readers lower again: no memset; flag_pool.h)."""
    _require_sm90()
    entry = _arch.menu("sm_90a")[config]
    if not entry["built"]:
        pytest.skip(entry["not_built"])
    prog = textwrap.dedent("""
        import sys
        import jax, jax.numpy as jnp, numpy as np
        from jax_tmem.ops import gemm as gemm_op
        dn = (((1,), (1,)), ((), ()))
        cfg, m = (int(sys.argv[2]), int(sys.argv[3])), int(sys.argv[4])
        k = jax.random.split(jax.random.key(5), 4)
        x = jax.random.normal(k[0], (m, 2048), jnp.bfloat16)
        ws = [jax.random.normal(k[i + 1], (2048, 2048), jnp.bfloat16) * 0.03 for i in range(3)]
        @jax.jit
        def chain(x, ws):
            h, outs = x, []
            for w in ws:
                h = gemm_op.gemm(h, w, None, None, dn, jnp.dtype(jnp.bfloat16), gemm_op.Epilogue(), "kernel", True,
                                 cfg)
                outs.append(h)
            return [o.astype(jnp.float32) for o in outs]
        np.save(sys.argv[1], np.concatenate([np.asarray(o).ravel() for o in chain(x, ws)]))
    """)
    outs = command_buffer_runs(prog, str(config), str(splits), str(m))
    assert not np.isnan(outs[0]).any()
    np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.gpu
@pytest.mark.parametrize("config,splits,m,n", [(48, -2, 136, 2048), (39, -4, 181, 2056), (20, 132, 1664, 4096)],
                         ids=["pairs", "pairs4", "last-wave"])
def test_ready_flags_are_lowered_for_the_next_call(config, splits, m, n):
    """The pieces that meet through a workspace (a pair's K splits; a shared last wave: (20, 132)) run in a region of
    the device's pool with no memset before the launch; each reader lowers its ready flag again (flag_pool.h). A
    chain of GEMMs on distinct weights (consecutive calls share a workspace address, so a flag left raised would let
    the next GEMM add the previous one's sums), run three times on fresh inputs: every GEMM against float64 from
    its own input, the pool used and no memset fallback."""
    _require_sm90()
    entry = _arch.menu("sm_90a")[config]
    if not entry["built"]:
        pytest.skip(entry["not_built"])
    sms = _arch.device_sms()
    plan = isa.kernel_plan("sm_90a", m, n, n, config=config, splits=splits, num_sms=sms)
    if plan["workspace_floats"] == 0:
        pytest.skip(f"{m}x{n}x{n} on config {config} meets through no workspace on {sms} SMs: {plan}")
    before = _ext.flag_pool()
    dn = (((1,), (1,)), ((), ()))

    @jax.jit
    def chain(x, ws):
        hs = [x]
        for w in ws:
            hs.append(gemm_op.gemm(hs[-1], w, None, None, dn, np.dtype(BF16), gemm_op.Epilogue(), "kernel", True,
                                   (config, splits)))
        return hs

    for r in range(3):
        s = seed_of("ready-flags", config, m, r)
        x = rand(s, (m, n), BF16)
        ws = [rand(s + 1 + i, (n, n), BF16, scale=n ** -0.5) for i in range(3)]
        hs = [np.asarray(h.astype(jnp.float32), np.float64) for h in chain(x, ws)]
        for i, w in enumerate(ws):
            got = hs[i + 1]
            assert not np.isnan(got).any(), f"round {r}, GEMM {i}: unwritten outputs"
            assert_close(got.astype(BF16), hs[i] @ np.asarray(w.astype(jnp.float32), np.float64).T, BF16, n)
    after = _ext.flag_pool()
    assert after["misses"] == before["misses"], (before, after)
    assert after["regions"] >= max(before["regions"], 1) and after["devices"], after
