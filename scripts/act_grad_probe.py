"""Dev tool: the backward of an MLP's second projection with respect to its input, dz = (g w2^T) * act'(z), on one
GPU, four ways (interleaved rounds, step_gemm_probe's timing): "fused" jax_tmem.dot_general(z, w2,
input_activation=act) (its backward route: act' in the gradient GEMM's epilogue where the kernels have it, on GPUs so
far the product then XLA's multiply, gemm.py ACT_GRAD_IN_KERNEL), "unfused" jax_tmem.dot_general(act(z), w2) (our
GEMM, then XLA's multiply), "xla" lax.dot_general(act(z), w2) (cuBLAS, then XLA's multiply), and "gemm" our plain
g w2^T alone (the GEMM without the derivative, so the epilogue's own cost shows). Each is the vjp of the forward
with respect to z alone (the forward product is dead code), w2 stored (f, d) as Flax's Dense keeps it.
    python3 -P scripts/act_grad_probe.py [--m 8192 --d 4096 --f 8192 --act gelu_tanh --rounds 5 --sustain 0.5]"""
import argparse
import os
import statistics
import sys

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from step_gemm_probe import timed  # noqa: E402
import jax_tmem  # noqa: E402
from jax_tmem.ops.epilogue import ACTIVATIONS, apply_activation  # noqa: E402

NN = (((1,), (0,)), ((), ()))
NT = (((1,), (1,)), ((), ()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=8192, help="tokens")
    ap.add_argument("--d", type=int, default=4096, help="model width (the gradient GEMM's K)")
    ap.add_argument("--f", type=int, default=8192, help="hidden width on one device (the gradient GEMM's N)")
    ap.add_argument("--act", default="gelu_tanh", choices=sorted(a for a in ACTIVATIONS if a))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sustain", type=float, default=0.5)
    args = ap.parse_args()
    m, d, f, act = args.m, args.d, args.f, args.act
    print(f"{jax.devices()[0].device_kind}, jax {jax.__version__}; dz = (g w2^T) * {act}'(z), "
          f"z {m}x{f}, w2 {f}x{d}, bf16", flush=True)
    ks = jax.random.split(jax.random.key(0), 3)
    z = jax.random.normal(ks[0], (m, f), jnp.bfloat16)
    w2 = (0.02 * jax.random.normal(ks[1], (f, d))).astype(jnp.bfloat16)
    g = jax.random.normal(ks[2], (m, d), jnp.bfloat16)
    fwd = {
        "fused": lambda zz, w: jax_tmem.dot_general(zz, w, NN, preferred_element_type=jnp.bfloat16, path="kernel",
                                                    input_activation=act),
        "unfused": lambda zz, w: jax_tmem.dot_general(apply_activation(zz, act), w, NN, preferred_element_type=jnp.bfloat16,
                                                      path="kernel"),
        "xla": lambda zz, w: jax.lax.dot_general(apply_activation(zz, act), w, NN, preferred_element_type=jnp.bfloat16),
    }
    fns = {n: jax.jit(lambda zz, w, gg, fw=fw: jax.vjp(lambda q: fw(q, w), zz)[1](gg)[0]) for n, fw in fwd.items()}
    fns["gemm"] = jax.jit(lambda zz, w, gg: jax_tmem.dot_general(gg, w, NT, preferred_element_type=jnp.bfloat16,
                                                                  path="kernel"))
    outs = {n: fn(z, w2, g).astype(jnp.float32) for n, fn in fns.items()}
    ref = outs["xla"]
    for n in ("fused", "unfused"):
        err = float(jnp.max(jnp.abs(outs[n] - ref)) / jnp.max(jnp.abs(ref)))
        print(f"{n}: max |{n} - xla| / max |xla| = {err:.2e}", flush=True)
    jax_tmem.clear_decisions()
    t = timed(fns, (z, w2, g), args)
    dec = sorted({f"{x.op}: {x.target}" for x in jax_tmem.decisions()})
    fl = 2.0 * m * f * d
    med = {n: statistics.median(v) for n, v in t.items()}
    for n in fns:
        print(f"{n:8s} {med[n] * 1e6:8.1f} us ({fl / med[n] / 1e12:5.0f} TFLOP/s of the GEMM)", flush=True)
    for other in ("xla", "unfused", "gemm"):
        r = [t[other][i] / t["fused"][i] for i in range(args.rounds)]
        print(f"{other}/fused time {statistics.median(r):.3f} ({min(r):.3f}-{max(r):.3f})", flush=True)
    print("decisions:", dec, flush=True)


if __name__ == "__main__":
    main()
