"""The last wave of the dense sm_90a entries, shared out along K (stream-K over the last wave).

Forced with ``config=(entry, ctas)``; the heuristic shares the last wave of a 16-bit GEMM with every SM
where an eighth to two thirds of a wave is left over, where it measured faster (menu::tail_split_default). Host
tests (no GPU): the plan the launcher runs (through ``isa.kernel_plan``) and the schedule every CTA of
the kernel walks (sched::TailSplit, the kernel's own C++ through the extension): every k-block of every
tile computed exactly once, whole tiles before pieces, each CTA's partial piece (the one its owner waits
for) before the piece it owns, so that no wait can wait on a waiter. GPU tests (sm_90a): values against
float64 for every entry that can share its last wave, several numbers of CTAs, tails, batches and
epilogues, outputs poisoned, bitwise repeatable, the same with XLA's command buffers on and off.
"""

from __future__ import annotations

import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jax_tmem import isa
from jax_tmem._core import arch as _arch, ext as _ext
from jax_tmem.ops import gemm as gemm_op

from conftest import (BF16, E4M3, F16, F32, assert_close, command_buffer_runs, forced_gemm_ref, forced_gemm_runs,
                      rand, seed_of)

TILE_FLOATS = 128 * 256  # the 128x256 entries' f32 partial sums per CTA


def _schedule(num_tiles, k_blocks, grid, ctas, waves=0):
    mod, why = _ext.load()
    if mod is None:
        pytest.skip(f"extension not built: {why}")
    return mod.tail_schedule(num_tiles, num_tiles % grid + waves * grid, ctas, k_blocks, grid)


@pytest.mark.parametrize("m,n,k,ctas,config,default", [
    (8192, 16384, 4096, 16, 20, 264),   # 4096 tiles of 128x256 on 132 SMs: 31 waves + 4 tiles, 64 k-blocks:
                                        # the last whole wave shared too (264 = 132 CTAs + 1 x 132)
    (8192, 4096, 16384, 132, 22, 0),    # 1024 tiles: 7 waves + 100 (too many: under 2 pieces a tile):
                                        # whole tiles, in 2x1 clusters
    (4096, 16384, 8192, 100, 20, 132),  # 2048: 15 waves + 68: every SM shares them
    (8192, 12288, 4096, 40, 20, 132),   # 3072: 23 waves + 36
    (8448, 16384, 4096, 0, 22, 0),      # 4224 = 32 x 132 tiles: whole waves, nothing to share
    (8192, 16384, 8192, 16, 22, 0),     # 4 left but 128 k-blocks: the pieces would stream K out of L2
])
def test_plan_shares_the_last_wave_where_it_measured_faster(m, n, k, ctas, config, default):
    """The heuristic shares a 16-bit GEMM's last wave with every SM when an eighth to two thirds of a wave
    is left, and the wave before it too when less is left and K is short (menu::tail_split_default);
    otherwise whole tiles, in 2x1 clusters (menu::sm90_cluster_pays). Any count can be forced on 20;
    8-bit operands keep whole tiles on 20."""
    plan = isa.kernel_plan("sm_90a", m, n, k, num_sms=132)
    ctas_default = default - 132 if default > 132 else default
    want = (default, ctas_default * TILE_FLOATS + ctas_default) if default else (1, 0)
    assert plan["config"] == config and (plan["splits"], plan["workspace_floats"]) == want, plan
    fp8 = isa.kernel_plan("sm_90a", m, n, k, num_sms=132, a_dtype="float8_e4m3fn")
    assert (fp8["config"], fp8["splits"], fp8["workspace_floats"]) == (20, 1, 0), fp8
    forced = isa.kernel_plan("sm_90a", m, n, k, config=20, splits=ctas or 16, num_sms=132)
    want = (ctas, ctas * TILE_FLOATS + ctas) if ctas else (1, 0)
    assert (forced["splits"], forced["workspace_floats"]) == want, forced


