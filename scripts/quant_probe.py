"""Dev tool: the fused quantize kernel, each form once per process run, for Nsight Compute, e.g.
  XLA_PYTHON_CLIENT_PREALLOCATE=false ncu --clock-control none -k regex:mx_quantize --launch-skip 1 \\
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \\
      --section SchedulerStats --section LaunchStats python3 -P scripts/quant_probe.py nvfp4:-1 mxfp8:0
Each argument FMT:AXIS runs quantize(x, FMT, axis=AXIS, path="kernel") twice on a --shape bf16 x
(default 8192,8192); nvfp4 with a traced global scale."""
import argparse

import jax
import jax.numpy as jnp

import jax_tmem

ap = argparse.ArgumentParser()
ap.add_argument("forms", nargs="+", help="FMT:AXIS, e.g. nvfp4:-1 mxfp8:0")
ap.add_argument("--shape", default="8192,8192")
args = ap.parse_args()
shape = tuple(int(s) for s in args.shape.split(","))
x = jax.random.normal(jax.random.key(0), shape, jnp.float32).astype(jnp.bfloat16)
for form in args.forms:
    fmt, axis = form.split(":")
    gs = jnp.float32(0.37) if fmt == "nvfp4" else None
    f = jax.jit(lambda v, g, fmt=fmt, axis=int(axis): jax_tmem.quantize(v, fmt, axis=axis, global_scale=g, path="kernel"))
    for _ in range(2):
        jax.block_until_ready(f(x, gs))
    print("ran", form, flush=True)
