"""A small sweep of kernel-path GEMMs for compute-sanitizer (memcheck / racecheck): tails, layouts,
dtypes, epilogues. References are computed on the host (NumPy) so only our kernels run on the GPU.
Run with XLA_PYTHON_CLIENT_PREALLOCATE=false (the sanitizer cannot shadow a 75% preallocation)."""
import jax, jax.numpy as jnp, numpy as np
import jax_tmem

rng = np.random.default_rng(0)
cases = [("bfloat16", ("K", "MN"), (200, 136, 96)), ("bfloat16", ("MN", "K"), (136, 264, 80)),
         ("float16", ("MN", "MN"), (72, 40, 48)), ("float8_e4m3fn", ("K", "K"), (130, 144, 160)),
         ("float32", ("K", "K"), (72, 40, 48))]
for dt, lay, (m, n, k) in cases:
    a = jnp.asarray(rng.standard_normal((m, k) if lay[0] == "K" else (k, m)), dt)
    b = jnp.asarray(rng.standard_normal((n, k) if lay[1] == "K" else (k, n)), dt)
    dn = (((1,) if lay[0] == "K" else (0,), (1,) if lay[1] == "K" else (0,)), ((), ()))
    out = jax.jit(lambda x, y: jax_tmem.dot_general(x, y, dn, preferred_element_type=jnp.float32, path="kernel"))(a, b)
    a64 = np.asarray(a.astype(jnp.float32), np.float64); b64 = np.asarray(b.astype(jnp.float32), np.float64)
    a64 = a64 if lay[0] == "K" else a64.T
    b64 = b64.T if lay[1] == "K" else b64
    ref = a64 @ b64
    err = float(np.abs(np.asarray(out, np.float64) - ref).max() / np.abs(ref).max())
    print(dt, lay, (m, n, k), "rel err", err, flush=True)
    assert err < 5e-3
x = jnp.asarray(rng.standard_normal((136, 64)), "bfloat16")
w = jnp.asarray(rng.standard_normal((64, 200)), "bfloat16")
bias = jnp.asarray(rng.standard_normal((200,)), "float32")
c = jnp.asarray(rng.standard_normal((136, 200)), "bfloat16")
y = jax.jit(lambda x, w, bias, c: jax_tmem.matmul(x, w, bias=bias, activation="gelu", c=c, path="kernel"))(x, w, bias, c)
print("epilogue case finite:", bool(np.isfinite(np.asarray(y, np.float32)).all()))
# Every configuration this build has (the C++ table; the heuristic picks few for these shapes), with
# tails; split-K / swap-AB entries with 3 K splits (f32 partials in the workspace, then the reduce pass).
from jax_tmem import isa
from jax_tmem._core import arch as _arch
from jax_tmem.ops import gemm as gemm_op
dn = (((1,), (0,)), ((), ()))
arch, why = _arch.arch_target(_arch.device_cc()[0])
assert arch, why
menu = [e for e in isa.kernel_menu(arch) if e["built"]]
print(arch, "configs:", [e["config"] for e in menu], flush=True)
# sm_90a's mma.sync decode entries (K-major activations; weights (N, K) or (K, N), 16-bit or fp8): token and
# row tails, a K tail below one stage and a full epilogue, ahead of the menu loop below (which a default build
# stops at config 8). An entry reads a (K, N) weight in k-rows of block_m elements of 32-128 bytes only, an
# (N, K) one with at most 64 rows.
nk = (((1,), (1,)), ((), ()))
for e in menu:
    if e["split"] == "decode":
        for m_, n_, k_, wl, dt in ((13, 264, 520, "NK", "bfloat16"), (5, 1000, 40, "NK", "bfloat16"),
                                   (13, 264, 520, "KN", "bfloat16"), (5, 1000, 40, "KN", "bfloat16"),
                                   (7, 264, 528, "NK", "float8_e4m3fn"), (3, 136, 48, "NK", "float8_e4m3fn"),
                                   (7, 272, 528, "KN", "float8_e4m3fn"), (3, 144, 48, "KN", "float8_e4m3fn"),
                                   (7, 264, 528, "NK", "bfloat16/float8_e4m3fn"), (21, 40, 272, "NK", "float16/float8_e4m3fn"),
                                   (13, 272, 528, "KN", "bfloat16/float8_e4m3fn"), (3, 144, 48, "KN", "bfloat16/float8_e4m3fn")):
            adt, _, wdt = dt.partition("/")  # 16-bit activations x an fp8 weight (the kernel's kMix)
            wdt = wdt or adt
            if (not 32 <= e["block_m"] * jnp.dtype(wdt).itemsize <= 128) if wl == "KN" else e["block_m"] > 64:
                continue
            if wl == "NK" and wdt != adt and e["schedule"] == "wgmma":
                continue  # (the mix's wgmma form reads (K, N) weights only)
            a = jnp.asarray(rng.standard_normal((m_, k_)), adt)
            b = jnp.asarray(rng.standard_normal((n_, k_)), wdt)
            bias = jnp.asarray(rng.standard_normal((n_,)), "float32")
            epi = gemm_op.Epilogue(activation="relu", has_bias=True)
            out = jax.jit(lambda x, y, z: gemm_op.gemm(x, y, z, None, nk if wl == "NK" else dn, jnp.dtype("bfloat16"),
                                                       epi, "kernel", True, e["config"]))(a, b if wl == "NK" else b.T,
                                                                                          bias)
            a64, b64 = (np.asarray(t.astype(jnp.float32), np.float64) for t in (a, b))
            ref = np.maximum(a64 @ b64.T + np.asarray(bias, np.float64), 0)
            err = float(np.abs(np.asarray(out, np.float64) - ref).max() / np.abs(ref).max())
            print("decode config", e["config"], (m_, n_, k_), wl, dt, "rel err", err, flush=True)
            assert err < 1e-2