def test_forced_ctas_and_what_is_refused():
    """``config=(entry, n)`` forces n CTAs on the last wave (tests, sweeps); fewer CTAs than leftover
    tiles gains nothing and is not planned; one wave or less has no last partial wave."""
    p = isa.kernel_plan("sm_90a", 8192, 16384, 4096, config=8, splits=40, num_sms=132)
    assert (p["splits"], p["workspace_floats"]) == (40, 40 * TILE_FLOATS + 40), p
    p = isa.kernel_plan("sm_90a", 8192, 16384, 4096, config=8, splits=3, num_sms=132)  # 4 tiles left
    assert (p["splits"], p["workspace_floats"]) == (1, 0), p
    p = isa.kernel_plan("sm_90a", 1024, 4096, 4096, config=8, num_sms=132)  # 128 tiles: one partial wave
    assert (p["splits"], p["workspace_floats"]) == (1, 0), p
    # whole waves shared too: splits = CTAs + waves x SMs, each CTA one workspace slot whatever its share
    p = isa.kernel_plan("sm_90a", 8192, 16384, 4096, config=20, splits=2 * 132 + 40, num_sms=132)
    assert (p["splits"], p["workspace_floats"]) == (304, 40 * TILE_FLOATS + 40), p
    p = isa.kernel_plan("sm_90a", 2304, 4096, 1024, config=20, splits=2 * 132, num_sms=132)  # 288 = 2 x 132 + 24
    assert (p["splits"], p["workspace_floats"]) == (264, 132 * TILE_FLOATS + 132), p
    p = isa.kernel_plan("sm_90a", 2304, 4096, 1024, config=20, splits=3 * 132, num_sms=132)  # 3 waves: not there
    assert (p["splits"], p["workspace_floats"]) == (1, 0), p
    # the heuristic shares a whole wave too only after 8 waves or more (where it was measured)
    assert isa.kernel_plan("sm_90a", 2176, 4096, 1000, num_sms=132)["splits"] == 1  # 272 tiles of 128x128, 16 left
    assert isa.kernel_plan("sm_90a", 8576, 4096, 1000, num_sms=132)["splits"] == 264  # 1072 of 128x256, 16 left
    # the ping-pong and cluster entries keep whole tiles
    for cfg in (3, 6, 7, 10):
        p = isa.kernel_plan("sm_90a", 8192, 16384, 4096, config=cfg, splits=16, num_sms=132)
        assert p["workspace_floats"] == 0, (cfg, p)


def test_decision_log_says_what_the_splits_share():
    """JAX_TMEM_LOG's words for a plan's ``splits``: the CTAs and the whole waves they share (the integer
    carries both: ctas + waves x SMs), or a split-K entry's K splits."""
    if _ext.load()[0] is None:
        pytest.skip(f"extension not built: {_ext.load()[1]}")
    words = _arch._splits_in_words
    assert words(264, False, 132) == "132 CTAs sharing the last wave and the 1 whole wave before it along K"
    assert words(304, False, 132) == "40 CTAs sharing the last wave and the 2 whole waves before it along K"
    assert words(100, False, 132) == "100 CTAs sharing the last wave along K"
    assert words(132, False, 132) == "132 CTAs sharing the last wave along K"
    assert words(3, True, 132) == "3 K splits"


