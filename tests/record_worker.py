"""Worker of tests/test_record.py (a fresh process: JAX_TMEM_FFI_RECORD is read when the targets register).

One jitted program of jax_tmem calls that between them launch every form the handlers have (each forced menu
entry of the GPU's arch on a small problem with bias, gelu, alpha and c; the heuristic's decode and split-K
picks; the fused quantize with swizzled scales; an fp8 (K, N) GEMM whose weight is transposed by the 1-byte
transpose), executed several times with inputs in fresh buffers (the command buffer's addresses move, so a
recorded call is updated). Prints one line: RESULT {json}: per execution a digest of every output, whether
the executions agree and hold no NaN, the entries that could not run standalone, the record-stage counters.
"""

from __future__ import annotations

import hashlib
import itertools
import json

import jax
import jax.numpy as jnp
import numpy as np

import jax_tmem
from jax_tmem import isa
from jax_tmem._core import arch as _arch, ext as _ext
from jax_tmem.ops import gemm as gemm_op

BF16, F32, E4M3 = jnp.bfloat16, jnp.float32, jnp.float8_e4m3fn
DN = (((1,), (0,)), ((), ()))


def _forced(cfg):
    epi = gemm_op.Epilogue(activation="gelu", alpha=0.5, has_bias=True, has_c=True)
    return lambda x, w, b, c: gemm_op.gemm(x, w, b, c, DN, np.dtype(BF16), epi, "kernel", True, cfg)


def main():
    cc, why = _arch.device_cc()
    arch, why = _arch.arch_target(cc) if cc > 0 else ("", why)
    assert arch, why
    count = itertools.count()  # a fresh key per operand, however many entries the build has
    r = lambda shape, dt=BF16: jax.random.normal(jax.random.fold_in(jax.random.key(7), next(count)), shape,
                                                 F32).astype(dt)
    calls, skipped = [], []
    for e in isa.kernel_menu(arch):
        if not e["built"]:
            continue
        m = 5 if e["split"] == "decode" else 264
        args = (r((m, 1032)), r((1032, 520)), r((520,), F32), r((m, 520)))
        try:  # an entry that cannot take this problem is left out (the same in both modes)
            jax.block_until_ready(jax.jit(_forced(e["config"]))(*args))
        except Exception as err:  # noqa: BLE001 - recorded, compared between the modes
            skipped.append(f"{e['config']}: {type(err).__name__}: {str(err)[:120]}")
            continue
        calls.append((_forced(e["config"]), args))
    for m in (4, 16, 64, 512):  # the heuristic's picks: mma.sync decode, swap-AB split-K + reduce, dense
        calls.append((lambda x, w: jax_tmem.matmul(x, w, path="kernel"), (r((m, 4096)), r((4096, 2048)))))
    calls.append((lambda x: jax_tmem.quantize(x, "mxfp8", scale_layout="swizzled", path="kernel"), (r((256, 512)),)))
    calls.append((lambda x, w: jax_tmem.dot_general(x, w, DN, preferred_element_type=BF16, path="kernel"),
                  (r((512, 1024), E4M3), r((1024, 768), E4M3))))

    def program(*flat):
        outs, i = [], 0
        for fn, args in calls:
            outs.append(fn(*flat[i:i + len(args)]))
            i += len(args)
        return outs

    f = jax.jit(program)
    flat = [a for _, args in calls for a in args]
    digests, nan = [], False
    for _ in range(6):
        fresh = [jnp.array(a, copy=True) for a in flat]  # new buffers: the addresses move
        outs = jax.tree_util.tree_leaves(f(*fresh))
        h = hashlib.sha256()
        for o in outs:
            a = np.asarray(o.astype(F32) if o.dtype != np.uint8 else o)
            nan |= bool(np.isnan(a).any()) if a.dtype.kind == "f" else False
            h.update(a.tobytes())
        digests.append(h.hexdigest())
    st = _ext.record_status()
    print("RESULT " + json.dumps(dict(
        arch=arch, calls=len(calls), skipped=skipped, digests=digests,
        exact=len(set(digests)) == 1 and not nan, errors=dict(nan=nan, distinct=len(set(digests))),
        record=dict({k: st.get(k, 0) for k in ("created", "updated", "captured", "failed", "update_us",
                                               "update_xla_us")},
                    registered=sorted(st.get("registered", ())), register_error=st.get("register_error", "")),
        last_reason=st.get("last_reason", ""))), flush=True)


if __name__ == "__main__":
    main()
