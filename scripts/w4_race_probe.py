"""Dev tool: the TMA-fed weight-only 4-bit kernels (kernels/w4_tma.cuh, w4_wide.cuh) run 30 times per case on shapes
whose shared-memory ring wraps many times (K = 16384), each output against float64; prints the number of
runs with an error above f32 accumulation and where (token, row). A moving error is a race: this found
the missing fence.proxy.async before the consumers release a stage (2026-11-24, docs/PERF.md).
  python3 -P scripts/w4_race_probe.py   (from the repository root, on a GPU)"""
import os
import sys

import jax
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from jax_tmem.ops import block_scale, scaled_gemm  # noqa: E402
from test_weight_only import _operands, _ref64  # noqa: E402
for fmt, gs in [("nvfp4", 2.5), ("mxfp4", None), ("nvfp4", None)]:
    for (b, m, n, k) in [(1, 3, 72, 16384), (1, 1, 64, 16384), (1, 64, 136, 16384), (1, 29, 264, 16384)]:
        x, wq, ws = _operands(7, b, m, n, k, fmt, gs)
        ref, mag = _ref64(x, wq, ws, gs)
        # 11-18: the many-token kernels (14-16, 18: wgmma, sm_90 only)
        wgmma = [14, 15, 16, 18] if jax.devices()[0].compute_capability == "9.0" else []
        for config in ([5, 6, 9] if m <= 16 else [11, 12, 13, 17] + wgmma):
            f = jax.jit(lambda x, wq, ws: scaled_gemm.scaled_matmul_ffi(x, wq, None, ws, np.dtype(np.float32), block_scale.get_format(fmt).block, config=config, global_scale=gs))
            nbad = 0; pat = set()
            for it in range(30):
                got = np.asarray(f(x, wq, ws), np.float64)
                rel = np.abs(got - ref) / np.maximum(mag, 1e-30)
                if rel.max() > 2e-5:
                    nbad += 1
                    idx = np.argwhere(rel > 2e-5)
                    pat.update((int(i[1]), int(i[2])) for i in idx[:6])
            print(fmt, gs, (m, n, k), "config", config, "bad runs", nbad, "/30", sorted(pat)[:12], flush=True)
