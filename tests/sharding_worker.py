"""Run by tests/test_sharding.py in a fresh process with 8 host CPU devices (the XLA flag must precede
jax's import). Prints one JSON line per case: the max error against the unsharded float64 result, the
output's PartitionSpec and the collectives in the compiled HLO, for jax_tmem (kernel path: the C++ CPU
handler runs each device's GEMM) and for the same program with lax.dot_general."""

import json
import os
import sys

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

import jax_tmem  # noqa: E402
from jax_tmem.report import collectives as count_collectives  # noqa: E402


def collectives(f, *args):
    return count_collectives(f.lower(*args).compile().as_text())


def main():
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    rng = np.random.default_rng(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    x = rng.standard_normal((64, 128)).astype(np.float32)
    w = (rng.standard_normal((128, 96)) * 0.1).astype(np.float32)
    bias = rng.standard_normal((96,)).astype(np.float32)
    # (name, x spec, w spec): data parallel, column (Megatron), row, FSDP-like (K sharded on both)
    layouts = [("data", P("data", None), P()), ("column", P("data", None), P(None, "model")),
               ("row", P(None, "model"), P("model", None)), ("fsdp", P("data", "model"), P("model", None))]
    for name, sx, sw in layouts:
        X, W = jax.device_put(x, NamedSharding(mesh, sx)), jax.device_put(w, NamedSharding(mesh, sw))
        for act in (None, "relu"):
            ref = np.maximum if act else (lambda a, _: a)
            ref = ref(x.astype(np.float64) @ w.astype(np.float64) + bias, 0)
            ours = jax.jit(lambda a, b: jax_tmem.matmul(a, b, bias=bias, activation=act, out_dtype=jnp.float32,
                                                        path="kernel"))
            lax_ = jax.jit(lambda a, b: jax_tmem.matmul(a, b, bias=bias, activation=act, out_dtype=jnp.float32,
                                                        path="xla"))
            y = ours(X, W)
            print(json.dumps(dict(case=f"{name}/{act}", err=float(np.abs(np.asarray(y) - ref).max()),
                                  spec=str(y.sharding.spec), spec_xla=str(lax_(X, W).sharding.spec),
                                  ours=collectives(ours, X, W), xla=collectives(lax_, X, W))), flush=True)
        # the gradient of a sharded loss (the backward GEMMs partition too)
        loss = lambda path: jax.jit(jax.grad(lambda a, b: jnp.sum(jnp.tanh(jax_tmem.matmul(a, b, path=path)) ** 2),
                                             argnums=(0, 1)))
        g, gx = loss("kernel")(X, W), loss("xla")(X, W)
        print(json.dumps(dict(case=f"{name}/grad", err=max(float(np.abs(np.asarray(u) - np.asarray(v)).max())
                                                         for u, v in zip(g, gx)),
                              ours=collectives(loss("kernel"), X, W), xla=collectives(loss("xla"), X, W))), flush=True)
    # x's rows and w's columns on the same mesh axis: one of them must be gathered (as XLA does)
    X, W = jax.device_put(x, NamedSharding(mesh, P("data", None))), jax.device_put(w, NamedSharding(mesh, P(None, "data")))
    f = jax.jit(lambda a, b: jax_tmem.matmul(a, b, out_dtype=jnp.float32, path="kernel"),
                out_shardings=NamedSharding(mesh, P("data", None)))
    print(json.dumps(dict(case="same_axis", err=float(np.abs(np.asarray(f(X, W)) - x.astype(np.float64) @ w).max()))),
          flush=True)
    # shard_map: each device calls its local GEMM
    f = jax.jit(jax.shard_map(lambda a, b: jax.lax.psum(jax_tmem.matmul(a, b, path="kernel"), "model"), mesh=mesh,
                              in_specs=(P("data", "model"), P("model", None)), out_specs=P("data", None)))
    y = f(jax.device_put(x, NamedSharding(mesh, P("data", "model"))), jax.device_put(w, NamedSharding(mesh, P("model", None))))
    print(json.dumps(dict(case="shard_map", err=float(np.abs(np.asarray(y) - x.astype(np.float64) @ w).max()))), flush=True)
    # vmap over a sharded batch
    xb = rng.standard_normal((4, 16, 128)).astype(np.float32)
    XB = jax.device_put(xb, NamedSharding(mesh, P("data", None, "model")))
    y = jax.jit(jax.vmap(lambda a: jax_tmem.matmul(a, w, path="kernel")))(XB)
    print(json.dumps(dict(case="vmap", err=float(np.abs(np.asarray(y) - xb.astype(np.float64) @ w).max()))), flush=True)


def emit(**kw):
    print(json.dumps(kw), flush=True)


def scatter_and_explicit(rng):
    """A contraction split over a mesh axis that the output is wanted split over: a reduce-scatter (XLA's
    CPU pipeline emits all-reduce + dynamic-slice for lax.dot_general; its GPU pipeline a reduce-scatter);
    explicit-axis meshes with and without out_sharding."""
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    x = rng.standard_normal((64, 128)).astype(np.float32)
    w = (rng.standard_normal((128, 96)) * 0.1).astype(np.float32)
    bias = rng.standard_normal((96,)).astype(np.float32)
    X, W = jax.device_put(x, NamedSharding(mesh, P(None, "model"))), jax.device_put(w, NamedSharding(mesh, P("model", None)))
    ref = x.astype(np.float64) @ w
    for name, spec in (("scatter_m", P(("data", "model"), None)), ("scatter_n", P("data", "model"))):
        for act in (None, "relu"):
            out = NamedSharding(mesh, spec)
            f = lambda path: jax.jit(lambda a, b: jax_tmem.matmul(a, b, bias=bias if act else None, activation=act,
                                                                  out_dtype=jnp.float32, path=path), out_shardings=out)
            want = np.maximum(ref + bias, 0) if act else ref
            y = f("kernel")(X, W)
            emit(case=f"{name}/{act}", err=float(np.abs(np.asarray(y) - want).max()), spec=str(y.sharding.spec),
                 ours=collectives(f("kernel"), X, W), xla=collectives(f("xla"), X, W))
    # explicit-axis meshes: the result type's sharding as lax.dot_general's, out_sharding honoured
    from jax.sharding import AxisType
    emesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Explicit,) * 2)
    dn = (((1,), (0,)), ((), ()))
    layouts = [("data", P("data", None), P(), None), ("column", P("data", None), P(None, "model"), None),
               ("row", P("data", "model"), P("model", None), P("data", None)),
               ("row_scatter", P("data", "model"), P("model", None), P(("data", "model"), None))]
    from jax_tmem.ops import partition as _partition
    broken = _partition._EXPLICIT_PSUM_BROKEN

    def run(suffix):
        with jax.set_mesh(emesh):
            for name, sx, sw, osh in layouts:
                Xe, We = jax.device_put(x, sx), jax.device_put(w, sw)
                for path in ("kernel", "xla"):
                    f = jax.jit(lambda a, b: jax_tmem.dot_general(a, b, dn, preferred_element_type=jnp.float32,
                                                                  path=path, out_sharding=osh))
                    g = jax.jit(lambda a, b: jax.lax.dot_general(a, b, dn, preferred_element_type=jnp.float32,
                                                                 out_sharding=osh))
                    y = f(Xe, We)
                    emit(case=f"explicit{suffix}/{name}/{path}", err=float(np.abs(np.asarray(y) - ref).max()),
                         spec=str(jax.typeof(y).sharding.spec), spec_xla=str(jax.typeof(g(Xe, We)).sharding.spec),
                         ours=collectives(f, Xe, We), xla=collectives(g, Xe, We))
    run("")
    if not broken:  # jax 0.11's way of summing (all-gather + local sum), forced here on jax 0.10
        _partition._EXPLICIT_PSUM_BROKEN = True
        try:
            run("_gathersum")
        finally:
            _partition._EXPLICIT_PSUM_BROKEN = False


