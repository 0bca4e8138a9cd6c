"""A tensor-parallel + data-parallel MLP trained with Flax's sharding annotations (issue 17).

Two residual MLP blocks (d -> f -> d, Megatron split: the first kernel's columns and the second's rows on
the mesh axis "model", tokens on "data"), written with ``flax.linen`` and ``nn.with_partitioning``;
jit + NamedSharding do the rest. The same model with ``jax_tmem.flax.linen.Dense`` (each recipe) and
with Flax's own ``nn.Dense`` (lax.dot_general) is trained on the same synthetic data (a fixed random
teacher); prints the loss curves, the collectives of each compiled step, and the step times
(interleaved rounds, median). A recipe named "R+fused" is recipe R with the gelu handed to the second
layer (``Dense(d, input_activation="gelu_tanh")(z)`` for ``Dense(d)(nn.gelu(z))``: the same parameters, its
backward's gelu derivative inside the gradient GEMM).

    python3 -P examples/tp_dp_mlp.py                                  # every local GPU (>= 2)
    python3 -P examples/tp_dp_mlp.py --cpu-devices 8 --d 256 --f 512 --tokens 512 --steps 50   # no GPU
    JAX_TMEM_PATH=kernel ...   # on the CPU: each device's GEMM runs the C++ handler (the GPU's path)
"""
import argparse
import os
import sys
import time


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu-devices", type=int, default=0, help="run on N host CPU devices instead of the GPUs")
    ap.add_argument("--data", type=int, default=0, help="mesh size of the data axis (default: 2 if it divides)")
    ap.add_argument("--d", type=int, default=4096)
    ap.add_argument("--f", type=int, default=16384)
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--recipes", default="bf16,bf16+fused,fp8")
    ap.add_argument("--rounds", type=int, default=5, help="timing rounds (0: no timing)")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--profile", type=int, default=0, help="trace N steps of each variant (jax.profiler) and print "
                    "each device's GPU kernel time per step by kind; run with XLA_FLAGS=--xla_gpu_enable_command_buffer= "
                    "so that every kernel is its own trace event")
    ap.add_argument("--profile-warm", type=float, default=2.0, help="seconds of steps before each variant's trace, "
                    "so that it runs at the clock of a sustained run (the power cap), as the timed rounds do")
    ap.add_argument("--power", action="store_true", help="sample each GPU's power and SM clock (nvidia-smi, every 50 "
                    "ms) during the timed rounds and print their medians per variant (use --iters 20 or more, so that a "
                    "timed batch spans several samples)")
    return ap.parse_args()


ARGS = parse()
if ARGS.cpu_devices:  # before jax is imported
    os.environ["JAX_PLATFORMS"] = "cpu"
    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={ARGS.cpu_devices}"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from flax import linen as nn  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

import jax_tmem  # noqa: E402
import jax_tmem.flax.linen as jtl  # noqa: E402
from jax_tmem.report import collectives  # noqa: E402


class MLP(nn.Module):
    d: int
    f: int
    dense: type = nn.Dense
    kw: tuple = ()
    fused: bool = False  # the gelu as the second layer's input_activation (jax_tmem's Dense only)

    @nn.compact
    def __call__(self, x):
        init = nn.initializers.lecun_normal()
        for i in range(2):
            h = self.dense(self.f, use_bias=False, dtype=jnp.bfloat16, name=f"up{i}",
                           kernel_init=nn.with_partitioning(init, (None, "model")), **dict(self.kw))(x)
            act = dict(input_activation="gelu_tanh") if self.fused else {}  # (nn.gelu's default: approximate)
            h = h if self.fused else nn.gelu(h)
            x = x + self.dense(self.d, use_bias=False, dtype=jnp.bfloat16, name=f"down{i}",
                               kernel_init=nn.with_partitioning(init, ("model", None)), **dict(self.kw), **act)(h)
        return x


