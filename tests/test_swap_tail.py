"""The last wave of the sm_90a swap-AB (decode) entries, shared out along K (menu::swap_tail).

A decode GEMM's weight of more 128-row tiles than SMs (a gate / up projection: 224 tiles for an 8B model, 448
for 70B, on 132 SMs) runs as 1.7 / 3.4 waves whatever the token width; its last wave's k-blocks can be dealt to
every CTA as the dense entries' are (sched::TailSplit, tail_fixup). Forced with ``config=(entry,
-(100 + share))``, share = the CTAs plus SMs x the whole waves shared (menu::tail_share); the heuristic shares
entry 35's for the 70B gate / up at 161-192 tokens (menu::sm90_wide_tokens_shared). Host tests (no GPU): the
plan (through ``isa.kernel_plan``) for the entries that can and cannot, the rule, and the decision log's words;
the schedule itself is the dense entries' (tests/test_tail_split.py). GPU tests (sm_90a): values against
float64 on the entry that can (35), bf16 / f16 / e4m3, weights (N, K) and (K, N), token, weight-row and K
tails, a batch, the fused epilogue, a whole wave shared too, outputs poisoned, bitwise repeatable, equal within
rounding to the same entry with whole tiles, and the same bits with XLA's command buffers on and off.
"""

from __future__ import annotations

import textwrap

import jax
import numpy as np
import pytest

from jax_tmem import isa
from jax_tmem._core import arch as _arch, ext as _ext

from conftest import (BF16, E4M3, F16, F32, assert_close, command_buffer_runs, forced_gemm_ref, forced_gemm_runs,
                      rand, seed_of)

BASE = 100  # menu::kSwapTailBase
SHARING = {35: 192}  # entry: tokens wide (128 weight rows, no cluster)
NOT_SHARING = {11: "16 wide", 12: "lost", 13: "lost", 18: "lost", 38: "lost", 41: "lost", 19: "256 wide",
               15: "64 rows", 16: "64 rows", 17: "64 rows", 36: "2x1 cluster", 37: "4x1 cluster", 39: "1x2 cluster",
               40: "4x1 cluster"}


def _plan(m, n, k, config, share, **kw):
    return isa.kernel_plan("sm_90a", m, n, k, config=config, splits=-(BASE + share), num_sms=132, **kw)


@pytest.mark.parametrize("config,width", sorted(SHARING.items()))
def test_plan_shares_the_last_wave_of_the_entries_that_can(config, width):
    """8B gate / up (28672 x 4096): 224 weight tiles on 132 SMs, 92 left: every SM a piece (splits -232), the
    workspace one tile of f32 sums and a flag per CTA; 70B's (57344 x 8192, 448 tiles, 52 left) with the whole
    wave before them too (132 + 132); fp8 weights (N, K) alike; fewer CTAs than tiles left: whole tiles."""
    p = _plan(min(width, 200), 28672, 4096, config, 132)
    assert (p["config"], p["splits"], p["workspace_floats"]) == (config, -232, 132 * 128 * width + 132), p
    p = _plan(min(width, 200), 57344, 8192, config, 264)
    assert (p["splits"], p["workspace_floats"]) == (-364, 132 * 128 * width + 132), p
    p = _plan(min(width, 200), 28672, 4096, config, 100, a_dtype="float8_e4m3fn")
    assert (p["splits"], p["workspace_floats"]) == (-200, 100 * 128 * width + 100), p
    p = _plan(min(width, 200), 28672, 4096, config, 90)  # 92 tiles left over: 90 CTAs cannot share them
    assert (p["splits"], p["workspace_floats"]) == (1, 0), p
    p = _plan(min(width, 200), 16896, 4096, config, 132)  # 132 tiles: whole waves, nothing to share
    assert (p["splits"], p["workspace_floats"]) == (1, 0), p
    p = _plan(min(width, 200), 4096, 4096, config, 132)  # 32 tiles: one partial wave
    assert (p["splits"], p["workspace_floats"]) == (1, 0), p


@pytest.mark.parametrize("config", sorted(NOT_SHARING))
def test_entries_that_cannot_keep_whole_tiles(config):
    """Only entry 35 has the shared wave (its Config's kSwapTail): the 32-128-wide entries lost with it on every
    shape measured and are built without its code, the 256-wide, 64-row ones spilled with it, the cluster entries'
    CTAs share a tile already: the plan runs whole tiles, no workspace."""
    p = _plan(16, 28672, 4096, config, 132)
    assert (p["config"], p["splits"], p["workspace_floats"]) == (config, 1, 0), (NOT_SHARING[config], p)