def block_scaled(rng):
    """scaled_matmul's kernel path (the C++ CPU handler per device) and the quantize call's partitioning
    (its XLA local code: the CUDA kernel's rule, run on the CPU)."""
    from jax_tmem.ops import block_scale
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    B, M, N, K = 2, 256, 512, 512
    a = rng.standard_normal((B, M, K)).astype(np.float32)
    b = rng.standard_normal((B, N, K)).astype(np.float32)
    aq, sa = jax_tmem.quantize(a, "mxfp8", path="xla")
    bq, sb = jax_tmem.quantize(b, "mxfp8", path="xla")
    layouts = [("batch", P("data"), P("data")), ("mn", P(None, "data"), P(None, "model")),
               ("k", P(None, None, "model"), P(None, None, "model")), ("mk", P(None, "data", "model"), P(None, None, "model"))]
    for lay in ("plain", "swizzled"):
        if lay == "swizzled":
            sa_, sb_ = jax_tmem.swizzle_scales(sa), jax_tmem.swizzle_scales(sb)
        else:
            sa_, sb_ = sa, sb
        f = lambda path: jax.jit(lambda *v: jax_tmem.scaled_matmul(*v, jnp.float32, path=path))
        ref = np.asarray(f("kernel")(aq, bq, sa_, sb_))
        for name, spa, spb in layouts:
            put = lambda v, sp: jax.device_put(v, NamedSharding(mesh, sp))
            args = (put(aq, spa), put(bq, spb), put(sa_, spa), put(sb_, spb))
            y = f("kernel")(*args)
            emit(case=f"scaled/{lay}/{name}", err=float(np.abs(np.asarray(y) - ref).max() / np.abs(ref).max()),
                 spec=str(y.sharding.spec), ours=collectives(f("kernel"), *args), xla=collectives(f("xla"), *args))
    # swizzled scales whose row tiles are padded (M = 200): M stays whole (gathered), logged with the reason
    a2 = rng.standard_normal((1, 200, K)).astype(np.float32)
    aq2, sa2 = jax_tmem.quantize(a2, "mxfp8", path="xla")
    sw2 = (jax_tmem.swizzle_scales(sa2), jax_tmem.swizzle_scales(sb[:1]))
    ref = np.asarray(jax.jit(lambda *v: jax_tmem.scaled_matmul(*v, jnp.float32, path="kernel"))(aq2, bq[:1], *sw2))
    jax_tmem.clear_decisions()
    args = (jax.device_put(aq2, NamedSharding(mesh, P(None, "data"))), bq[:1], *sw2)
    y = jax.jit(lambda *v: jax_tmem.scaled_matmul(*v, jnp.float32, path="kernel"))(*args)
    emit(case="scaled/padded_tiles", err=float(np.abs(np.asarray(y) - ref).max()),
         log=[f"{d.target}: {d.reason}" for d in jax_tmem.decisions() if d.op == "partition"])
    # weight-only: bf16 activations x nvfp4 weights with its global scale, weights split by N or by K
    x = jnp.asarray(rng.standard_normal((1, 16, K)), jnp.bfloat16)
    wq, ws = jax_tmem.quantize(b, "nvfp4", global_scale=0.5, path="xla")
    f = lambda path: jax.jit(lambda *v: jax_tmem.scaled_matmul(v[0], v[1], None, v[2], jnp.float32,
                                                               rhs_global_scale=jnp.float32(0.5), path=path))
    ref = np.asarray(f("kernel")(x, wq[:1], ws[:1]))
    for name, spx, spw in (("n", P(), P(None, "model")), ("k", P(None, None, "model"), P(None, None, "model"))):
        args = (jax.device_put(x, NamedSharding(mesh, spx)), jax.device_put(wq[:1], NamedSharding(mesh, spw)),
                jax.device_put(ws[:1], NamedSharding(mesh, spw)))
        y = f("kernel")(*args)
        emit(case=f"weight_only/{name}", err=float(np.abs(np.asarray(y) - ref).max() / np.abs(ref).max()),
             ours=collectives(f("kernel"), *args), xla=collectives(f("xla"), *args))
    # the quantize call: rowwise / colwise, plain / swizzled, mxfp8 / nvfp4 (+ global scale), split by rows
    # and along the quantized axis in whole blocks (tiles): bit-identical, no communication
    x2 = rng.standard_normal((256, 512)).astype(np.float32)
    for fmt in ("mxfp8", "nvfp4"):
        fo = block_scale.get_format(fmt)
        gs = jnp.float32(0.75) if fmt == "nvfp4" else None
        for axis in (1, 0):
            for sw in (False, True):
                q = lambda v: block_scale._quantize_ffi(v, fo, axis, sw, gs, impl="xla")
                want = jax.jit(q)(x2)
                X2 = jax.device_put(x2, NamedSharding(mesh, P("data", "model")))
                got = jax.jit(q)(X2)
                same = all(np.array_equal(np.asarray(u).view(np.uint8), np.asarray(v).view(np.uint8))
                           for u, v in zip(got, want))
                emit(case=f"quantize/{fmt}/{axis}/{sw}", same=same, specs=[str(g.sharding.spec) for g in got],
                     ours=collectives(jax.jit(q), X2))


