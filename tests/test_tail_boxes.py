"""Tail boxes (jax_tmem/tail_boxes.h): the sm_90a GEMM kernels and the 1-CTA sm_100a one load a K-major operand's
last row block (tokens past a multiple of the tile, a weight's last rows) through a second tensor map whose box holds
just those rows, rounded up to 8. The rest of that shared-memory slot keeps whatever an earlier stage left there,
which may reach only accumulator rows / columns past M / N, never stored.

GPU: every heuristic entry of the GPU's arch (sm_90a: and the kCandidate 35; sm_100a / sm_103a: and the CTA pair,
which reads whole boxes) forced, with tails in M and N: the output equals, bit for bit, the same rows and columns of
the same entry run on operands padded to whole tiles with random rows (where no tail box is used), and matches
float64; outputs NaN-poisoned. The sm_100a cases have never run (no Blackwell GPU here). Host (no GPU): the compile
tests of which operands take a tail box are tests/test_build.py::test_tail_boxes_only_for_k_major_operands and
::test_sm100_tail_boxes_in_the_one_cta_kernel.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jax_tmem import isa
from jax_tmem._core import arch as _arch
from jax_tmem.ops import gemm as gemm_op

from conftest import BF16, E4M3, F32, rand, seed_of

# max |err| / max |ref|, f32 out: 16-bit operands (exact products, f32 sums), fp8 (Hopper's reduced-precision fp8
# accumulation inside a wgmma chain), f32 (tf32)
TOL = {BF16: 2e-5, E4M3: 3e-3, F32: 4e-3}

# (config, splits (None: the entry's own), M, N, K, operand dtype, weight stored (K, N))
CASES = [
    # dense entries: tokens M tail (A's box), weight N tail (B's box, (N, K) weights only)
    (2, None, 200, 520, 1040, BF16, False), (2, None, 9, 520, 1040, BF16, True), (0, None, 80, 776, 528, BF16, False),
    (9, None, 200, 520, 1040, BF16, False), (1, None, 77, 520, 528, BF16, False), (20, None, 300, 1032, 528, BF16, False),
    (22, None, 1100, 1032, 528, BF16, False),  # 2x1 clusters: the second CTA's rows all past M
    (2, None, 200, 520, 1040, E4M3, False), (20, None, 80, 1032, 1040, E4M3, False),
    (0, None, 200, 520, 520, F32, False), (2, None, 77, 136, 264, F32, False),
    (14, 2, 200, 520, 2080, BF16, False), (14, -2, 80, 520, 2080, BF16, False),  # split-K: reduce pass, cluster
    # swap-AB entries: the weight's last rows (A's box), the tokens (B's box)
    (13, 1, 80, 4104, 1040, BF16, False), (13, -2, 96, 4104, 2080, BF16, True), (13, 1, 40, 4104, 1040, E4M3, False),
    (17, 1, 40, 4104, 1040, BF16, False), (17, -2, 72, 2056, 2080, E4M3, False), (15, 1, 5, 4104, 1040, BF16, False),
    (16, 1, 20, 1032, 1040, BF16, True), (11, 3, 9, 4104, 1040, BF16, False), (12, 1, 20, 1000, 1040, BF16, False),
    # the transposing fp8 (K, N) entries: their A (the weight) is transposed in shared memory, no tail box; tokens
    (18, 1, 100, 2056, 1024, E4M3, True), (19, 1, 200, 2056, 1024, E4M3, True),
    # the 192-token candidate (35): tokens in a 192-row box cut to the tail, the weight's last rows
    (35, -2, 150, 4104, 2080, BF16, False), (35, 1, 131, 2056, 1040, E4M3, False), (35, 1, 170, 1032, 1024, E4M3, True),
    # 35 in clusters of 2 / 4 (36, 37): the tokens multicast in whole boxes (no tail box), the weight's last rows
    # in each CTA's own box (the last cluster's later CTAs wholly past N)
    (36, 1, 150, 4104, 2080, BF16, False), (36, 2, 192, 1160, 1040, E4M3, False), (37, 1, 170, 4104, 1024, BF16, False),
    (37, 3, 131, 1032, 1024, E4M3, True),
    # 96 tokens wide (38), and in clusters of two token tiles sharing the weight by multicast (39: the weight's last
    # rows in whole boxes, the tokens' in each CTA's own box; the last cluster's second CTA wholly past M)
    (38, 1, 150, 4104, 1040, BF16, False), (38, -2, 40, 2056, 2080, E4M3, False), (39, 1, 150, 4104, 1040, BF16, False),
    (39, 2, 80, 1032, 1040, E4M3, False), (39, 1, 200, 2056, 1024, BF16, True),
    # token tiles sized to 129-160 tokens: 160 wide in clusters of 4 (40), 80 wide (41)
    (40, 1, 136, 4104, 1040, BF16, False), (40, 2, 150, 1032, 1024, E4M3, True), (41, 1, 136, 4104, 1040, BF16, False),
    (41, -2, 150, 2056, 2080, E4M3, False), (41, 1, 100, 2056, 1024, E4M3, True),
]

# sm_100a / sm_103a (tcgen05): the 1-CTA dense entries, split-K and swap-AB; the CTA pair (4) as a control
CASES_SM100 = [
    (0, None, 200, 520, 1040, BF16, False), (1, None, 77, 520, 528, BF16, False), (0, None, 9, 520, 1040, BF16, True),
    (1, None, 80, 1032, 1040, E4M3, False), (0, None, 200, 520, 520, E4M3, True), (0, None, 77, 136, 264, F32, False),
    (4, None, 300, 520, 528, BF16, False),
    (14, 2, 200, 520, 2080, BF16, False), (13, 1, 80, 4104, 1040, BF16, False), (13, 3, 40, 4104, 1040, E4M3, False),
    (12, 1, 20, 1000, 1040, BF16, True), (11, 3, 9, 4104, 1040, BF16, False),
]


def _require(arch):
    if jax.default_backend() != "gpu":
        pytest.skip("no CUDA GPU")
    cc = _arch.device_cc()[0]  # sm_100a's menu is sm_103a's too
    if cc != {"sm_90a": 90, "sm_100a": 100}[arch] and not (arch == "sm_100a" and cc == 103):
        pytest.skip(f"the {arch} cases need that GPU (this one: compute capability {_arch.device_cc()})")


def _run(x, w, dn, cfg, shape):
    f = jax.jit(lambda poison, a, b: gemm_op.gemm(a, b, None, None, dn, np.dtype(F32), gemm_op.Epilogue(), "kernel",
                                                  True, cfg), donate_argnums=0)
    return np.asarray(f(jnp.full(shape, jnp.nan, F32), x, w))


@pytest.mark.gpu
@pytest.mark.parametrize("arch,case", [("sm_90a", c) for c in CASES] + [("sm_100a", c) for c in CASES_SM100],
                         ids=lambda v: v if isinstance(v, str) else
                         f"cfg{v[0]}-s{v[1]}-{v[2]}x{v[3]}x{v[4]}-{np.dtype(v[5]).name}{'-kn' if v[6] else ''}")
def test_tail_rows_as_in_a_padded_problem(arch, case):
    config, splits, m, n, k, dtype, kn = case
    _require(arch)
    entry = next((e for e in isa.kernel_menu(arch) if e["config"] == config), None)
    if entry is None or not entry["built"]:
        pytest.skip(f"config {config} is not built here" + (f": {entry['not_built']}" if entry else ""))
    tok_block, w_block = (entry["block_n"], entry["block_m"]) if entry["swap_ab"] else (entry["block_m"], entry["block_n"])
    if arch == "sm_90a" and entry["cluster_m"] > 1:  # (an sm_100a CTA pair's block_m is the pair's 256 rows)
        if entry["swap_ab"]:  # a cluster of weight tiles
            w_block *= entry["cluster_m"]
        else:
            tok_block *= entry["cluster_m"]
    if arch == "sm_90a" and entry["cluster_n"] > 1:  # a swap-AB tile's token tiles sharing the weight
        tok_block *= entry["cluster_n"]
    mp, np_ = -(-m // tok_block) * tok_block, -(-n // w_block) * w_block
    assert (mp, np_) != (m, n), "a case without tails tests nothing here"
    s = seed_of("tail-boxes", *case)
    xp = rand(s, (mp, k), dtype)  # the padded operands: random rows past M / N, not zeros
    wp = rand(s + 1, (k, np_) if kn else (np_, k), dtype)
    x, w = xp[:m], (wp[:, :n] if kn else wp[:n])
    dn = (((1,), (0 if kn else 1,)), ((), ()))
    cfg = config if splits is None else (config, splits)
    out, again = _run(x, w, dn, cfg, (m, n)), _run(x, w, dn, cfg, (m, n))
    padded = _run(xp, wp, dn, cfg, (mp, np_))
    assert not np.isnan(out).any(), "unwritten (NaN-poisoned) outputs"
    np.testing.assert_array_equal(out, again)
    np.testing.assert_array_equal(out, padded[:m, :n])  # the tail rows summed as whole tiles sum them
    x64, w64 = (np.asarray(t.astype(jnp.float32), np.float64) for t in (x, w))
    ref = x64 @ (w64 if kn else w64.T)
    err = np.abs(out - ref).max() / np.abs(ref).max()
    assert err < TOL[np.dtype(dtype)], f"rel err {err:.3e}"  # (tests/test_gpu_gemm.py _tol, f32 out)