@pytest.mark.parametrize("num_tiles,k_blocks,grid,ctas,waves", [
    (4096, 64, 132, 16, 0), (1024, 256, 132, 132, 0), (2048, 128, 132, 132, 0), (3072, 64, 132, 132, 0),
    (144, 16, 132, 48, 0), (145, 7, 132, 14, 0), (1000, 5, 132, 132, 0), (263, 3, 132, 132, 0),
    (160, 33, 132, 100, 0), (300, 64, 114, 114, 0), (150, 2, 132, 36, 0),
    # whole waves shared too: each CTA's share over a tile (the end of one, whole ones, the start of another)
    (4096, 64, 132, 132, 1), (1024, 256, 132, 132, 1), (4096, 64, 132, 132, 2), (300, 7, 132, 100, 1),
    (400, 3, 132, 132, 2), (145, 64, 132, 14, 0),
])
def test_schedule_covers_every_k_block_once_and_cannot_deadlock(num_tiles, k_blocks, grid, ctas, waves):
    rem = num_tiles % grid
    tail = rem + waves * grid
    assert ctas > rem and ctas <= tail * k_blocks and tail < num_tiles, "the launcher's conditions"
    sched = _schedule(num_tiles, k_blocks, grid, ctas, waves)
    dp = num_tiles - tail
    covered = {}
    partial_of = {}   # tile -> CTAs holding a partial piece of it
    owners = {}       # tile -> (owner CTA, the CTAs it waits for, in order)
    for c, units in enumerate(sched):
        whole = [u for u in units if u[0] < dp]
        pieces = [u for u in units if u[0] >= dp]
        assert [u[0] for u in whole] == list(range(c, dp, grid)), "whole tiles: c, c + grid, ..."
        assert all((kb0, kb1) == (0, k_blocks) for _, kb0, kb1, _ in whole)
        assert units[:len(whole)] == whole, "whole tiles come first"
        assert waves or len(pieces) <= 2, (c, pieces)
        assert sum(1 for p in pieces if p[1] > 0) <= 1, "one partial piece (one flag) per CTA"
        assert all(p[1] == 0 for p in pieces[1:]), "a CTA's partial piece comes before the ones it owns"
        assert all(p[3] == [] for p in pieces[:-1]), "only a CTA's last piece waits (for the CTAs after it)"
        if c >= ctas:
            assert not pieces
        for t, kb0, kb1, waits in units:
            assert 0 <= kb0 < kb1 <= k_blocks
            for kb in range(kb0, kb1):
                assert (t, kb) not in covered, f"tile {t} k-block {kb} twice"
                covered[(t, kb)] = c
            if t >= dp:
                if kb0 == 0:
                    owners[t] = (c, list(waits))
                else:
                    assert not waits
                    partial_of.setdefault(t, []).append(c)
    assert len(covered) == num_tiles * k_blocks, "every k-block of every tile"
    shares = [sum(kb1 - kb0 for t, kb0, kb1, _ in units if t >= dp) for units in sched[:ctas]]
    assert max(shares) - min(shares) <= 1, "the tail's k-blocks dealt evenly"
    assert set(owners) == set(range(dp, num_tiles)), "every tail tile has an owner"
    for t, (owner, waits) in owners.items():
        assert waits == sorted(partial_of.get(t, [])), (t, owner, waits)
        assert all(w > owner for w in waits), "an owner waits only for later CTAs"


@pytest.mark.parametrize("group_m", [4, 8, 16])
@pytest.mark.parametrize("tiles_m,tiles_n,batch", [(64, 32, 1), (64, 64, 1), (17, 33, 1), (9, 5, 3), (1, 7, 2),
                                                   (16, 1, 1), (31, 16, 1), (65, 3, 1)])
def test_raster_visits_every_tile_once_in_bands(tiles_m, tiles_n, batch, group_m):
    """The persistent tile order (sched::PersistentScheduler, the kernels' code; sm_90a's 16-bit 128x256
    tiles walk bands of 16 tile-rows, the others 8, sm_100a's CTA pairs 4): a permutation of the tiles,
    batch-major, each band of group_m tile-rows walked column by column before the next; and a 132-CTA
    wave of 128x256 tiles in bands of 16 spans fewer A rows + B columns than in bands of 8."""
    mod, why = _ext.load()
    if mod is None:
        pytest.skip(f"extension not built: {why}")
    order = mod.tile_raster(tiles_m, tiles_n, batch, group_m)
    assert sorted(order) == [(b, i, j) for b in range(batch) for i in range(tiles_m) for j in range(tiles_n)]
    for t, (b, i, j) in enumerate(order):
        r = t - b * tiles_m * tiles_n
        band = r // (group_m * tiles_n)
        assert b == t // (tiles_m * tiles_n) and i // group_m == band, (t, b, i, j)
        rows = min(group_m, tiles_m - band * group_m)
        assert j == (r - band * group_m * tiles_n) // rows, "column by column inside a band"


def test_a_band_of_16_is_a_squarer_wave_for_128x256_tiles():
    mod, why = _ext.load()
    if mod is None:
        pytest.skip(f"extension not built: {why}")
    span = {}
    for g in (8, 16):
        wave = mod.tile_raster(64, 32, 1, g)[:132]  # 8192 x 8192 in 128 x 256 tiles
        span[g] = len({i for _, i, _ in wave}) * 128 + len({j for _, _, j in wave}) * 256
    assert span[16] < 0.85 * span[8], span  # 2048 + 2304 rows/columns against 1024 + 4352


# ---- on the GPU (sm_90a) ------------------------------------------------------------------------