def test_a_transposed_fp8_weight_and_the_dense_entries_keep_whole_tiles():
    """An 8-bit weight stored (K, N) is transposed in shared memory by the swap-AB entries (no shared wave);
    splits <= -100 on a dense entry, or for sm_100a, are refused in words."""
    p = _plan(176, 28672, 4096, 35, 132, a_dtype="float8_e4m3fn", b_mn_major=True)
    assert (p["splits"], p["workspace_floats"]) == (1, 0), p
    with pytest.raises(ValueError, match="swap-AB entry"):
        _plan(64, 28672, 4096, 20, 132)
    with pytest.raises(ValueError, match="swap-AB entry"):
        isa.kernel_plan("sm_100a", 64, 28672, 4096, config=-1, splits=-232, num_sms=148)


def test_heuristic_shares_entry_35s_last_wave_for_many_weight_tiles_at_161_192_tokens():
    """menu::sm90_wide_tokens_shared: at 161-192 tokens, a weight of more than two waves of 128-row tiles that leave
    at most half a wave (70B gate / up: 448 tiles, 52 left on 132 SMs) runs on entry 35 with its last wave shared by
    every SM; the 8B gate / up (224 tiles, 92 left: lost) keeps 37, and so do fewer tokens (40), whole waves, an 8-bit
    (K, N) weight (transposed in shared memory: no shared wave) and every other shape of the 8B / 70B layers."""
    plan = lambda m, n, k, **kw: isa.kernel_plan("sm_90a", m, n, k, num_sms=132, **kw)
    for m in (161, 176, 192):
        for kw in ({}, {"b_mn_major": True}, {"a_dtype": "float8_e4m3fn"}, {"a_dtype": "float16"}):
            p = plan(m, 57344, 8192, **kw)
            assert (p["config"], p["splits"], p["workspace_floats"]) == (35, -232, 132 * 128 * 192 + 132), (m, kw, p)
        assert plan(m, 57344, 8192, a_dtype="float8_e4m3fn", b_mn_major=True)["config"] == 37
        assert plan(m, 28672, 4096)["config"] == 37  # 92 left: more than half a wave
        assert plan(m, 3 * 132 * 128, 4096)["config"] == 37  # 396 tiles: whole waves
        assert plan(m, (2 * 132 + 66) * 128, 4096)["splits"] == -232  # 330 tiles: 66 left, half a wave
        assert plan(m, (2 * 132 + 67) * 128, 4096)["config"] == 37
        assert plan(m, (132 + 40) * 128, 4096)["config"] == 37  # 172 tiles: under two waves
    for m in (16, 32, 48, 64, 96, 128, 144, 160, 200, 256):
        for n, k in ((28672, 4096), (57344, 8192), (6144, 4096), (4096, 14336), (10240, 8192), (8192, 28672)):
            assert plan(m, n, k)["splits"] > -BASE, (m, n, k)


def test_decision_log_words():
    if _ext.load()[0] is None:
        pytest.skip(f"extension not built: {_ext.load()[1]}")
    words = _arch._splits_in_words
    assert words(-232, True, 132) == "132 CTAs sharing the last wave along K, one K split"
    assert words(-364, True, 132) == "132 CTAs sharing the last wave and the 1 whole wave before it along K, one K split"
    assert words(-4, True, 132) == "4 K splits summed in the kernel"
    assert words(132, False, 132) == "132 CTAs sharing the last wave along K"


# ---- on the GPU (sm_90a) ------------------------------------------------------------------------

def _require(m, n, k, config, share, batch, dtype, b_mn_major=False):
    """Skips off sm_90a; `share` -w: every SM and the w whole waves before the last; returns the plan's splits
    (skips where this device's SM count leaves nothing to share)."""
    if jax.default_backend() != "gpu":
        pytest.skip("no CUDA GPU")
    if _arch.device_cc()[0] != 90:
        pytest.skip("the swap-AB last-wave split is sm_90a's (sm_100a keeps whole tiles)")
    entry = _arch.menu("sm_90a").get(config)
    if entry is not None and not entry["built"]:
        pytest.skip(entry["not_built"])
    sms = _arch.device_sms()
    share = sms * (1 - share) if share < 0 else share
    plan = isa.kernel_plan("sm_90a", m, n, k, a_dtype=dtype, config=config, splits=-(BASE + share), num_sms=sms,
                           batch=batch, b_mn_major=b_mn_major)
    if plan["splits"] > -BASE:
        pytest.skip(f"{batch}x{m}x{n}x{k} on entry {config} has no partial last wave on {sms} SMs")
    return -(BASE + share)