def transpose_call(_rng):
    """The 1-byte transpose call's rule (XLA's transpose as the local code, as for the quantize call):
    leading dims and the two swapped dims keep their shardings, no communication, bit-identical. Its own
    random stream, so the other sections' data does not depend on it."""
    from jax_tmem.ops import transpose as tr
    rng = np.random.default_rng(1234)
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    for shape, perm, spec in (((64, 128), (1, 0), P("data", "model")), ((4, 64, 96), (0, 2, 1), P("data", None, "model")),
                              ((4, 64, 96), (2, 0, 1), P("data", "model"))):
        b = rng.integers(0, 256, size=shape, dtype=np.uint8)
        x = jax.lax.bitcast_convert_type(jnp.asarray(b), jnp.float8_e4m3fn)
        f = jax.jit(lambda v, perm=perm: tr.transpose(v, perm, impl="xla"))
        X = jax.device_put(x, NamedSharding(mesh, spec))
        y = f(X)
        emit(case=f"transpose/{perm}", same=bool(np.array_equal(np.asarray(jax.lax.bitcast_convert_type(y, jnp.uint8)),
                                                                  np.transpose(b, perm))),
             spec=str(y.sharding.spec), ours=collectives(f, X))


def recipes_and_memory(rng):
    """The training recipes' GEMMs under sharding (forward + backward), and the per-device memory of a
    column- then row-parallel MLP against the lax.dot_general program."""
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    x = rng.standard_normal((64, 128)).astype(np.float32)
    w1 = (rng.standard_normal((128, 256)) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((256, 128)) * 0.1).astype(np.float32)
    put = lambda v, sp: jax.device_put(v, NamedSharding(mesh, sp))
    X, W1, W2 = put(x, P("data", None)), put(w1, P(None, "model")), put(w2, P("model", None))

    def mlp(recipe, path):
        dg = lambda a, b: jax_tmem.dot_general(a, b, (((a.ndim - 1,), (0,)), ((), ())),
                                               preferred_element_type=jnp.float32, recipe=recipe, path=path)
        return lambda a, u, v: jnp.sum(dg(jnp.tanh(dg(a, u)), v) ** 2)
    for recipe in ("bf16", "fp8", "mxfp8"):
        g = lambda path: jax.jit(jax.grad(mlp(recipe, path), argnums=(1, 2)))
        got = g("kernel")(X, W1, W2)
        want = jax.jit(jax.grad(mlp(recipe, "kernel"), argnums=(1, 2)))(x, w1, w2)
        err = max(float(np.abs(np.asarray(u) - np.asarray(v)).max() / np.abs(np.asarray(v)).max())
                  for u, v in zip(got, want))
        emit(case=f"recipe/{recipe}", err=err, specs=[str(u.sharding.spec) for u in got],
             ours=collectives(g("kernel"), X, W1, W2), xla=collectives(g("xla"), X, W1, W2))
    for what, fn in (("forward", lambda path: jax.jit(mlp("bf16", path))),
                     ("grad", lambda path: jax.jit(jax.grad(mlp("bf16", path), argnums=(1, 2))))):
        mem = {}
        for path in ("kernel", "xla"):
            m = fn(path).lower(X, W1, W2).compile().memory_analysis()
            mem[path] = int(m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes)
        emit(case=f"memory/{what}", ours=mem["kernel"], xla=mem["xla"])


