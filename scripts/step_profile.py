"""Where a training step's GPU time goes: every kernel of a few steps of examples/train.py, per contender.

Traces ``--steps`` training steps of each contender (plain Flax and the jax_tmem recipes) with
``jax.profiler`` and sums the GPU kernels' durations per step, by kind (our kernels, "cublas": cuBLAS
and XLA's own GEMM fusions, cuDNN, XLA's other fusions by their HLO name) and by kernel; also the step's span on the GPU (first kernel start to
last kernel end), so busy time against wall time shows the gaps. XLA's command buffers are turned off
(``--xla_gpu_enable_command_buffer=``) so that every kernel is its own trace event; set
``--keep-command-buffers`` to trace what users run (graph kernels may then be missing).

  python -P scripts/step_profile.py --model mlp --d 4096 --hidden 16384 --tokens 8192 --recipes bf16,fp8
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import re
import sys
import tempfile


def kind_of(name: str) -> str:
    low = name.lower()
    if "jax_tmem" in low:
        return "jax_tmem"
    if any(s in low for s in ("nvjet", "cublas", "xmma", "cutlass", "gemm")):
        return "cublas"
    if any(s in low for s in ("cudnn", "fmha", "flash", "sdpa")):
        return "cudnn"
    if "transpose" in low:
        return "xla transpose"
    if "reduce" in low or "reduction" in low:
        return "xla reduce"
    return "xla other"


def short(name: str, width: int = 110) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--recipes", default="bf16,fp8")
    ap.add_argument("--d", type=int, default=4096)
    ap.add_argument("--hidden", type=int, default=16384)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--attention", default="auto", help="transformer: auto, cudnn or xla (examples/train.py)")
    ap.add_argument("--blocks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--keep-command-buffers", action="store_true")
    ap.add_argument("--dump", default="", help="also dump the optimized HLO of the steps here and print the "
                    "fused computation of each of the top XLA fusions")
    args = ap.parse_args()
    flags = os.environ.get("XLA_FLAGS", "")
    if not args.keep_command_buffers:
        flags += " --xla_gpu_enable_command_buffer="
    if args.dump:
        flags += f" --xla_dump_to={args.dump} --xla_dump_hlo_as_text --xla_dump_hlo_module_re=.*train_step.*"
    os.environ["XLA_FLAGS"] = flags.strip()
    import jax
    from jax.profiler import ProfileData
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
    import train

    targs = argparse.Namespace(d=args.d, hidden=args.hidden, heads=args.heads, seq=args.seq, tokens=args.tokens,
                               blocks=args.blocks, dtype="bfloat16", lr=1e-3, model=args.model,
                               attention=args.attention)
    contenders = ["flax"] + [r for r in args.recipes.split(",") if r]
    print(f"{args.model}: d={args.d} hidden={args.hidden} tokens={args.tokens} on {jax.devices()[0].device_kind}, "
          f"jax {jax.__version__}, command buffers {'on' if args.keep_command_buffers else 'off'}")
    for c in contenders:
        step, _ = train.TASKS[args.model](targs, None if c == "flax" else c, jax.random.key(0))
        for i in range(3):
            jax.block_until_ready(step(i))
        d = tempfile.mkdtemp()
        with jax.profiler.trace(d):
            for i in range(args.steps):
                out = step(i)
            jax.block_until_ready(out)
        prof = ProfileData.from_file(glob.glob(d + "/**/*.xplane.pb", recursive=True)[0])
        per_name = collections.Counter()
        count = collections.Counter()
        t0, t1 = None, None
        for plane in prof.planes:
            if not plane.name.startswith("/device:GPU"):
                continue
            if c == contenders[0]:
                print(f"   (trace lines of {plane.name}: {[line.name for line in plane.lines]})")
            for line in plane.lines:
                if "stream" not in line.name.lower() or "memcpy" in line.name.lower():
                    continue
                for e in line.events:
                    per_name[e.name] += e.duration_ns
                    count[e.name] += 1
                    t0 = e.start_ns if t0 is None else min(t0, e.start_ns)
                    t1 = e.start_ns + e.duration_ns if t1 is None else max(t1, e.start_ns + e.duration_ns)
        n = args.steps
        busy = sum(per_name.values()) / n / 1e6
        span = (t1 - t0) / n / 1e6 if t0 is not None else float("nan")
        by_kind = collections.Counter()
        for name, ns in per_name.items():
            by_kind[kind_of(name)] += ns
        print(f"\n== {c}: {busy:.3f} ms of kernels per step, GPU span {span:.3f} ms per step "
              f"({len(per_name)} distinct kernels, {sum(count.values()) // max(n, 1)} launches per step)")
        for k, ns in by_kind.most_common():
            print(f"   {k:>14}: {ns / n / 1e6:8.3f} ms ({ns / n / 1e6 / busy * 100:5.1f} %)")
        for name, ns in per_name.most_common(args.top):
            print(f"   {ns / n / 1e3:9.1f} us x{count[name] // max(n, 1):<3} {kind_of(name):>13}  {short(name)}")
        if args.dump:
            show_fusions(args.dump, [nm for nm, _ in per_name.most_common(args.top) if kind_of(nm).startswith("xla")])


def show_fusions(dump, names):
    """The root instruction and the parameter shapes of each named fusion in the newest optimized module."""
    files = sorted(glob.glob(os.path.join(dump, "*after_optimizations.txt")), key=os.path.getmtime)
    if not files:
        return
    text = open(files[-1]).read()
    for name in names:
        m = re.search(r"\n\s*(?:ROOT )?%?" + re.escape(name) + r" = ([^\n]*)", text)
        if m:
            print(f"      {name}: {short(m.group(1), 300)}")


if __name__ == "__main__":
    main()