for cfg in [(e["config"], 3) if e["split_k"] else e["config"] for e in menu if e["split"] != "decode"]:
    a = jnp.asarray(rng.standard_normal((200, 520)), "bfloat16")
    b = jnp.asarray(rng.standard_normal((520, 264)), "bfloat16")
    bias = jnp.asarray(rng.standard_normal((264,)), "float32")
    epi = gemm_op.Epilogue(activation="relu", has_bias=True)
    out = jax.jit(lambda x, y, z: gemm_op.gemm(x, y, z, None, dn, jnp.dtype("bfloat16"), epi, "kernel", True, cfg))(a, b, bias)
    ref = np.maximum(np.asarray(a, np.float64) @ np.asarray(b, np.float64) + np.asarray(bias, np.float64), 0)
    err = float(np.abs(np.asarray(out, np.float64) - ref).max() / np.abs(ref).max())
    print("config", cfg, "rel err", err, flush=True)
    assert err < 1e-2
# K splits summed inside the kernel (sm_90a, config (entry, -splits)): each tile's splits one thread-block cluster,
# the partial sums read through distributed shared memory (split_fixup), with N / M / K tails, a fused epilogue,
# and the heuristic's own plan for a 64 x 4096 x 4096 decode GEMM (2 splits on the 64-row entry).
if arch == "sm_90a":
    for e in menu:
        if not e["split_k"] or e["block_n"] > 128 or e["cluster_m"] > 1:
            continue  # (entries in B-multicast clusters of their own sum no splits in the kernel)
        swap, pair = e["split"] == "swap-ab", e.get("cluster_n", 1) > 1  # pair: two token tiles share the weight
        m_, n_, k_ = (e["block_n"] + 40 if pair else min(e["block_n"], 40) if swap else 136), 264, 1040
        for splits in (2, 3):
            a = jnp.asarray(rng.standard_normal((m_, k_)), "bfloat16")
            b = jnp.asarray(rng.standard_normal((n_, k_)), "bfloat16")
            bias = jnp.asarray(rng.standard_normal((n_,)), "float32")
            epi = gemm_op.Epilogue(activation="relu", has_bias=True)
            out = jax.jit(lambda x, y, z: gemm_op.gemm(x, y, z, None, nk, jnp.dtype("bfloat16"), epi, "kernel", True,
                                                       (e["config"], -splits)))(a, b, bias)
            a64, b64 = (np.asarray(t.astype(jnp.float32), np.float64) for t in (a, b))
            ref = np.maximum(a64 @ b64.T + np.asarray(bias, np.float64), 0)
            err = float(np.abs(np.asarray(out, np.float64) - ref).max() / np.abs(ref).max())
            print("in-kernel splits config", e["config"], -splits, (m_, n_, k_), "rel err", err, flush=True)
            assert err < 1e-2
    a = jnp.asarray(rng.standard_normal((64, 4096)), "bfloat16")
    b = jnp.asarray(rng.standard_normal((4096, 4096)), "bfloat16")
    out = jax.jit(lambda x, y: jax_tmem.dot_general(x, y, nk, preferred_element_type=jnp.float32, path="kernel"))(a, b)
    print("heuristic decode:", jax_tmem.decisions()[-1], flush=True)
    ref = np.asarray(a.astype(jnp.float32), np.float64) @ np.asarray(b.astype(jnp.float32), np.float64).T
    err = float(np.abs(np.asarray(out, np.float64) - ref).max() / np.abs(ref).max())
    print("heuristic decode 64 x 4096 x 4096 rel err", err, flush=True)
    assert err < 5e-3
    # 65-128 tokens (the heuristic's plan for 16-bit weights there): the 128-row entry 13 over two 64-token column
    # tiles, the second one part-filled, 2 splits in a cluster; and more units than the GPU holds at once: 40 tiles
    # of 64 rows x 8 splits = 320 CTAs, clusters in waves; the 192-token candidate (35) with a partial token tile, its
    # 96 accumulators per thread summed in clusters of 3; the 256-token entry (19, 16-bit: 128 per thread); the
    # heuristic's 129-192-token entry 38 over two 96-token tiles, the second part-filled
    for (m_, n_, k_), cfg, odt in (((96, 264, 1040), (13, -2), "bfloat16"), ((16, 2560, 2048), (15, -8), "float32"),
                                   ((150, 392, 2080), (35, -3), "bfloat16"), ((200, 264, 2080), (19, -2), "bfloat16"),
                                   ((150, 392, 2080), (38, -2), "bfloat16")):
        a = jnp.asarray(rng.standard_normal((m_, k_)), "bfloat16")
        b = jnp.asarray(rng.standard_normal((n_, k_)), "bfloat16")
        out = jax.jit(lambda x, y: gemm_op.gemm(x, y, None, None, nk, jnp.dtype(odt), gemm_op.Epilogue(), "kernel",
                                                True, cfg))(a, b)
        ref = np.asarray(a.astype(jnp.float32), np.float64) @ np.asarray(b.astype(jnp.float32), np.float64).T
        err = float(np.abs(np.asarray(out, np.float64) - ref).max() / np.abs(ref).max())
        print("in-kernel splits", cfg, (m_, n_, k_), "rel err", err, flush=True)
        assert err < (1e-2 if odt == "bfloat16" else 5e-3)
