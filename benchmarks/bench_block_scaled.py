"""Benchmark the block-scaled (MXFP8) GEMM against the peers in one run, with bench_gemm.py's method
(R distinct operand sets per jitted program, batches of back-to-back dispatches, contenders interleaved
per round, paired ratios).

Two races per square shape (x (M, K) and w (N, K), both K-last as jax.nn.scaled_matmul takes them):
  quantization included, bf16 in and bf16 out (what a user of scaled_dot_general pays):
    jax_tmem.scaled_dot_general(mxfp8)   vs  jax.nn.scaled_dot_general(mxfp8)  and  bf16 lax.dot_general
  quantization excluded, pre-quantized operands, bf16 out:
    jax_tmem.scaled_matmul (its "auto" choice, and path="kernel": the sm_90a block-scaled kernel)
                                         vs  jax.nn.scaled_matmul  and  our plain e4m3 GEMM (no scales)
  (--configs 0,1,..: the sm_90a kernel's configurations side by side, cpp/src/sm90_block_scaled.cu)

Usage: python -P benchmarks/bench_block_scaled.py [--out DIR] [--sizes 4096,8192]
Writes DIR/bench_block_scaled.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_gemm import ROUNDS, copy_bandwidth, interleaved  # noqa: E402

import jax_tmem  # noqa: E402

DN = (((1,), (1,)), ((), ()))  # x (M, K) . w (N, K) over K


def _race(contenders, args, flops, r):
    times = interleaved(contenders, args)
    res = {}
    for key, ts in times.items():
        res[f"{key}_us"] = statistics.median(ts) / r * 1e6
        res[f"{key}_tflops"] = flops / (statistics.median(ts) / r) / 1e12
    first = next(iter(contenders))
    for key in contenders:
        if key != first:
            paired = [times[key][i] / times[first][i] for i in range(ROUNDS)]
            res[f"ratio_vs_{key}"] = [statistics.median(paired), min(paired), max(paired)]
    return res


def bench(size, r, configs=(), parts=("gemm", "quantize")):
    m = n = k = size
    flops = 2.0 * m * n * k
    key = jax.random.key(size)
    xs = [jax.random.normal(jax.random.fold_in(key, 2 * i), (m, k), jnp.float32).astype(jnp.bfloat16) for i in range(r)]
    ws = [jax.random.normal(jax.random.fold_in(key, 2 * i + 1), (n, k), jnp.float32).astype(jnp.bfloat16)
          for i in range(r)]
    cfg = jax.nn.get_scaled_dot_general_config("mxfp8")

    res = dict(m=m, n=n, k=k, reps=r, flops=flops)
    if "quantize" in parts:
        _bench_quantize(res, xs, ws, flops, r)
    if "gemm" in parts:
        _bench_gemm(res, xs, ws, cfg, flops, r, configs)
    return res


def _many(f):
    return jax.jit(lambda aa, bb: [f(a, b) for a, b in zip(aa, bb)])


def _bench_quantize(res, xs, ws, flops, r):
    many = _many
    m, k = xs[0].shape
    # The quantization alone (both operands, mxfp8): XLA's quantizer vs the fused kernel, rowwise (along the
    # last axis), colwise (along the first axis of the 2-D operands: the backward pass's layout) and
    # rowwise with the scales written in the 128x4 tiles, in TB/s of bytes read + written (bf16 in, e4m3
    # + UE8M0 out) against the copy bandwidth.
    qbytes = 2 * (m * k * 2 + m * k + m * k // 32)
    qres = _race({
        "fused_kernel": many(lambda a, b: (jax_tmem.quantize(a, "mxfp8", path="kernel"),
                                           jax_tmem.quantize(b, "mxfp8", path="kernel"))),
        "xla": many(lambda a, b: (jax_tmem.quantize(a, "mxfp8", path="xla"), jax_tmem.quantize(b, "mxfp8", path="xla"))),
        "fused_colwise": many(lambda a, b: (jax_tmem.quantize(a, "mxfp8", axis=0, path="kernel"),
                                            jax_tmem.quantize(b, "mxfp8", axis=0, path="kernel"))),
        "xla_colwise": many(lambda a, b: (jax_tmem.quantize(a, "mxfp8", axis=0, path="xla"),
                                          jax_tmem.quantize(b, "mxfp8", axis=0, path="xla"))),
        "fused_swizzled": many(lambda a, b: (jax_tmem.quantize(a, "mxfp8", path="kernel", scale_layout="swizzled"),
                                             jax_tmem.quantize(b, "mxfp8", path="kernel", scale_layout="swizzled"))),
    }, (xs, ws), flops, r)
    for key in ("fused_kernel", "xla", "fused_colwise", "xla_colwise", "fused_swizzled"):
        qres[f"{key}_tbps"] = qbytes / (qres[f"{key}_us"] * 1e-6) / 1e12
    res["quantize"] = qres
    # The same for NVFP4 (packed e2m1 + UE4M3 per 16, a traced global scale) and MXFP4, rowwise: bf16 in,
    # half a byte out per element.
    g = jnp.float32(0.0173)
    many_g = lambda f: jax.jit(lambda aa, bb, gg: [f(a, b, gg) for a, b in zip(aa, bb)])
    q4bytes = {"nvfp4": 2 * (m * k * 2 + m * k // 2 + m * k // 16), "mxfp4": 2 * (m * k * 2 + m * k // 2 + m * k // 32)}
    # (colwise: along the first axis, the backward pass's layout; "kernel_colwise")
    forms = [(fmt, path, axis) for fmt in ("nvfp4", "mxfp4") for path, axis in (("kernel", -1), ("xla", -1), ("kernel", 0))]
    name = lambda fmt, path, axis: f"{fmt}_{path}" + ("_colwise" if axis == 0 else "")
    # (and XLA's x * 3 of the same operands in the same program shape: the copy bandwidth at this size, which
    # carries the same per-execution cost of a 2r-kernel program as the quantizes; the 4 x 1 GiB copy does not)
    contenders = {name(fmt, path, axis): many_g(lambda a, b, gg, fmt=fmt, path=path, axis=axis: (
        jax_tmem.quantize(a, fmt, axis=axis, path=path, global_scale=gg if fmt == "nvfp4" else None),
        jax_tmem.quantize(b, fmt, axis=axis, path=path, global_scale=gg if fmt == "nvfp4" else None)))
        for fmt, path, axis in forms}
    contenders["copy_same_size"] = many_g(lambda a, b, gg: (a * 3, b * 3))
    q4 = _race(contenders, (xs, ws, g), flops, r)
    for fmt, path, axis in forms:
        key = name(fmt, path, axis)
        q4[f"{key}_tbps"] = q4bytes[fmt] / (q4[f"{key}_us"] * 1e-6) / 1e12
    q4["copy_same_size_tbps"] = 2 * (4 * m * k) / (q4["copy_same_size_us"] * 1e-6) / 1e12
    res["quantize_fp4"] = q4


def _bench_gemm(res, xs, ws, cfg, flops, r, configs):
    many = _many
    jax_tmem.clear_decisions()
    res["with_quantization"] = _race({
        "jax_tmem": many(lambda a, b: jax_tmem.scaled_dot_general(a, b, DN, preferred_element_type=jnp.bfloat16,
                                                                  configs=[cfg, cfg, cfg])),
        "jax_nn_scaled_dot_general": many(lambda a, b: jax.nn.scaled_dot_general(
            a, b, DN, preferred_element_type=jnp.bfloat16, configs=[cfg, cfg, cfg])),
        "bf16_dot": many(lambda a, b: jax.lax.dot_general(a, b, DN, preferred_element_type=jnp.bfloat16)),
    }, (xs, ws), flops, r)
    res["decisions"] = sorted({str(d) for d in jax_tmem.decisions()})

    q = [jax_tmem.quantize(x[None], "mxfp8") for x in xs]
    qw = [jax_tmem.quantize(w[None], "mxfp8") for w in ws]
    e4 = [x.astype(jnp.float8_e4m3fn) for x in xs], [w.astype(jnp.float8_e4m3fn) for w in ws]
    pre = ([a for a, _ in q], [s for _, s in q]), ([b for b, _ in qw], [s for _, s in qw])

    def many4(f):
        return jax.jit(lambda A, S, B, T: [f(a, b, s, t) for a, s, b, t in zip(A, S, B, T)])

    args4 = (pre[0][0], pre[0][1], pre[1][0], pre[1][1])
    fp8_ours = jax.jit(lambda aa, bb: [jax_tmem.dot_general(a, b, DN, preferred_element_type=jnp.bfloat16,
                                                            path="kernel") for a, b in zip(aa, bb)])
    contenders = {
        "jax_tmem": many4(lambda a, b, s, t: jax_tmem.scaled_matmul(a, b, s, t, jnp.bfloat16)),
        "jax_tmem_kernel": many4(lambda a, b, s, t: jax_tmem.scaled_matmul(a, b, s, t, jnp.bfloat16, path="kernel")),
        "jax_nn_scaled_matmul": many4(lambda a, b, s, t: jax.nn.scaled_matmul(a, b, s, t, jnp.bfloat16)),
        # our plain FP8 kernel on the same data bytes (no scales): the ceiling the promotion costs against
        "jax_tmem_fp8": lambda A, S, B, T: fp8_ours(e4[0], e4[1]),
    }
    if configs:  # the sm_90a kernel's configurations side by side (cpp/src/sm90_block_scaled.cu)
        from jax_tmem.ops import scaled_gemm
        for c in configs:
            contenders[f"config{c}"] = many4(lambda a, b, s, t, c=c: scaled_gemm.scaled_matmul_ffi(
                a, b, s, t, jnp.bfloat16, 32, config=c))
    res["pre_quantized"] = _race(contenders, args4, flops, r)
    # correctness: ours against float64 of the dequantized operands (first pair)
    a64 = np.asarray(jax_tmem.dequantize(pre[0][0][0], pre[0][1][0]), np.float64)[0]
    b64 = np.asarray(jax_tmem.dequantize(pre[1][0][0], pre[1][1][0]), np.float64)[0]
    ref = a64 @ b64.T
    ours = np.asarray(jax.jit(lambda a, b, s, t: jax_tmem.scaled_matmul(a, b, s, t, jnp.float32, path="kernel"))(
        pre[0][0][0], pre[1][0][0], pre[0][1][0], pre[1][1][0]), np.float64)[0]
    peer = np.asarray(jax.jit(lambda a, b, s, t: jax.nn.scaled_matmul(a, b, s, t, jnp.float32))(
        pre[0][0][0], pre[1][0][0], pre[0][1][0], pre[1][1][0]), np.float64)[0]
    mag = np.abs(a64) @ np.abs(b64).T
    res["max_err_vs_float64_rel_to_sum_abs"] = {"jax_tmem_kernel": float((np.abs(ours - ref) / mag).max()),
                                                "jax_nn_scaled_matmul": float((np.abs(peer - ref) / mag).max())}


def _print_quantize(size, res, copy):
    qq = res["quantize"]
    print(f"{size}^2 x 2 quantize (TB/s, read + written): fused kernel {qq['fused_kernel_tbps']:.2f}, XLA "
          f"{qq['xla_tbps']:.2f}; colwise: fused {qq['fused_colwise_tbps']:.2f}, XLA {qq['xla_colwise_tbps']:.2f}; "
          f"rowwise with swizzled scales: fused {qq['fused_swizzled_tbps']:.2f} (copy {copy:.2f})",
          flush=True)
    q4 = res["quantize_fp4"]
    print(f"{size}^2 x 2 quantize rowwise (TB/s): nvfp4 fused {q4['nvfp4_kernel_tbps']:.2f}, XLA "
          f"{q4['nvfp4_xla_tbps']:.2f}; mxfp4 fused {q4['mxfp4_kernel_tbps']:.2f}, XLA {q4['mxfp4_xla_tbps']:.2f}; "
          f"colwise: nvfp4 fused {q4['nvfp4_kernel_colwise_tbps']:.2f}, mxfp4 fused "
          f"{q4['mxfp4_kernel_colwise_tbps']:.2f} (copy {copy:.2f}; XLA's x * 3 of these operands "
          f"{q4['copy_same_size_tbps']:.2f})", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--configs", default="", help="sm_90a block-scaled kernel configs to time side by side")
    ap.add_argument("--parts", default="gemm,quantize", help="what to time: gemm, quantize or both")
    args = ap.parse_args()
    results = {"device": str(jax.devices()[0].device_kind), "jax": jax.__version__,
               "copy_tbps": copy_bandwidth()}
    print(f"copy bandwidth {results['copy_tbps']:.2f} TB/s", flush=True)
    for size in [int(s) for s in args.sizes.split(",") if s]:
        r = 4 if size >= 8192 else 8
        parts = [p for p in args.parts.split(",") if p]
        res = bench(size, r, [int(c) for c in args.configs.split(",") if c], parts)
        results[str(size)] = res
        if "quantize" in parts:
            _print_quantize(size, res, results["copy_tbps"])
        if "gemm" not in parts:
            continue
        wq, pq = res["with_quantization"], res["pre_quantized"]
        print(f"{size}^3 with quantization (TFLOP/s): jax_tmem {wq['jax_tmem_tflops']:.0f}, "
              f"jax.nn.scaled_dot_general {wq['jax_nn_scaled_dot_general_tflops']:.0f}, bf16 dot "
              f"{wq['bf16_dot_tflops']:.0f}; ours / sdg {wq['ratio_vs_jax_nn_scaled_dot_general'][0]:.2f}, "
              f"ours / bf16 {wq['ratio_vs_bf16_dot'][0]:.2f}", flush=True)
        print(f"{size}^3 pre-quantized (TFLOP/s): jax_tmem auto {pq['jax_tmem_tflops']:.0f}, kernel "
              f"{pq['jax_tmem_kernel_tflops']:.0f}, jax.nn.scaled_matmul "
              f"{pq['jax_nn_scaled_matmul_tflops']:.0f}, our plain fp8 {pq['jax_tmem_fp8_tflops']:.0f}; ours / "
              f"scaled_matmul {pq['ratio_vs_jax_nn_scaled_matmul'][0]:.2f}, ours / fp8 "
              f"{pq['ratio_vs_jax_tmem_fp8'][0]:.2f}; errors {res['max_err_vs_float64_rel_to_sum_abs']}", flush=True)
        for key in pq:
            if key.startswith("config") and key.endswith("_tflops"):
                print(f"   {key[:-7]}: {pq[key]:.0f} TFLOP/s", flush=True)
        for d in res["decisions"]:
            print("  ", d, flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "bench_block_scaled.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
