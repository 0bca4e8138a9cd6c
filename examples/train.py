"""Train a small model with each jax_tmem recipe next to plain Flax, on synthetic data.

Models (both regress a fixed random "teacher" of the same architecture, so the loss has somewhere to go;
8 batches are made once and cycled, so a timed step is the model's forward + backward + update only):
  mlp          linen: residual blocks h + Dense(d)(gelu(Dense(hidden)(LayerNorm(h)))), jax_tmem.flax.linen.Dense
  transformer  nnx: one pre-LN transformer block (QKV and output projections as nnx.LinearGeneral, causal
               attention by jax.nn.dot_product_attention, a gelu MLP of nnx.Linear), jax_tmem.flax.nnx;
               ``--attention``: "cudnn" (flash attention, what a transformer trained on a GPU runs; the
               default on a GPU for bf16 / f16 compute, head dims and sequences in multiples of 64) or "xla"
               (XLA's attention, the scores materialized in float32: ~8 ms of plain Flax's 23 ms step at
               4 x 2048 tokens on an H200, against ~1.1 ms for cuDNN's; the default elsewhere)

Contenders: "flax" (the plain Flax layers, lax.dot_general) and the recipes given (jax_tmem's drop-ins with
``recipe=``); the same init key, data and optimizer (optax.adam) for all. Parameters float32, compute
``--dtype`` (bfloat16). Prints the loss every ``--log-every`` steps; then times one training step
(forward + backward + update) per contender, interleaved over rounds (median, ms), and writes
``OUT/train_<model>.json`` and ``OUT/train_<model>.png`` (loss curves; needs matplotlib).

``--quant-fraction`` also times, per quantized recipe, a program that runs only that recipe's
quantization passes for the step's GEMM operands (the same functions and layouts the recipe uses), and
reports it as a fraction of the recipe's step time: an estimate of what quantization costs.

Usage:
  python -P examples/train.py --model mlp --steps 300                       # small, runs anywhere
  python -P examples/train.py --model mlp --d 4096 --hidden 16384 --tokens 8192 --steps 0 --time-rounds 7
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import linen as nn
from flax import nnx

import jax_tmem
from jax_tmem.flax import linen as jl
from jax_tmem.flax import nnx as jn


# ---- models -----------------------------------------------------------------------------------

class MLP(nn.Module):
    d: int
    hidden: int
    blocks: int
    dtype: object
    recipe: str | None  # None: plain Flax

    def dense(self, features, name):
        if self.recipe is None:
            return nn.Dense(features, dtype=self.dtype, name=name)
        return jl.Dense(features, dtype=self.dtype, recipe=self.recipe, name=name)

    @nn.compact
    def __call__(self, x):
        h = x
        for i in range(self.blocks):
            y = nn.LayerNorm(dtype=self.dtype, name=f"ln{i}")(h)
            y = nn.gelu(self.dense(self.hidden, f"up{i}")(y))
            h = h + self.dense(self.d, f"down{i}")(y)
        return h


class Block(nnx.Module):
    def __init__(self, d, hidden, heads, dtype, recipe, rngs, attention="xla"):
        lin = nnx.Linear if recipe is None else (lambda *a, **k: jn.Linear(*a, recipe=recipe, **k))
        gen = nnx.LinearGeneral if recipe is None else (lambda *a, **k: jn.LinearGeneral(*a, recipe=recipe, **k))
        self.heads = heads
        self.attention = attention
        self.ln1 = nnx.LayerNorm(d, dtype=dtype, rngs=rngs)
        self.qkv = gen(d, (3, heads, d // heads), dtype=dtype, rngs=rngs)
        self.out = gen((heads, d // heads), d, axis=(-2, -1), dtype=dtype, rngs=rngs)
        self.ln2 = nnx.LayerNorm(d, dtype=dtype, rngs=rngs)
        self.up = lin(d, hidden, dtype=dtype, rngs=rngs)
        self.down = lin(hidden, d, dtype=dtype, rngs=rngs)

    def __call__(self, x):  # x (batch, seq, d)
        qkv = self.qkv(self.ln1(x))
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        a = jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation=self.attention)
        x = x + self.out(a)
        return x + self.down(nnx.gelu(self.up(self.ln2(x))))


# ---- training ---------------------------------------------------------------------------------

def make_mlp_task(args, recipe, key):
    dt = jnp.dtype(args.dtype)
    model = MLP(args.d, args.hidden, args.blocks, dt, recipe)
    teacher = MLP(args.d, args.hidden, args.blocks, jnp.float32, None)
    kx, kp, kt = jax.random.split(key, 3)
    x0 = jnp.zeros((args.tokens, args.d), dt)
    params = model.init(kp, x0)
    tparams = teacher.init(kt, x0)
    opt = optax.adam(args.lr)
    opt_state = opt.init(params)

    data = make_data(lambda x: teacher.apply(tparams, x), kx, (args.tokens, args.d), dt)

    @jax.jit
    def train_step(params, opt_state, x, y):
        loss, g = jax.value_and_grad(lambda p: jnp.mean((model.apply(p, x).astype(jnp.float32) - y) ** 2))(params)
        upd, opt_state = opt.update(g, opt_state, params)
        return optax.apply_updates(params, upd), opt_state, loss

    state = [params, opt_state]

    def step_fn(i):
        state[0], state[1], loss = train_step(state[0], state[1], *data[i % len(data)])
        return loss
    return step_fn, state


N_BATCHES = 8  # distinct synthetic batches, made once (the teacher's forward is not part of a step)


def make_data(teacher, key, shape, dt):
    f = jax.jit(lambda k: (lambda x: (x.astype(dt), teacher(x).astype(jnp.float32)))(jax.random.normal(k, shape)))
    return [f(jax.random.fold_in(key, i)) for i in range(N_BATCHES)]


def attention_impl(args, dt) -> str:
    """The attention implementation of the transformer block (``--attention``; "auto": cuDNN's flash attention
    on a GPU for 16-bit compute at head dims and sequence lengths in multiples of 64, XLA's elsewhere)."""
    choice = getattr(args, "attention", "auto")
    if choice == "auto":  # (cuDNN's flash kernels, conservatively: 16-bit, head dim and sequence in 64s)
        ok = (jax.default_backend() == "gpu" and dt in (jnp.bfloat16, jnp.float16)
              and (args.d // args.heads) % 64 == 0 and args.seq % 64 == 0)
        return "cudnn" if ok else "xla"
    return choice


def make_transformer_task(args, recipe, key):
    dt = jnp.dtype(args.dtype)
    seq = args.seq
    bsz = max(1, args.tokens // seq)
    kx, kp, kt = jax.random.split(key, 3)
    model = Block(args.d, args.hidden, args.heads, dt, recipe, nnx.Rngs(kp), attention=attention_impl(args, dt))
    teacher = Block(args.d, args.hidden, args.heads, jnp.float32, None, nnx.Rngs(kt))
    opt = nnx.Optimizer(model, optax.adam(args.lr), wrt=nnx.Param)

    gdef, tstate = nnx.split(teacher)
    data = make_data(lambda x: nnx.merge(gdef, tstate)(x), kx, (bsz, seq, args.d), dt)

    @nnx.jit
    def train_step(model, opt, x, y):
        loss, g = nnx.value_and_grad(lambda m: jnp.mean((m(x).astype(jnp.float32) - y) ** 2))(model)
        opt.update(model, g)
        return loss

    def step_fn(i):
        return train_step(model, opt, *data[i % len(data)])
    return step_fn, (model, opt)


TASKS = {"mlp": make_mlp_task, "transformer": make_transformer_task}


def gemm_shapes(args):
    """(tokens, in, out) of every dense layer of one step (for the quantization estimate)."""
    if args.model == "mlp":
        return [(args.tokens, args.d, args.hidden), (args.tokens, args.hidden, args.d)] * args.blocks
    return [(args.tokens, args.d, 3 * args.d), (args.tokens, args.d, args.d), (args.tokens, args.d, args.hidden),
            (args.tokens, args.hidden, args.d)]


def quant_only_fn(recipe, shapes, dt):
    """A program of only the recipe's quantization passes for one step's GEMM operands: forward x and w,
    backward the cotangent g, in the layouts the recipe quantizes (and, for fp8, the transposed copies the
    GEMMs make of their MN-major fp8 operands: jax_tmem's 1-byte transpose on a GPU)."""
    from jax_tmem.ops import recipes, scaled_dot, transpose
    r = jax_tmem.RECIPES[recipe]

    def f(xs, ws, gs):
        outs = []
        for x, w, g in zip(xs, ws, gs):
            if r.kind == "fp8":
                xq, _ = recipes.fp8_quantize(x, r.fwd_dtype)
                wq, _ = recipes.fp8_quantize(w, r.fwd_dtype)
                gq, _ = recipes.fp8_quantize(g, r.bwd_dtype)
                t = lambda v: transpose.transpose(v, (1, 0))
                outs += [xq, t(wq), gq, t(xq), t(gq)]  # fwd: x, w^T (K-major); dgrad: g, w; wgrad: x^T, g^T
            else:
                f_ = jax_tmem.ops.block_scale.get_format(r.kind)
                for t, axis in ((x, 1), (w, 0), (g, 1), (w, 1), (x, 0), (g, 0)):
                    gsc = scaled_dot.global_scale(t, f_) if f_.global_scale else None
                    tt = jnp.moveaxis(t, axis, -1)  # as scaled_dot_general lays each operand out
                    outs += list(jax_tmem.quantize(tt, f_.name, global_scale=gsc))
        return outs
    key = jax.random.key(7)
    xs = [jax.random.normal(jax.random.fold_in(key, 3 * i), (t, a), jnp.float32).astype(dt) for i, (t, a, b) in enumerate(shapes)]
    ws = [jax.random.normal(jax.random.fold_in(key, 3 * i + 1), (a, b), jnp.float32) for i, (t, a, b) in enumerate(shapes)]
    gs = [jax.random.normal(jax.random.fold_in(key, 3 * i + 2), (t, b), jnp.float32).astype(dt) for i, (t, a, b) in enumerate(shapes)]
    ws = [w.astype(dt) for w in ws]
    fn = jax.jit(f)
    return lambda: fn(xs, ws, gs)


def timed(fn, calls):
    t0 = time.perf_counter()
    out = None
    for _ in range(calls):
        out = fn()
    jax.block_until_ready(out)
    return (time.perf_counter() - t0) / calls


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=sorted(TASKS), default="mlp")
    ap.add_argument("--recipes", default="bf16,fp8,mxfp8", help="comma-separated jax_tmem recipes (plain Flax always runs)")
    ap.add_argument("--steps", type=int, default=300, help="training steps for the loss curves (0: none)")
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--blocks", type=int, default=2, help="mlp: residual blocks")
    ap.add_argument("--heads", type=int, default=8, help="transformer: attention heads")
    ap.add_argument("--seq", type=int, default=256, help="transformer: sequence length (batch = tokens / seq)")
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--attention", choices=("auto", "cudnn", "xla"), default="auto",
                    help="transformer: jax.nn.dot_product_attention's implementation (auto: cudnn on a GPU)")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--time-rounds", type=int, default=0, help="interleaved timing rounds of one step (0: no timing)")
    ap.add_argument("--time-calls", type=int, default=5, help="steps per timed batch")
    ap.add_argument("--quant-fraction", action="store_true")
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    recipes = [r for r in args.recipes.split(",") if r]
    contenders = ["flax"] + recipes
    make = TASKS[args.model]
    key = jax.random.key(0)
    print(f"{args.model}: d={args.d} hidden={args.hidden} tokens={args.tokens} dtype={args.dtype} on "
          f"{jax.devices()[0].device_kind} ({jax.default_backend()}), jax {jax.__version__}"
          + (f", attention {attention_impl(args, jnp.dtype(args.dtype))}" if args.model == "transformer" else ""))
    tasks = {c: make(args, None if c == "flax" else c, key)[0] for c in contenders}
    result = {"args": vars(args), "device": jax.devices()[0].device_kind, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "losses": {c: [] for c in contenders}, "step_ms": {}, "quant_ms": {}}
    if args.steps:
        for c in contenders:
            losses = result["losses"][c]
            for i in range(args.steps):
                losses.append(float(tasks[c](i)))
            print(f"  {c:>6}: loss " + " ".join(f"{losses[j]:.4g}" for j in range(0, args.steps, args.log_every))
                  + f" ... {losses[-1]:.4g} (final)")
        base = np.mean(result["losses"]["flax"][-10:])
        for c in contenders:
            fin = np.mean(result["losses"][c][-10:])
            print(f"  final loss (mean of the last 10 steps) {c:>6}: {fin:.5g} ({fin / base:.3f} x flax)")
    if args.time_rounds:
        for c in contenders:  # compile + warm up
            jax.block_until_ready(tasks[c](0))
            jax.block_until_ready(tasks[c](1))
        times = {c: [] for c in contenders}
        for rnd in range(args.time_rounds):
            order = contenders[rnd % len(contenders):] + contenders[:rnd % len(contenders)]
            for c in order:
                times[c].append(timed(lambda: tasks[c](rnd), args.time_calls))
        flops = 6 * sum(t * a * b for t, a, b in gemm_shapes(args))
        med = {c: statistics.median(v) for c, v in times.items()}
        print(f"step time (median of {args.time_rounds} interleaved rounds of {args.time_calls} steps; "
              f"{flops / 1e12:.2f} TFLOP of GEMMs per step):")
        for c in contenders:
            paired = [f / t for f, t in zip(times["flax"], times[c])]
            result["step_ms"][c] = {"median": med[c] * 1e3, "rounds_ms": [t * 1e3 for t in times[c]],
                                    "x_flax_paired": [min(paired), statistics.median(paired), max(paired)]}
            print(f"  {c:>6}: {med[c] * 1e3:8.3f} ms  {flops / med[c] / 1e12:7.1f} TFLOP/s  "
                  f"x flax {statistics.median(paired):.3f} (paired, {min(paired):.3f}-{max(paired):.3f})")
        if args.quant_fraction:
            dt = jnp.dtype(args.dtype)
            for c in recipes:
                if c == "bf16":
                    continue
                q = quant_only_fn(c, gemm_shapes(args), dt)
                jax.block_until_ready(q())
                jax.block_until_ready(q())
                qt = statistics.median(timed(q, args.time_calls) for _ in range(args.time_rounds))
                result["quant_ms"][c] = qt * 1e3
                print(f"  {c:>6}: its quantization passes alone {qt * 1e3:.3f} ms = {qt / med[c] * 100:.1f} % of its step")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"train_{args.model}.json"), "w") as fh:
        json.dump(result, fh, indent=1)
    if args.steps:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("(matplotlib is not installed: no PNG)")
            return
        fig, ax = plt.subplots(figsize=(7, 4))
        for c in contenders:
            lab = c if c == "flax" else f"jax_tmem {c}"
            if c in result["step_ms"]:
                lab += f" ({result['step_ms'][c]['median']:.2f} ms/step)"
            ax.plot(result["losses"][c], label=lab, lw=1)
        ax.set_yscale("log")
        ax.set_xlabel("step")
        ax.set_ylabel("loss (MSE to the teacher)")
        ax.set_title(f"{args.model}, d={args.d}, hidden={args.hidden}, {args.tokens} tokens, {result['device']}")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, f"train_{args.model}.png"), dpi=110)
        print("wrote", os.path.join(args.out, f"train_{args.model}.png"))


if __name__ == "__main__":
    main()