def _require_sm90_plan(m, n, k, config, ctas, batch=1, dtype="bfloat16", out="bfloat16"):
    """Skips off sm_90a; returns the plan's CTAs for this device (the test's shapes assume 132 SMs or a
    similar count: where the device's count gives no partial last wave to share, skip with the reason)."""
    if jax.default_backend() != "gpu":
        pytest.skip("no CUDA GPU")
    if _arch.device_cc()[0] != 90:
        pytest.skip("the last-wave split is the sm_90a dense entries' (sm_100a keeps whole tiles)")
    entry = _arch.menu("sm_90a").get(config)  # config -1: the heuristic's
    if entry is not None and not entry["built"]:  # a sweep entry of a default build (JAX_TMEM_CONFIGS=heuristic)
        pytest.skip(entry["not_built"])
    sms = _arch.device_sms()
    ctas = sms * (1 - ctas) if ctas < 0 else ctas  # -w: every SM, the last w whole waves shared too
    plan = isa.kernel_plan("sm_90a", m, n, k, a_dtype=dtype, config=config, splits=ctas, num_sms=sms, batch=batch,
                           out_dtype=out)
    if plan["splits"] <= 1:
        pytest.skip(f"{batch}x{m}x{n}x{k} on config {config} has no partial last wave on {sms} SMs")
    return plan["splits"]


# (M, N, K, batch, config, CTAs sharing the last wave (-w: every SM, and the w whole waves before it),
#  in dtype, out dtype, epilogue + c)
CASES = [
    (2304, 4096, 1000, 1, 20, -1, BF16, BF16, True),   # 288 tiles: 24 left + one wave dealt to every SM
    (2304, 4096, 1000, 1, 8, -1, BF16, F32, False),    # the same on the register-store TMA entry
    (3456, 4096, 520, 1, 20, -2, BF16, BF16, False),   # 432 tiles, 36 left + 2 waves, 9 k-blocks a tile
    (2304, 4000, 1000, 1, 24, -1, BF16, BF16, True),   # 128x192: 378 tiles (114 left), N tail
    (1152, 4096, 1000, 1, 8, 48, BF16, F32, False),    # 144 tiles of 128x256: 12 left over, K tail
    (1152, 4096, 1000, 1, 8, 13, BF16, BF16, False),   # just more CTAs than tiles left over
    (1152, 4096, 1000, 1, 8, 132, BF16, F32, True),    # every SM: 1-2 k-blocks a piece, bias + gelu + c
    (520, 2504, 776, 3, 8, 40, BF16, F16, True),       # batch 3, M and N tails: 150 tiles
    (1100, 2100, 1008, 1, 9, 84, F16, F32, False),     # 128x128 TMA-store entry: 153 tiles
    (1100, 2100, 1008, 1, 0, 100, BF16, BF16, True),   # 128x128 register epilogue
    (1152, 4096, 1000, 1, 1, 48, BF16, F32, False),    # 128x256 register epilogue
    (1152, 4096, 1024, 1, 8, 48, E4M3, BF16, False),   # fp8: 8 k-blocks of 128
    (1152, 4096, 1024, 1, 8, 96, E4M3, F32, True),     # every k-block its own piece
    (1152, 4096, 1000, 1, 20, 48, BF16, BF16, True),   # stores under the next tile's MMAs (config 20)
    (520, 2504, 776, 3, 20, 40, BF16, F16, False),     # the same, batch 3, M and N tails
    (1152, 4096, 1000, 1, 24, 100, BF16, BF16, True),  # 128x192 (sweep entry 24): 198 tiles, N tail
]


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[3]}x{c[0]}x{c[1]}x{c[2]}-cfg{c[4]}-ctas{c[5]}-"
                                                     f"{np.dtype(c[6]).name}-{np.dtype(c[7]).name}")