# The TMA-store epilogue under the next tile's MMAs (sm_90a 20, 22, 24): more tiles than SMs, so that each
# CTA stores a tile while the next one's MMAs run.
for e in menu:
    if e["epilogue"] == "tma-store-overlap":
        a = jnp.asarray(rng.standard_normal((2200, 64)), "bfloat16")
        b = jnp.asarray(rng.standard_normal((64, 2056)), "bfloat16")
        out = jax.jit(lambda x, y: gemm_op.gemm(x, y, None, None, dn, jnp.dtype("bfloat16"), gemm_op.Epilogue(), "kernel",
                                                True, e["config"]))(a, b)
        ref = np.asarray(a, np.float64) @ np.asarray(b, np.float64)
        err = float(np.abs(np.asarray(out, np.float64) - ref).max() / np.abs(ref).max())
        print("config", e["config"], "2200x2056x64 rel err", err, flush=True)
        assert err < 1e-2
# An fp8 decode weight stored (K, N): sm_90a's swap-AB kernel transposes its tiles in shared memory
# (the consumer warpgroups, before their wgmma); tails in M, N and K; 1 and 3 K splits; the 128- and
# 256-token entries (18, 19; 18 over two column tiles).
if arch == "sm_90a":
    for m, n, k, s, c in [(16, 272, 4112, 1, 11), (5, 1040, 208, 3, 11), (200, 272, 1040, 2, 18), (200, 272, 1040, 2, 19)]:
        x = jnp.asarray(rng.standard_normal((m, k)), "float8_e4m3fn")
        w = jnp.asarray(rng.standard_normal((k, n)), "float8_e4m3fn")
        fn = lambda a, b, s=s, c=c: gemm_op.gemm(a, b, None, None, dn, jnp.dtype("float32"), gemm_op.Epilogue(), "kernel", True, (c, s))
        out = jax.jit(fn)(x, w)
        ref = np.asarray(x, np.float64) @ np.asarray(w, np.float64)
        err = float(np.abs(np.asarray(out, np.float64) - ref).max() / np.abs(ref).max())
        print("fp8 (K, N) weight", (m, n, k), "splits", s, "rel err", err, flush=True)
        assert err < 2e-2  # fp8 wgmma accumulation (~14 bits per instruction chain)
