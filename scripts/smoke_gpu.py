"""Quick GPU smoke check: a few kernel-path GEMMs against a float64 reference (run under `timeout`)."""
import sys, time
import numpy as np
import jax, jax.numpy as jnp
import jax_tmem

print("devices", jax.devices(), flush=True)
rng = np.random.default_rng(0)
fails = 0
cases = [("bfloat16", "bfloat16", 256, 256, 64, "NN"), ("bfloat16", "bfloat16", 300, 520, 200, "NN"),
         ("bfloat16", "bfloat16", 1000, 776, 1000, "TN"), ("bfloat16", "bfloat16", 129, 264, 136, "NT"),
         ("float16", "float16", 520, 1000, 512, "TT"), ("float32", "float32", 200, 300, 400, "NN"),
         ("float8_e4m3fn", "float8_e4m3fn", 333, 512, 1024, "NT"), ("float8_e5m2", "float8_e4m3fn", 64, 64, 64, "NT"),
         ("bfloat16", "bfloat16", 8192, 8192, 8192, "NN")]
for at, bt, m, n, k, lay in cases:
    a64 = rng.standard_normal((m, k)); b64 = rng.standard_normal((k, n))
    a = jnp.asarray(a64, at); b = jnp.asarray(b64, bt)
    if lay[0] == "T":
        a_in = jnp.asarray(np.ascontiguousarray(np.asarray(a, np.float32).T), at); ldims = (0,)
    else:
        a_in = a; ldims = (1,)
    if lay[1] == "T":
        b_in = jnp.asarray(np.ascontiguousarray(np.asarray(b, np.float32).T), bt); rdims = (1,)
    else:
        b_in = b; rdims = (0,)
    ref = np.asarray(a, np.float64) @ np.asarray(b, np.float64)
    f = jax.jit(lambda x, y: jax_tmem.dot_general(x, y, ((ldims, rdims), ((), ())), preferred_element_type=jnp.float32, path="kernel"))
    t0 = time.time()
    out = np.asarray(f(a_in, b_in), np.float64)
    err = np.abs(out - ref).max() / max(np.abs(ref).max(), 1e-30)
    ok = err < (3e-3 if at == "float32" else 1e-5)
    fails += not ok
    print(f"{at}x{bt} {m}x{n}x{k} {lay}: rel err {err:.2e} {'OK' if ok else 'FAIL'} ({time.time()-t0:.2f}s)", flush=True)
print("decisions:", *[str(d) for d in jax_tmem.decisions()[-3:]], sep="\n")
sys.exit(1 if fails else 0)