# (tokens M, weight rows N, K, batch, entry, share (-w: every SM and w whole waves), dtype, out dtype, fused epilogue
#  [, "KN": the weight stored (K, N), as Flax does: a 16-bit MN-major operand of wgmma])
CASES = [
    (200, 17000, 1000, 1, 35, 16, BF16, BF16, False),    # 133 tiles: 1 left, a k-block a CTA, K / token tails
    (192, 20480, 1024, 1, 35, 100, BF16, F32, True),     # 160 tiles, 28 left: 100 CTAs, bias + gelu + c
    (176, 57344, 1024, 1, 35, 132, BF16, BF16, False),   # the heuristic's 70B gate / up form: 448 tiles, 52 left
    (176, 57344, 1024, 1, 35, 132, BF16, BF16, False, "KN"),  # the same, weight (K, N)
    (64, 20000, 1000, 1, 35, 132, F16, F32, True, "KN"),  # (K, N), fused epilogue, N, K and token tails
    (61, 36000, 1000, 1, 35, -1, F16, F16, True),        # 282 tiles (N tail): 18 left + one wave, every SM
    (128, 18000, 2048, 1, 35, 132, BF16, BF16, False),   # 141 tiles, N tail
    (90, 18000, 520, 1, 35, 50, BF16, F32, False),       # 9 left, 5 k-blocks a tile: 1-2 a piece
    (30, 9000, 1000, 2, 35, 132, BF16, BF16, False),     # batch 2 (2 x 71 tiles), token tail
    (176, 28672, 4096, 1, 35, 132, E4M3, BF16, False),   # fp8 weight (N, K): the promotion per ring slot
    (160, 36000, 2048, 1, 35, -1, E4M3, BF16, True),     # fp8, a whole wave shared too, fused epilogue
]


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[3]}x{c[0]}x{c[1]}x{c[2]}-cfg{c[4]}-share{c[5]}-"
                                                     f"{np.dtype(c[6]).name}-{np.dtype(c[7]).name}-{c[9] if len(c) > 9 else 'NK'}")
def test_swap_ab_last_wave_shared_along_k(case):
    m, n, k, batch, config, share, in_dtype, out_dtype, epi_c, *layout = case
    kn = layout == ["KN"]
    splits = _require(m, n, k, config, share, batch, np.dtype(in_dtype).name, b_mn_major=kn)
    s = seed_of("swap-tail", *case)
    bs = (batch,) if batch > 1 else ()
    a, b = rand(s, bs + (m, k), in_dtype), rand(s + 1, bs + ((k, n) if kn else (n, k)), in_dtype)
    nb = len(bs)
    dn = (((nb + 1,), (nb if kn else nb + 1,)), (tuple(range(nb)), tuple(range(nb))))
    bias, c = rand(s + 2, (n,), F32), rand(s + 3, bs + (m, n), out_dtype)
    args = (a, b, bias, c) if epi_c else (a, b)
    run = lambda cfg: forced_gemm_runs(cfg, args, dn, bs + (m, n), out_dtype)  # noqa: E731

    o1, o2 = run((config, splits))
    assert not np.isnan(o1).any(), "unwritten (NaN-poisoned) outputs"
    np.testing.assert_array_equal(o1, o2)  # bitwise repeatable: the pieces are added in CTA order
    ref = forced_gemm_ref(args, kn)
    tol = BF16 if np.dtype(in_dtype) == E4M3 else None  # Hopper's fp8 wgmma: test_gpu_gemm._tol
    assert_close(o1.astype(out_dtype), ref, out_dtype, k, tol_dtype=tol)
    whole = run((config, 1))[0]  # the same entry, whole tiles: equal within the accumulation's rounding
    assert_close(o1.astype(out_dtype), whole.astype(np.float64), out_dtype, k, tol_dtype=tol)


@pytest.mark.gpu
def test_swap_ab_last_wave_command_buffers_on_and_off_agree():
    """The flags' memset and the kernel inside XLA's command buffers and launched one by one: the same bits
    (a jitted chain whose wide GEMMs share their last wave)."""
    _require(176, 28672, 1024, 35, 132, 1, "bfloat16")
    prog = textwrap.dedent("""
        import sys
        import jax, jax.numpy as jnp, numpy as np
        from jax_tmem.ops import gemm as gemm_op
        dn = (((1,), (1,)), ((), ()))
        k = jax.random.split(jax.random.key(5), 4)
        x = jax.random.normal(k[0], (176, 1024), jnp.bfloat16)
        ws = [jax.random.normal(k[i + 1], (28672, 1024), jnp.bfloat16) * 0.03 for i in range(3)]
        @jax.jit
        def chain(x, ws):
            outs = []
            for w in ws:
                y = gemm_op.gemm(x, w, None, None, dn, jnp.dtype(jnp.bfloat16), gemm_op.Epilogue(), "kernel", True,
                                 (35, -232))
                outs.append(y)
                x = y[:, :1024]
            return [o.astype(jnp.float32) for o in outs]
        np.save(sys.argv[1], np.concatenate([np.asarray(o).ravel() for o in chain(x, ws)]))
    """)
    outs = command_buffer_runs(prog)
    np.testing.assert_array_equal(outs[0], outs[1])
