"""The derivative epilogue (Epilogue.act_grad: y = (alpha acc + bias) * act'(c), the backward GEMM of
``dot_general(..., input_activation=)``) on a GPU: the TMA-store-overlap entries 20 / 22 with bf16 outputs run it in
the kernel for relu / silu / gelu_tanh (kernels/sm90_act_grad.cuh: c through TMA into the output boxes, act' on the
packed output under the next unit's first k-blocks; menu::act_grad_in_kernel); every other plan (entry 24, gelu, f16
and f32 outputs, every other entry) writes the product and the handler's second pass multiplies (act_grad_pass.cu).
Against float64, fresh random inputs, bitwise repeatable."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import BF16, F16, F32, f64, rand, seed_of
from test_act_dot import ACTS, dact64
from test_gpu_gemm import (ALL_CONFIGS, _layout_operands, _ref, _require_config, _require_entry_bf16, _require_kernels,
                           _tol)
import jax_tmem
from jax_tmem.ops import gemm as gemm_op

pytestmark = pytest.mark.gpu


def _act_grad_case(cfg, act, out_dtype, m, n, k, batch, b_major, s):
    a, b, dn = _layout_operands(s, BF16, BF16, m, n, k, "K", b_major, batch)
    out_shape = ((batch,) if batch else ()) + (m, n)
    bias, z = rand(s + 2, (n,), F32), rand(s + 3, out_shape, out_dtype, scale=2.0)
    epi = gemm_op.Epilogue(activation=act, act_grad=True, alpha=0.5, has_bias=True, has_c=True)
    f = jax.jit(lambda x, y, bb, cc: gemm_op.gemm(x, y, bb, cc, dn, np.dtype(out_dtype), epi, "kernel", True, cfg))
    o1, o2 = (np.asarray(f(a, b, bias, z).astype(jnp.float32)) for _ in range(2))
    ref = (0.5 * _ref(a, b, dn) + f64(bias)) * dact64(z.astype(jnp.float32), act)
    err = np.abs(o1 - ref).max() / np.abs(ref).max()
    assert err < _tol(BF16, out_dtype), f"config {cfg} {act} {m}x{n}x{k} batch {batch}: rel err {err:.3e}"
    np.testing.assert_array_equal(o1, o2)
    return [d for d in jax_tmem.decisions() if d.op == "gemm act_grad"][-1]


def _in_kernel(decision):
    return decision.path == "kernel" and decision.target.startswith("in the epilogue")


@pytest.mark.parametrize("config", [20, 22, 24])
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("out_dtype", [BF16, F16, F32], ids=lambda d: np.dtype(d).name)
def test_overlap_entries(config, act, out_dtype):
    """K of 20 k-blocks (bf16 outputs of relu / silu / gelu_tanh on 20 / 22: in the kernel; the rest: the second
    pass), several tiles per CTA (2 x 2100 x 2056: 306 tiles of 128x256 on 132 SMs), tails in M and N, both weight
    layouts."""
    arch = _require_kernels()
    _require_config(arch, config)
    for b_major in ("K", "MN"):
        s = seed_of("act-grad-overlap", config, act, out_dtype, b_major)
        d = _act_grad_case(config, act, out_dtype, 2100, 2056, 1224, 2, b_major, s)
        assert _in_kernel(d) == (config in (20, 22) and act != "gelu" and out_dtype == BF16), str(d)


@pytest.mark.parametrize("config", [20, 22, 24])
@pytest.mark.parametrize("k", [40, 328, 1152, 1160, 1224, 4104])
def test_overlap_entries_at_every_unit_length(config, k):
    """Units of 1, 6, 18, 19 (its last k-block partial), 20 and 65 k-blocks: the pending tile's chunks all in the last
    k-block (short units) or spread over the next unit's first ones."""
    arch = _require_kernels()
    _require_config(arch, config)
    s = seed_of("act-grad-k", config, k)
    d = _act_grad_case(config, "gelu_tanh", BF16, 1000, 1032, k, 0, "K", s)
    assert _in_kernel(d) == (config in (20, 22)), str(d)


@pytest.mark.parametrize("m, n, k", [(3000, 4104, 2048), (4096, 8192, 512), (8192, 8192, 4096)])
def test_heuristic_plans(m, n, k):
    """The heuristic's plans (the last wave shared along K, 2x1 clusters) with the epilogue in the kernel."""
    _require_kernels()
    d = _act_grad_case(-1, "gelu_tanh", BF16, m, n, k, 0, "MN", seed_of("act-grad-heuristic", m, n, k))
    cfg = int(d.target.split("config ")[1].split(",")[0])
    assert _in_kernel(d) == (cfg in (20, 22)), str(d)
    if (m, n, k) == (8192, 8192, 4096):  # an MLP's gradient GEMM (scripts/act_grad_probe.py): in the kernel
        assert _in_kernel(d), str(d)


@pytest.mark.parametrize("config", ALL_CONFIGS, ids=lambda c: f"config{c}")
def test_every_menu_config(config):
    """Each entry, forced (the kernel's epilogue on 20 / 22, the second pass after every other), one activation per
    entry in turn, tails, batches, bf16 and f16 outputs."""
    _require_entry_bf16(config)
    act = ACTS[config % len(ACTS)]
    for m, n, k, batch, out_dtype in [(5, 264, 200, 0, BF16), (264, 136, 56, 2, F16), (1000, 776, 600, 0, BF16)]:
        _act_grad_case(config, act, out_dtype, m, n, k, batch, "K", seed_of("act-grad-every", config, m, n, k))