def partial_products(rng):
    """A bf16 row-parallel GEMM (K sharded): the per-device partial products and their all-reduce are in
    the output dtype as in XLA's partitioning of lax.dot_general (no epilogue), float32 where an
    activation follows the sum; the values against the float64 product of the same bf16 inputs."""
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    x = jnp.asarray(rng.standard_normal((64, 256)), jnp.bfloat16)
    w = jnp.asarray(rng.standard_normal((256, 96)) * 0.1, jnp.bfloat16)
    X, W = jax.device_put(x, NamedSharding(mesh, P(None, "model"))), jax.device_put(w, NamedSharding(mesh, P("model", None)))
    ref = np.asarray(x, np.float64) @ np.asarray(w, np.float64)
    for act in (None, "relu"):
        f = jax.jit(lambda a, b: jax_tmem.matmul(a, b, activation=act, out_dtype=jnp.bfloat16, path="kernel"))
        jax_tmem.clear_decisions()
        hlo = f.lower(X, W).compile().as_text()
        logged = [d.target for d in jax_tmem.decisions() if d.op == "partition"]
        gemms = [ln for ln in hlo.splitlines() if 'custom_call_target="jax_tmem_gemm"' in ln]
        want = np.maximum(ref, 0) if act else ref
        emit(case=f"partials/{act}", err=float(np.abs(np.asarray(f(X, W), np.float64) - want).max() / np.abs(want).max()),
             partial_types=[ln.split("= (", 1)[1].split("[", 1)[0] for ln in gemms if "= (" in ln],
             ours=collectives(f, X, W), logged=logged)