def main():
    devs = jax.devices()
    if len(devs) < 2:
        raise SystemExit(f"needs at least two devices (sees {len(devs)}); --cpu-devices N runs on the host")
    data = ARGS.data or (2 if len(devs) % 2 == 0 and len(devs) > 2 else 1)
    mesh = Mesh(np.array(devs).reshape(data, len(devs) // data), ("data", "model"))
    print(f"jax {jax.__version__}, jax_tmem {jax_tmem.__version__}, {len(devs)} x {devs[0].device_kind}, mesh "
          f"{dict(mesh.shape)}; d {ARGS.d}, f {ARGS.f}, tokens {ARGS.tokens}")
    tok = NamedSharding(mesh, P("data", None))
    kt, kx = jax.random.split(jax.random.key(0))
    teacher = jax.random.normal(kt, (ARGS.d, ARGS.d), jnp.float32) / np.sqrt(ARGS.d)

    def batch(step):
        x = jax.random.normal(jax.random.fold_in(kx, step), (ARGS.tokens, ARGS.d), jnp.float32)
        return jax.device_put(x.astype(jnp.bfloat16), tok), jax.device_put(jnp.tanh(x @ teacher).astype(jnp.bfloat16), tok)

    variants = [("flax", MLP(ARGS.d, ARGS.f))]
    variants += [(f"jax_tmem/{r}", MLP(ARGS.d, ARGS.f, jtl.Dense, (("recipe", r.split("+")[0]),), r.endswith("+fused")))
                 for r in ARGS.recipes.split(",") if r]
    opt = optax.sgd(ARGS.lr)
    steps, states = {}, {}
    x0, _ = batch(0)
    for name, model in variants:
        abstract = jax.eval_shape(model.init, jax.random.key(1), x0)
        shardings = nn.get_sharding(abstract, mesh)  # from the with_partitioning annotations
        params = jax.jit(model.init, out_shardings=shardings)(jax.random.key(1), x0)  # the same init for all

        def loss_fn(p, x, y, model=model):
            out = model.apply(p, x).astype(jnp.float32)
            return jnp.mean((out - y.astype(jnp.float32)) ** 2)

        def step(p, s, x, y, loss_fn=loss_fn):
            loss, g = jax.value_and_grad(loss_fn)(p, x, y)
            upd, s = opt.update(g, s)
            return optax.apply_updates(p, upd), s, loss
        state = jax.jit(opt.init, out_shardings=None)(params)
        steps[name] = jax.jit(step, donate_argnums=(0, 1))
        states[name] = (params, state)
        hlo = steps[name].lower(params, state, *batch(0)).compile().as_text()
        coll = collectives(hlo)
        print(f"{name:16s} collectives per step: " + (", ".join(f"{v} {k}" for k, v in coll.items() if v) or "none"))
    curves = {n: [] for n in steps}
    for i in range(ARGS.steps):
        x, y = batch(i)
        for n in steps:
            p, s = states[n]
            p, s, loss = steps[n](p, s, x, y)
            states[n] = (p, s)
            curves[n].append(float(loss))
        if i % max(1, ARGS.steps // 10) == 0 or i == ARGS.steps - 1:
            print(f"step {i:4d}  " + "  ".join(f"{n} {curves[n][-1]:.5f}" for n in steps))
    if ARGS.steps:
        ref = curves["flax"][-1]
        print("final loss / flax's: " + ", ".join(f"{n} {curves[n][-1] / ref:.4f}" for n in steps))
    if ARGS.rounds:
        x, y = batch(10_000)
        times = {n: [] for n in steps}
        spans, smi = [], _smi_start() if ARGS.power else None  # (variant, wall start, wall end) of each timed batch
        for r in range(ARGS.rounds):
            order = list(steps)[r % len(steps):] + list(steps)[:r % len(steps)]
            for n in order:
                p, s = states[n]
                p, s, loss = steps[n](p, s, x, y)
                jax.block_until_ready(loss)
                t, wall = time.perf_counter(), time.time()
                for _ in range(ARGS.iters):
                    p, s, loss = steps[n](p, s, x, y)
                jax.block_until_ready(loss)
                times[n].append((time.perf_counter() - t) / ARGS.iters)
                spans.append((n, wall, time.time()))
                states[n] = (p, s)
        flops = 2 * 3 * 2 * 2 * ARGS.tokens * ARGS.d * ARGS.f / len(devs)  # 2 blocks x 2 GEMMs, fwd + bwd
        base = float(np.median(times["flax"]))
        for n, ts in times.items():
            t = float(np.median(ts))
            print(f"{n:16s} step {t * 1e3:8.2f} ms  {flops / t / 1e12:7.1f} TFLOP/s per device  flax/this {base / t:.3f}")
        if smi is not None:
            _smi_report(smi, spans)
    if ARGS.profile:
        profile(steps, states, *batch(20_000))
    return 0


def _smi_start():
    import subprocess
    return subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,index,power.draw,clocks.sm", "--format=csv,noheader,nounits",
                             "-lms", "50"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def _smi_report(smi, spans):
    """Median power (W) and SM clock (MHz) per variant and GPU over the samples taken inside its timed batches."""
    import collections
    import datetime
    smi.terminate()
    per = collections.defaultdict(list)
    for line in smi.communicate()[0].splitlines():
        f = [v.strip() for v in line.split(",")]
        try:
            ts = datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            gpu, watts, mhz = int(f[1]), float(f[2]), float(f[3])
        except (ValueError, IndexError):
            continue  # a header or a field nvidia-smi could not read ("[N/A]")
        for n, t0, t1 in spans:
            if t0 <= ts <= t1:
                per[(n, gpu)].append((watts, mhz))
    for (n, gpu), rows in sorted(per.items()):
        print(f"{n:16s} GPU {gpu}: {np.median([w for w, _ in rows]):6.1f} W, {np.median([c for _, c in rows]):6.0f} MHz "
              f"(median of {len(rows)} samples)")


def _kind(name: str) -> str:
    low = name.lower()
    for kind, keys in (("jax_tmem", ("jax_tmem",)), ("nccl", ("nccl",)),
                       ("cublas", ("nvjet", "cublas", "xmma", "cutlass", "gemm"))):
        if any(k in low for k in keys):
            return kind
    return "xla other"


def profile(steps, states, x, y):
    """Each device's GPU kernel time per step (sum of kernel durations, and the span first start - last end) by
    kind and the top kernels, and each GEMM's time next to how long a collective kernel ran beside it (a GEMM
    sharing the SMs with NCCL's all-reduce runs longer), from a jax.profiler trace of ARGS.profile steps per
    variant."""
    import collections
    import glob
    import tempfile
    from jax.profiler import ProfileData
    for n in steps:
        p, s = states[n]
        t = time.perf_counter()
        while True:  # at least two steps, then until the GPUs have run ARGS.profile_warm seconds
            for _ in range(2):
                p, s, loss = steps[n](p, s, x, y)
            jax.block_until_ready(loss)
            if time.perf_counter() - t >= ARGS.profile_warm:
                break
        d = tempfile.mkdtemp()
        with jax.profiler.trace(d):
            for _ in range(ARGS.profile):
                p, s, loss = steps[n](p, s, x, y)
            jax.block_until_ready(loss)
        states[n] = (p, s)
        prof = ProfileData.from_file(glob.glob(d + "/**/*.xplane.pb", recursive=True)[0])
        for plane in prof.planes:
            if not plane.name.startswith("/device:GPU"):
                continue
            per = collections.Counter()
            t0 = t1 = None
            spans = []  # (start, end, kind) of every kernel: which GEMMs ran while a collective ran
            for line in plane.lines:
                if "stream" not in line.name.lower() or "memcpy" in line.name.lower():
                    continue
                for e in line.events:
                    per[e.name] += e.duration_ns
                    spans.append((e.start_ns, e.start_ns + e.duration_ns, _kind(e.name)))
                    t0 = e.start_ns if t0 is None else min(t0, e.start_ns)
                    t1 = e.start_ns + e.duration_ns if t1 is None else max(t1, e.start_ns + e.duration_ns)
            k = ARGS.profile * 1e3
            kinds = collections.Counter()
            for name, ns in per.items():
                kinds[_kind(name)] += ns
            span = (t1 - t0) / k if t0 is not None else float("nan")
            print(f"{n} {plane.name}: kernels {sum(per.values()) / k:.0f} us per step, span {span:.0f} us; "
                  + ", ".join(f"{kk} {v / k:.0f}" for kk, v in kinds.most_common()))
            for name, ns in per.most_common(8):
                print(f"    {ns / k:8.0f} us  {_kind(name):9s} {name[:110]}")
            coll = [(a, b) for a, b, kk in spans if kk == "nccl"]
            gemms = sorted((a, b) for a, b, kk in spans if kk in ("jax_tmem", "cublas"))
            hit = [(b - a, sum(max(0, min(b, d) - max(a, c)) for c, d in coll)) for a, b in gemms]
            both = [(t, o) for t, o in hit if o > 0]
            print(f"    GEMMs: {len(gemms) / ARGS.profile:.0f} per step, {sum(t for t, _ in hit) / k:.0f} us; "
                  f"{len(both) / ARGS.profile:.0f} ran beside a collective: {sum(t for t, _ in both) / k:.0f} us, "
                  f"of it {sum(o for _, o in both) / k:.0f} us overlapped; per GEMM of the last step (us, us beside "
                  "a collective): " + " ".join(f"{t / 1e3:.0f}/{o / 1e3:.0f}" for t, o in hit[-len(hit) // ARGS.profile:]))


if __name__ == "__main__":
    sys.exit(main())