# The block-scaled (MX) kernel, where this arch has one: both tile widths (few tiles -> 128x64, many ->
# 128x128), K tails (K / 32 not a multiple of 4: the scale loaders' byte path), both scale layouts.
from jax_tmem.ops import block_scale, scaled_gemm
fm = block_scale.get_format("mxfp8")
if scaled_gemm.kernel_target(fm, fm)[0].startswith("cuda"):
    for (bt, m, n, k) in [(2, 200, 136, 96), (1, 2048, 1200, 256)]:
        xq, xs = jax_tmem.quantize(jnp.asarray(rng.standard_normal((bt, m, k)), "bfloat16"), "mxfp8")
        wq, ws = jax_tmem.quantize(jnp.asarray(rng.standard_normal((bt, n, k)), "bfloat16"), "mxfp8")
        ref = np.einsum("bmk,bnk->bmn", np.asarray(jax_tmem.dequantize(xq, xs), np.float64),
                        np.asarray(jax_tmem.dequantize(wq, ws), np.float64))
        for layout, (sx, sw) in enumerate(((xs, ws), (jax_tmem.swizzle_scales(xs), jax_tmem.swizzle_scales(ws)))):
            # every configuration of the arch's block-scaled kernel (sm_90a's table; tcgen05: the heuristic's)
            for cfg in [e["config"] for e in isa.block_scaled_menu(arch)] or [-1]:
                if layout == 0 and (k // 32) % 4:
                    continue  # plain scales with K / 32 % 4 != 0 go swizzled (scaled_matmul does that)
                out = jax.jit(lambda *a: scaled_gemm.scaled_matmul_ffi(*a, jnp.float32, 32, layout=layout, config=cfg))(
                    xq, wq, sx, sw)
                err = float(np.abs(np.asarray(out, np.float64) - ref).max() / np.abs(ref).max())
                print("block-scaled", (bt, m, n, k), "layout", layout, "config", cfg, "rel err", err, flush=True)
                assert err < 1e-4
# The weight-only 4-bit kernel (kernels/w4_gemm.cuh): every token-tile width (M 1, 16, 24 / 40 over grid.y),
# N and K tails (K = 160: a 128-chunk and one block), MXFP4 and NVFP4 with its global scale, a batch.
fw = block_scale.get_format("mxfp4")
if scaled_gemm.kernel_target(None, fw, jnp.bfloat16, 64)[0].startswith("cuda"):
    for (bt, m, n, k, fmt) in [(1, 1, 136, 160, "mxfp4"), (2, 16, 72, 256, "nvfp4"), (1, 24, 40, 512, "mxfp4"),
                               (1, 40, 264, 96, "nvfp4")]:
        x = jnp.asarray(rng.standard_normal((bt, m, k)), "bfloat16")
        gs = 0.75 if fmt == "nvfp4" else None
        wq, ws = jax_tmem.quantize(jnp.asarray(rng.standard_normal((bt, n, k)), "float32"), fmt, global_scale=gs)
        ref = np.einsum("bmk,bnk->bmn", np.asarray(x, np.float64),
                        np.asarray(jax_tmem.dequantize(wq, ws, global_scale=gs), np.float64))
        out = jax.jit(lambda *a: scaled_gemm.scaled_matmul_ffi(*a, jnp.float32, block_scale.get_format(fmt).block,
                                                               global_scale=gs))(x, wq, None, ws)
        err = float(np.abs(np.asarray(out, np.float64) - ref).max() / np.abs(ref).max())
        print("weight-only", fmt, (bt, m, n, k), "rel err", err, flush=True)
        assert err < 1e-4
    # The many-token kernels (w4_wide.cuh: mma.sync, configs 11-13, 17; w4_wgmma.cuh on sm_90: 14-16, 18), K split
    # over clusters of 1, 2, 3 and 4 CTAs (partial sums read through distributed shared memory).
    sm90 = jax.devices()[0].compute_capability == "9.0"
    for (bt, m, n, k, fmt) in [(1, 40, 264, 1536, "mxfp4"), (2, 64, 136, 1024, "nvfp4")]:
        x = jnp.asarray(rng.standard_normal((bt, m, k)), "bfloat16")
        wq, ws = jax_tmem.quantize(jnp.asarray(rng.standard_normal((bt, n, k)), "float32"), fmt)
        ref = np.einsum("bmk,bnk->bmn", np.asarray(x, np.float64), np.asarray(jax_tmem.dequantize(wq, ws), np.float64))
        for cfg in (11, 12, 13, 17) + ((14, 15, 16, 18) if sm90 else ()):
            out = jax.jit(lambda *a: scaled_gemm.scaled_matmul_ffi(*a, jnp.float32, block_scale.get_format(fmt).block,
                                                                   config=cfg))(x, wq, None, ws)
            err = float(np.abs(np.asarray(out, np.float64) - ref).max() / np.abs(ref).max())
            print("weight-only many tokens", fmt, (bt, m, n, k), "config", cfg, "rel err", err, flush=True)
            assert err < 1e-4
# The fused quantize kernel's 4-bit forms (packed e2m1 stores): rowwise with swizzled scales, colwise, a
# global scale, f32 and bf16 x; against the XLA path bit for bit.
if jax.default_backend() == "gpu":
    for fmt in ("mxfp4", "nvfp4"):
        # (colwise 16-bit x: the column-pair kernel; float32 x: the CTA-tile kernel)
        cases = (("bfloat16", (3, 96, 264), 1, "plain"), ("float32", (2, 40, 160), -1, "swizzled"),
                 ("float16", (64, 40), 0, "swizzled"), ("float32", (2, 64, 24), 1, "plain"))
        if fmt == "nvfp4":  # an odd block count: the rowwise kernel's last thread has one of its two blocks
            cases += (("bfloat16", (3, 7, 48), -1, "plain"), ("float16", (5, 80), -1, "swizzled"),
                      ("bfloat16", (48, 24), 0, "swizzled"))
        for dt, shape, axis, layout in cases:
            x = jnp.asarray(rng.standard_normal(shape), dt)
            g = jnp.float32(0.37) if fmt == "nvfp4" else None
            q = lambda path: jax.jit(lambda v, gg: jax_tmem.quantize(v, fmt, axis=axis, path=path, global_scale=gg,
                                                                     scale_layout=layout))(x, g)
            (d1, s1), (d2, s2) = q("kernel"), q("xla")
            same = all(np.array_equal(np.asarray(u).view(np.uint8), np.asarray(w).view(np.uint8))
                       for u, w in ((d1, d2), (s1, s2)))
            print("quantize", fmt, dt, shape, axis, layout, "bit-identical", same, flush=True)
            assert same
# The dense sm_90a entries' last wave shared along K (sched::TailSplit): 144 tiles of 128x256 (153 of
# 128x128) on 132 SMs, owners adding the other CTAs' partial sums from the workspace.
if jax.default_backend() == "gpu" and sm90:
    from jax_tmem.ops import gemm as gemm_op
    a = jnp.asarray(rng.standard_normal((1152, 1000)), "bfloat16")
    b = jnp.asarray(rng.standard_normal((1000, 4096)), "bfloat16")
    ref = np.asarray(a.astype(jnp.float32), np.float64) @ np.asarray(b.astype(jnp.float32), np.float64)
    built = {e["config"] for e in menu}  # (8 is sweep-only: 20, the same tiles, in a default build)
    for cfg in ((8 if 8 in built else 20, 132), (8 if 8 in built else 20, 13), (9, 100)):
        out = jax.jit(lambda x, y: gemm_op.gemm(x, y, None, None, (((1,), (0,)), ((), ())), np.dtype("float32"),
                                                gemm_op.Epilogue(), "kernel", True, cfg))(a, b)
        err = float(np.abs(np.asarray(out, np.float64) - ref).max() / np.abs(ref).max())
        print("last wave shared", cfg, "rel err", err, flush=True)
        assert err < 1e-5
# The swap-AB entries' last wave shared the same way (menu::swap_tail, config (entry, -(100 + share))): 20000 and
# 36000 weight rows (157 / 282 tiles of 128) on 132 SMs, entry 35 (the one that can), token, row and K tails, a
# whole wave shared too, fp8, a fused epilogue (the kernel's finish).
if jax.default_backend() == "gpu" and sm90:
    nk = (((1,), (1,)), ((), ()))
    for (m_, n_, k_), cfg, dt, fused in (((61, 20000, 1000), (35, -232), "bfloat16", False),
                                         ((150, 20000, 520), (35, -200), "bfloat16", True),
                                         ((100, 36000, 1000), (35, -364), "float16", False),
                                         ((177, 20000, 1024), (35, -232), "float8_e4m3fn", False),
                                         ((190, 20000, 1000), (35, -150), "bfloat16", True)):
        a = jnp.asarray(rng.standard_normal((m_, k_)), dt)
        b = jnp.asarray(rng.standard_normal((n_, k_)), dt)
        bias = jnp.asarray(rng.standard_normal((n_,)), "float32")
        epi = gemm_op.Epilogue(activation="relu", has_bias=True) if fused else gemm_op.Epilogue()
        out = jax.jit(lambda x, y, z: gemm_op.gemm(x, y, z if fused else None, None, nk, jnp.dtype("bfloat16"), epi,
                                                   "kernel", True, cfg))(a, b, bias)
        a64, b64 = (np.asarray(t.astype(jnp.float32), np.float64) for t in (a, b))
        ref = a64 @ b64.T
        ref = np.maximum(ref + np.asarray(bias, np.float64), 0) if fused else ref
        err = float(np.abs(np.asarray(out, np.float64) - ref).max() / np.abs(ref).max())
        print("swap-AB last wave shared", cfg, (m_, n_, k_), dt, "rel err", err, flush=True)
        assert err < 1e-2
print("sanitize sweep done")