def cache_case(cache_dir, acts):
    """The persistent compilation cache with JAX's jax_remove_custom_partitioning_ptr_from_cache_key: the
    same sharded program hits the cache in a new process, and one that differs only in a parameter the
    partition callback holds (the activation) gets its own entry and its own result."""
    jax.config.update("jax_compilation_cache_dir", cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    jax.config.update("jax_remove_custom_partitioning_ptr_from_cache_key", True)
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    rng = np.random.default_rng(5)
    x = rng.standard_normal((64, 128)).astype(np.float32)
    w = rng.standard_normal((128, 96)).astype(np.float32)
    X, W = jax.device_put(x, NamedSharding(mesh, P("data", "model"))), jax.device_put(w, NamedSharding(mesh, P("model", None)))
    for act in acts:
        before = len(os.listdir(cache_dir)) if os.path.isdir(cache_dir) else 0
        act = None if act == "none" else act
        y = jax.jit(lambda a, b: jax_tmem.matmul(a, b, activation=act, out_dtype=jnp.float32, path="kernel"))(X, W)
        ref = x.astype(np.float64) @ w
        ref = np.maximum(ref, 0) if act else ref
        emit(case=f"cache/{act}", err=float(np.abs(np.asarray(y) - ref).max()), new_entries=len(os.listdir(cache_dir)) - before)


def addend_c(rng):
    """dot_general(..., c=r): the addend follows the output (sharded as it, added after any sum over a split
    contraction), for each layout and both ways c is added (M <= 8: the kernel's epilogue; M = 64 and 512: a
    float32 product and XLA's add): the collectives of lax.dot_general + r."""
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    layouts = [("data", P("data", None), P(), P("data", None)), ("column", P("data", None), P(None, "model"), P("data", "model")),
               ("row", P(None, "model"), P("model", None), P()), ("fsdp", P("data", "model"), P("model", None), P("data", None))]
    dn = (((1,), (0,)), ((), ()))
    for m in (8, 64, 512):
        x = rng.standard_normal((m, 128)).astype(np.float32)
        w = (rng.standard_normal((128, 96)) * 0.1).astype(np.float32)
        r = rng.standard_normal((m, 96)).astype(np.float32)
        ref = x.astype(np.float64) @ w.astype(np.float64) + r
        for name, sx, sw, sc in layouts:
            X, W, R = (jax.device_put(a, NamedSharding(mesh, s)) for a, s in ((x, sx), (w, sw), (r, sc)))
            ours = jax.jit(lambda a, b, c: jax_tmem.dot_general(a, b, dn, c=c, path="kernel"))
            lax_ = jax.jit(lambda a, b, c: jax.lax.dot_general(a, b, dn, preferred_element_type=jnp.float32) + c)
            y = ours(X, W, R)
            emit(case=f"c/{name}/{m}", err=float(np.abs(np.asarray(y) - ref).max()), spec=str(y.sharding.spec),
                 spec_xla=str(lax_(X, W, R).sharding.spec), ours=collectives(ours, X, W, R),
                 xla=collectives(lax_, X, W, R))


if __name__ == "__main__":
    rng = np.random.default_rng(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    if len(sys.argv) > 2 and sys.argv[2] == "cache":
        cache_case(sys.argv[3], sys.argv[4].split(","))
    elif len(sys.argv) > 2 and sys.argv[2] == "more":
        import traceback
        for section in (scatter_and_explicit, block_scaled, transpose_call, recipes_and_memory, partial_products,
                        addend_c):
            try:  # a failing section is reported (its cases are then missing), the others still run
                section(rng)
            except Exception:  # noqa: BLE001
                emit(case=f"error/{section.__name__}", error=traceback.format_exc()[-3000:])
    else:
        main()
