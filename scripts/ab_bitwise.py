"""Dev tool (a GPU): fingerprints of the dense sm_90a / sm_100a entries' outputs, for A/B runs of kernel options
(scripts/ab_options.sh, AB_BITWISE=1). Every built dense entry, forced, on fixed random operands of every layout
and operand type it takes, shapes with tails and many k-blocks and tiles per CTA, f32 out; prints one JSON object
{case: sha256 of the output}. Options that change how a kernel is scheduled but not what it sums (the ring-slot
release) must leave every fingerprint unchanged, so that two builds' files compare equal; a race shows as a changed
fingerprint in some run (run it more than once). `--entries split` walks the split-K / swap-AB entries instead
(decode shapes, the plan's K splits), `all` both.
    python3 -P scripts/ab_bitwise.py [--out FILE] [--repeat 2] [--entries dense|split|all]
Also checks against float64 that every output is right (a build whose outputs are all wrong alike would
otherwise compare equal to itself)."""
import argparse
import hashlib
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np

import jax_tmem  # noqa: F401  (registers the targets)
from jax_tmem import isa
from jax_tmem._core import arch as _arch
from jax_tmem.ops import gemm as gemm_op

CASES = [(jnp.bfloat16, jnp.bfloat16, "K", "K"), (jnp.bfloat16, jnp.bfloat16, "K", "MN"),
         (jnp.bfloat16, jnp.bfloat16, "MN", "MN"), (jnp.float8_e4m3fn, jnp.float8_e4m3fn, "K", "K"),
         (jnp.float32, jnp.float32, "K", "K")]
SHAPES = [(1000, 776, 1008), (2056, 1040, 304), (2048, 4096, 2048)]
# max |err| / max |ref| by operand bytes: 16-bit (exact products, f32 sums), tf32, fp8 (Hopper's fp8 wgmma sums in
# reduced precision inside a chain; tests/test_gpu_gemm.py _tol)
TOL = {2: 5e-5, 4: 4e-3, 1: 1e-2}


def split_shapes(e):
    """Decode-sized shapes for a split-K / swap-AB entry: M within and past its token width (block_n of a swap-AB
    entry), N and K tails, K long enough for the plan's K splits."""
    w = e["block_n"] if e["swap_ab"] else 128
    return [(max(1, w - 3), 4104, 4096), (2 * w + 5, 1032, 2048)]


def operands(seed, ta, tb, m, n, k, am, bm):
    ka, kb = jax.random.split(jax.random.key(seed))
    a = jax.random.normal(ka, (m, k) if am == "K" else (k, m), jnp.float32).astype(ta)
    b = jax.random.normal(kb, (n, k) if bm == "K" else (k, n), jnp.float32).astype(tb)
    dn = (((1,) if am == "K" else (0,), (1,) if bm == "K" else (0,)), ((), ()))
    return a, b, dn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each case; all must be bitwise equal")
    ap.add_argument("--entries", default="dense", choices=("dense", "split", "all"),
                    help="which menu entries: the dense ones, the split-K / swap-AB ones (decode shapes, the plan's "
                         "K splits), or both")
    ap.add_argument("--arch", default="", help="the menu to walk (default: this GPU's); on a CPU the C++ reference "
                                                "handler runs each case (a dry run of this script)")
    args = ap.parse_args()
    cc, why = _arch.device_cc()
    arch, why = (args.arch, "") if args.arch else _arch.arch_target(cc) if cc > 0 else ("", why)
    if not arch:
        sys.exit(f"no jax_tmem GPU kernels on this device: {why}")
    prints, bad = {}, []
    for e in isa.kernel_menu(arch):
        split = bool(e["split_k"])  # the split-K and swap-AB entries (the decode entries, "decode", are not sm90_gemm's)
        if not e["built"] or e["split"] == "decode" or \
                {"dense": split, "split": not split, "all": False}[args.entries]:
            continue
        for ta, tb, am, bm in CASES:
            if (jnp.dtype(ta).itemsize != 2 and (am, bm) != ("K", "K")) or (e["swap_ab"] and am != "K"):
                continue
            for m, n, k in (split_shapes(e) if split else SHAPES):
                if am == "MN":  # an MN-major A's row pitch (M elements) must be a multiple of 16 bytes (TMA)
                    m = -(-m * jnp.dtype(ta).itemsize // 16) * 16 // jnp.dtype(ta).itemsize
                a, b, dn = operands(hash((e["config"], m, n, k)) % 2**31, ta, tb, m, n, k, am, bm)
                f = jax.jit(lambda x, y: gemm_op.gemm(x, y, None, None, dn, np.dtype(np.float32), gemm_op.Epilogue(),
                                                      "kernel", True, e["config"]))
                outs = [np.asarray(jax.block_until_ready(f(a, b))) for _ in range(args.repeat)]
                name = f"config{e['config']} {jnp.dtype(ta).name} A{am} B{bm} {m}x{n}x{k}"
                digests = {hashlib.sha256(o.tobytes()).hexdigest() for o in outs}
                a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
                ref = (a64 if am == "K" else a64.T) @ (b64.T if bm == "K" else b64)
                err = np.abs(outs[0] - ref).max() / np.abs(ref).max()
                if len(digests) > 1 or not err < TOL[jnp.dtype(ta).itemsize]:
                    bad.append(f"{name}: {len(digests)} distinct outputs, rel err {err:.2e}")
                prints[name] = sorted(digests)[0]
    text = json.dumps(prints, indent=0, sort_keys=True)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    print(f"{len(prints)} cases, {len(bad)} bad" + "".join("\n  " + b for b in bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