def test_last_wave_shared_along_k(case):
    m, n, k, batch, config, ctas, in_dtype, out_dtype, epi_c = case
    ctas = _require_sm90_plan(m, n, k, config, ctas, batch, np.dtype(in_dtype).name, np.dtype(out_dtype).name)
    s = seed_of("tail", *case)
    bs = (batch,) if batch > 1 else ()
    a, b = rand(s, bs + (m, k), in_dtype), rand(s + 1, bs + (n, k), in_dtype)
    nb = len(bs)
    dn = (((nb + 1,), (nb + 1,)), (tuple(range(nb)), tuple(range(nb))))
    bias, c = rand(s + 2, (n,), F32), rand(s + 3, bs + (m, n), out_dtype)
    args = (a, b, bias, c) if epi_c else (a, b)
    run = lambda cfg: forced_gemm_runs(cfg, args, dn, bs + (m, n), out_dtype)  # noqa: E731

    o1, o2 = run((config, ctas))
    assert not np.isnan(o1).any(), "unwritten (NaN-poisoned) outputs"
    np.testing.assert_array_equal(o1, o2)  # bitwise repeatable: the partial sums are added in CTA order
    ref = forced_gemm_ref(args)
    # fp8: Hopper's fp8 wgmma accumulates with reduced precision inside a chain (test_gpu_gemm._tol)
    tol = BF16 if np.dtype(in_dtype) == E4M3 else None
    assert_close(o1.astype(out_dtype), ref, out_dtype, k, tol_dtype=tol)
    whole = run((config, 1))[0]  # the same entry with whole tiles: equal within the accumulation's rounding
    assert_close(o1.astype(out_dtype), whole.astype(np.float64), out_dtype, k, tol_dtype=tol)


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1664, 8576])
def test_heuristic_shares_the_last_wave(m):
    """The default plan (no config) shares the last wave where menu::tail_split_default says so: 1664 x 4096
    = 208 tiles of 128x256, 76 left over on 132 SMs, every SM a piece; 8576 x 4096 = 1072 tiles, 16 left
    over after 8 waves: the wave before them shared too (splits 264). Against float64 and the same entry with whole
    tiles; poisoned output, bitwise repeatable."""
    n, k = 4096, 1000
    ctas = _require_sm90_plan(m, n, k, -1, 0)
    if _arch.device_sms() == 132:
        assert ctas == (132 if m == 1664 else 264), ctas
    s = seed_of("tail-default", m)
    a, b = rand(s, (m, k), BF16), rand(s + 1, (n, k), BF16)
    dn = (((1,), (1,)), ((), ()))

    def run(cfg):
        g = jax.jit(lambda poison, x, y: gemm_op.gemm(x, y, None, None, dn, np.dtype(BF16), gemm_op.Epilogue(), "kernel",
                                                      True, cfg), donate_argnums=0)
        return [np.asarray(g(jnp.full((m, n), jnp.nan, BF16), a, b).astype(jnp.float32)) for _ in range(2)]

    o1, o2 = run(-1)
    assert ctas > 1 and not np.isnan(o1).any()
    np.testing.assert_array_equal(o1, o2)
    y = np.asarray(a.astype(jnp.float32), np.float64) @ np.asarray(b.astype(jnp.float32), np.float64).T
    assert_close(o1.astype(BF16), y, BF16, k)
    whole = run((isa.kernel_plan("sm_90a", m, n, k, num_sms=_arch.device_sms())["config"], 1))[0]
    assert_close(o1.astype(BF16), whole.astype(np.float64), BF16, k)


@pytest.mark.gpu
def test_last_wave_command_buffers_on_and_off_agree():
    """The flags' memset and the kernel inside XLA's command buffers, and launched one by one: the same
    bits (a jitted chain of GEMMs, the last of which, 144 tiles, shares its last wave)."""
    _require_sm90_plan(1152, 4096, 1024, 8, 40)
    prog = textwrap.dedent("""
        import sys
        import jax, jax.numpy as jnp, numpy as np
        from jax_tmem.ops import gemm as gemm_op
        dn = (((1,), (0,)), ((), ()))
        k = jax.random.split(jax.random.key(3), 4)
        x = jax.random.normal(k[0], (1152, 1024), jnp.bfloat16)
        ws = [jax.random.normal(k[i + 1], (1024, 1024 if i < 2 else 4096), jnp.bfloat16) * 0.03 for i in range(3)]
        @jax.jit
        def chain(x, ws):
            h = x
            outs = []
            for w in ws:
                h = gemm_op.gemm(h, w, None, None, dn, jnp.dtype(jnp.bfloat16), gemm_op.Epilogue(), "kernel", True, (8, 40))
                outs.append(h)
            return [o.astype(jnp.float32) for o in outs]
        np.save(sys.argv[1], np.concatenate([np.asarray(o).ravel() for o in chain(x, ws)]))
    """)
    outs = command_buffer_runs(prog)
    np.testing.assert_array_equal(outs[0], outs[1])
