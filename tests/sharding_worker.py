"""Run by tests/test_sharding.py in a fresh process with 8 host CPU devices (the XLA flag must precede
jax's import). Prints one JSON line per case: the max error against the unsharded float64 result, the
output's PartitionSpec and the collectives in the compiled HLO, for jax_tmem (kernel path: the C++ CPU
handler runs each device's GEMM) and for the same program with lax.dot_general."""

import json
import os
import re
import sys

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

import jax_tmem  # noqa: E402

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")


def collectives(f, *args):
    txt = f.lower(*args).compile().as_text()
    return {k: len(re.findall(re.escape(k) + r"(-start)?\(", txt)) for k in COLLECTIVES}


def main():
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    rng = np.random.default_rng(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    x = rng.standard_normal((64, 128)).astype(np.float32)
    w = (rng.standard_normal((128, 96)) * 0.1).astype(np.float32)
    bias = rng.standard_normal((96,)).astype(np.float32)
    # (name, x spec, w spec): data parallel, column (Megatron), row, FSDP-like (K sharded on both)
    layouts = [("data", P("data", None), P()), ("column", P("data", None), P(None, "model")),
               ("row", P(None, "model"), P("model", None)), ("fsdp", P("data", "model"), P("model", None))]
    for name, sx, sw in layouts:
        X, W = jax.device_put(x, NamedSharding(mesh, sx)), jax.device_put(w, NamedSharding(mesh, sw))
        for act in (None, "relu"):
            ref = np.maximum if act else (lambda a, _: a)
            ref = ref(x.astype(np.float64) @ w.astype(np.float64) + bias, 0)
            ours = jax.jit(lambda a, b: jax_tmem.matmul(a, b, bias=bias, activation=act, out_dtype=jnp.float32,
                                                        path="kernel"))
            lax_ = jax.jit(lambda a, b: jax_tmem.matmul(a, b, bias=bias, activation=act, out_dtype=jnp.float32,
                                                        path="xla"))
            y = ours(X, W)
            print(json.dumps(dict(case=f"{name}/{act}", err=float(np.abs(np.asarray(y) - ref).max()),
                                  spec=str(y.sharding.spec), spec_xla=str(lax_(X, W).sharding.spec),
                                  ours=collectives(ours, X, W), xla=collectives(lax_, X, W))), flush=True)
        # the gradient of a sharded loss (the backward GEMMs partition too)
        loss = lambda path: jax.jit(jax.grad(lambda a, b: jnp.sum(jnp.tanh(jax_tmem.matmul(a, b, path=path)) ** 2),
                                             argnums=(0, 1)))
        g, gx = loss("kernel")(X, W), loss("xla")(X, W)
        print(json.dumps(dict(case=f"{name}/grad", err=max(float(np.abs(np.asarray(u) - np.asarray(v)).max())
                                                         for u, v in zip(g, gx)),
                              ours=collectives(loss("kernel"), X, W), xla=collectives(loss("xla"), X, W))), flush=True)
    # x's rows and w's columns on the same mesh axis: one of them must be gathered (as XLA does)
    X, W = jax.device_put(x, NamedSharding(mesh, P("data", None))), jax.device_put(w, NamedSharding(mesh, P(None, "data")))
    f = jax.jit(lambda a, b: jax_tmem.matmul(a, b, out_dtype=jnp.float32, path="kernel"),
                out_shardings=NamedSharding(mesh, P("data", None)))
    print(json.dumps(dict(case="same_axis", err=float(np.abs(np.asarray(f(X, W)) - x.astype(np.float64) @ w).max()))),
          flush=True)
    # shard_map: each device calls its local GEMM
    f = jax.jit(jax.shard_map(lambda a, b: jax.lax.psum(jax_tmem.matmul(a, b, path="kernel"), "model"), mesh=mesh,
                              in_specs=(P("data", "model"), P("model", None)), out_specs=P("data", None)))
    y = f(jax.device_put(x, NamedSharding(mesh, P("data", "model"))), jax.device_put(w, NamedSharding(mesh, P("model", None))))
    print(json.dumps(dict(case="shard_map", err=float(np.abs(np.asarray(y) - x.astype(np.float64) @ w).max()))), flush=True)
    # vmap over a sharded batch
    xb = rng.standard_normal((4, 16, 128)).astype(np.float32)
    XB = jax.device_put(xb, NamedSharding(mesh, P("data", None, "model")))
    y = jax.jit(jax.vmap(lambda a: jax_tmem.matmul(a, w, path="kernel")))(XB)
    print(json.dumps(dict(case="vmap", err=float(np.abs(np.asarray(y) - xb.astype(np.float64) @ w).max()))), flush=True)


if __name__ == "__main__":
    main()
