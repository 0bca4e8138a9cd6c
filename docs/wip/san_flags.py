"""compute-sanitizer cases for the pool's ready flags (flag_pool.h): pair K splits (48 / 39 / 50) and a shared last wave
(20), each called twice on fresh inputs, against NumPy. XLA_PYTHON_CLIENT_PREALLOCATE=false."""
import jax, jax.numpy as jnp, numpy as np
from jax_tmem import isa
from jax_tmem._core import ext as _ext
from jax_tmem.ops import gemm as gemm_op

rng = np.random.default_rng(7)
dn = (((1,), (1,)), ((), ()))
for cfg, m, n, k in [((48, -2), 136, 1024, 2048), ((48, -3), 150, 1032, 2048), ((39, -4), 181, 1024, 4096),
                     ((20, 132), 1664, 4096, 520), ((50, -2), 150, 1544, 2048), ((50, -3), 136, 6144, 1024)]:
    if not any(e["config"] == cfg[0] and e["built"] for e in isa.kernel_menu("sm_90a")):
        print(cfg, "not built: skipped", flush=True)
        continue
    f = jax.jit(lambda x, w: gemm_op.gemm(x, w, None, None, dn, np.dtype(jnp.float32), gemm_op.Epilogue(), "kernel",
                                          True, cfg))
    for r in range(2):
        x = jnp.asarray(rng.standard_normal((m, k)), jnp.bfloat16)
        w = jnp.asarray(rng.standard_normal((n, k)), jnp.bfloat16)
        ref = np.asarray(x.astype(jnp.float32), np.float64) @ np.asarray(w.astype(jnp.float32), np.float64).T
        err = float(np.abs(np.asarray(f(x, w), np.float64) - ref).max() / np.abs(ref).max())
        print(cfg, (m, n, k), r, "rel err", err, flush=True)
        assert err < 1e-5, err
print("flag pool", _ext.flag_pool())
