"""A/B (issue 16): the MXFP8 training recipe with and without scaled_dot's fused quantize-dequantize
(block_scale.quantize_dequantize + bf16 dot, since 2026-11-26 also for the recipes' per_tensor calls),
plain Flax beside them, in one process: each variant is traced under its own setting, then the steps are
timed in interleaved rounds (examples/train.py's tasks and timer).
    python3 -P scripts/recipe_qdq_probe.py [--model mlp --d 4096 --hidden 16384 --tokens 8192 --rounds 7]
"""
import argparse
import statistics
import sys
import os

import jax

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import train  # noqa: E402
from jax_tmem.ops import scaled_dot  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mlp", choices=sorted(train.TASKS))
    ap.add_argument("--d", type=int, default=4096)
    ap.add_argument("--hidden", type=int, default=16384)
    ap.add_argument("--blocks", type=int, default=2)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--attention", default="auto")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=5)
    args = ap.parse_args()
    key = jax.random.key(0)
    real = scaled_dot._qdq_mm
    variants = {"flax": (None, real), "mxfp8": ("mxfp8", real), "mxfp8_two_step": ("mxfp8", lambda *a, **k: None)}
    tasks = {}
    for name, (recipe, qdq) in variants.items():
        scaled_dot._qdq_mm = qdq  # read when the step is traced (its first call)
        step = train.TASKS[args.model](args, recipe, key)[0]
        losses = [float(step(i)) for i in range(3)]
        tasks[name] = step
        print(f"{name:15s} first losses {losses}", flush=True)
    scaled_dot._qdq_mm = real
    times = {n: [] for n in tasks}
    names = list(tasks)
    for r in range(args.rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            times[n].append(train.timed(lambda: tasks[n](r), args.calls))
    flops = 6 * sum(t * a * b for t, a, b in train.gemm_shapes(args))
    for n, ts in times.items():
        med = statistics.median(ts)
        paired = [f / t for f, t in zip(times["flax"], ts)]
        print(f"{n:15s} {med * 1e3:8.3f} ms  {flops / med / 1e12:6.1f} TFLOP/s  x flax {statistics.median(paired):.3f} "
              f"({min(paired):.3f}-{max(paired):.3f})")
    new, old = times["mxfp8"], times["mxfp8_two_step"]
    print(f"mxfp8 fused / two-step time: {statistics.median(a / b for a, b in zip(new, old)):.3f}")


if __name__ == "__main__":
    main()
