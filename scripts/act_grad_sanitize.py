"""The derivative epilogue in the sm_90a kernel (entries 20 / 22, kernels/sm90_act_grad.cuh) under compute-sanitizer:
several tiles per CTA, units of 2 k-blocks (every chunk in the unit's last k-block) and of 10 (spread over the next
unit's first ones), tails in M and N, checked against float64 on the host. Run with XLA_PYTHON_CLIENT_PREALLOCATE=false:
    compute-sanitizer --tool racecheck python3 -P scripts/act_grad_sanitize.py"""
import jax.numpy as jnp
import numpy as np

from jax_tmem.ops import gemm as gemm_op

rng = np.random.default_rng(0)
BETA, C = np.sqrt(2 / np.pi), 0.044715
for config, (batch, m, n, k) in [(20, (2, 2100, 2056, 128)), (20, (2, 2100, 2056, 640)), (22, (2, 2100, 2056, 640))]:
    a = jnp.asarray(rng.standard_normal((batch, m, k)), jnp.bfloat16)
    b = jnp.asarray(rng.standard_normal((n, k)) / np.sqrt(k), jnp.bfloat16)
    z = jnp.asarray(2 * rng.standard_normal((batch, m, n)), jnp.bfloat16)
    epi = gemm_op.Epilogue(activation="gelu_tanh", act_grad=True, has_c=True)
    out = gemm_op.gemm(a, b, None, z, (((2,), (1,)), ((), ())), np.dtype(jnp.bfloat16), epi, "kernel", True, config)
    x = np.asarray(z.astype(jnp.float32), np.float64)
    t = np.tanh(BETA * (x + C * x ** 3))
    ref = np.einsum("bmk,nk->bmn", np.asarray(a.astype(jnp.float32), np.float64),
                    np.asarray(b.astype(jnp.float32), np.float64))
    ref *= 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * BETA * (1 + 3 * C * x * x)
    err = float(np.abs(np.asarray(out.astype(jnp.float32), np.float64) - ref).max() / np.abs(ref).max())
    print(f"config {config} {batch}x{m}x{n}x{k}: rel err {err:.2e}", flush=True)
    assert err < 2e-2
print("act_grad sanitize cases done")
