"""compute-sanitizer cases for the swap-AB staged 16-bit store (sm90_epilogue.cuh staged_swap_store): one-split,
K splits summed in a cluster (split_fixup) and in pairs (pair_fixup), persistent CTAs with several units, a batch,
token tails, N % 8 != 0 (the direct store), each called twice on fresh inputs, bf16 out, against NumPy.
XLA_PYTHON_CLIENT_PREALLOCATE=false."""
import jax, jax.numpy as jnp, numpy as np
from jax_tmem import isa
from jax_tmem.ops import gemm as gemm_op

rng = np.random.default_rng(11)
for cfg, m, n, k, batch in [((41, 1), 150, 2056, 512, 0), ((41, -2), 160, 1536, 1024, 0), ((48, -2), 136, 1024, 2048, 0),
                            ((13, 1), 37, 8200, 144, 2), ((17, 1), 64, 1004, 208, 0), ((19, 1), 230, 1032, 256, 0),
                            ((50, -2), 150, 1544, 2048, 0), ((49, 1), 77, 3080, 512, 0)]:
    if not any(e["config"] == cfg[0] and e["built"] for e in isa.kernel_menu("sm_90a")):
        print(cfg, "not built: skipped", flush=True)
        continue
    bs = (batch,) if batch else ()
    nb = len(bs)
    dn = (((nb + 1,), (nb + 1,)), (tuple(range(nb)), tuple(range(nb))))
    f = jax.jit(lambda x, w: gemm_op.gemm(x, w, None, None, dn, np.dtype(jnp.bfloat16), gemm_op.Epilogue(), "kernel",
                                          True, cfg))
    for r in range(2):
        x = jnp.asarray(rng.standard_normal(bs + (m, k)), jnp.bfloat16)
        w = jnp.asarray(rng.standard_normal(bs + (n, k)), jnp.bfloat16)
        ref = np.einsum("...mk,...nk->...mn", np.asarray(x.astype(jnp.float32), np.float64),
                        np.asarray(w.astype(jnp.float32), np.float64))
        err = float(np.abs(np.asarray(f(x, w).astype(jnp.float32), np.float64) - ref).max() / np.abs(ref).max())
        print(cfg, (batch, m, n, k), r, "rel err", err, flush=True)
        assert err < 8e-3, err
print("staged store cases done")
