"""How a jax_tmem GEMM custom call partitions under ``jit`` with sharded operands (issue 17).

The FFI custom call is opaque to XLA's partitioner, which would gather every operand onto every device.
The kernel-path lowering of the GEMM primitive therefore goes through ``jax.experimental.
custom_partitioning`` with a Shardy sharding rule built from the dimension numbers: batch, M and N
factors pass through with no communication; the contracting factors are reduction factors: when they
are sharded, each device multiplies its K slice (alpha and the scale operand are linear and stay in the
kernel) and the partial products are summed with ``psum`` over those mesh axes (the all-reduce XLA emits
for ``lax.dot_general``), after which bias, activation and ``c`` are applied by XLA. A bias over several
flattened N dims needs those dims replicated. Each device's local GEMM is checked again: a local shape
no kernel takes (e.g. a K slice breaking the 16-byte row rule) runs the XLA semantics on that device,
logged. The XLA path needs none of this (its lax ops partition natively).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.custom_partitioning import custom_partitioning
from jax.sharding import NamedSharding, PartitionSpec as P

from jax_tmem._core import config as _config


def labels(lhs_ndim, rhs_ndim, dn, has_bias, has_c, has_scale):
    """Factor names per operand and for the output: (operand labels list, output labels, replicate)."""
    (lc, rc), (lb, rb) = dn
    lab_l, lab_r = [None] * lhs_ndim, [None] * rhs_ndim
    for i, (l, r) in enumerate(zip(lc, rc)):
        lab_l[l] = lab_r[r] = f"k{i}"
    for j, (l, r) in enumerate(zip(lb, rb)):
        if l is not None:
            lab_l[l] = f"b{j}"
        if r is not None:
            lab_r[r] = f"b{j}"
    lfree = [d for d in range(lhs_ndim) if lab_l[d] is None]
    rfree = [d for d in range(rhs_ndim) if lab_r[d] is None]
    for j, d in enumerate(lfree):
        lab_l[d] = f"m{j}"
    for j, d in enumerate(rfree):
        lab_r[d] = f"n{j}"
    out = [f"b{j}" for j in range(len(lb))] + [lab_l[d] for d in lfree] + [lab_r[d] for d in rfree]
    ops, replicate = [lab_l, lab_r], []
    if has_bias:
        if len(rfree) == 1:
            ops.append([lab_r[rfree[0]]])
        else:  # a flattened (N,) bias over several free dims of rhs: keep those dims whole
            ops.append(["nb"])
            replicate += ["nb"] + [lab_r[d] for d in rfree]
    if has_c:
        ops.append(list(out))
    if has_scale:
        ops.append(["s"])
        replicate.append("s")
    return ops, out, replicate


def _spec(sharding, ndim):
    spec = tuple(sharding.spec) if isinstance(sharding, NamedSharding) else ()
    return spec + (None,) * (ndim - len(spec))


@functools.lru_cache(maxsize=512)
def wrapped(dn, out_dtype, epilogue, allow_tf32, config, shapes, local_gemm, apply_activation):
    """The GEMM of these static parameters as a custom_partitioning function of its operands.
    ``shapes``: the global operand shapes (the cache key; the rule depends on ranks only).
    ``local_gemm(*args, dn, out_dtype, epilogue, allow_tf32, config)``: one device's GEMM (gemm.py binds
    the primitive with the path decided for the local shapes); ``apply_activation(x, name)`` its epilogue's."""
    nd_l, nd_r = len(shapes[0]), len(shapes[1])
    ops, out, replicate = labels(nd_l, nd_r, dn, epilogue.has_bias, epilogue.has_c, epilogue.has_scale)
    rule = ", ".join(" ".join(o) if o else "" for o in ops) + " -> " + " ".join(out)
    reduction = tuple(f"k{i}" for i in range(len(dn[0][0])))

    def local(*args, epi=epilogue, odt=out_dtype):
        return local_gemm(*args, dn=dn, out_dtype=odt, epilogue=epi, allow_tf32=allow_tf32, config=config)

    fn = custom_partitioning(lambda *args: local(*args))

    def partition(mesh, arg_shapes, result_shape):
        del result_shape
        sl, sr = _spec(arg_shapes[0].sharding, nd_l), _spec(arg_shapes[1].sharding, nd_r)
        axes = {}  # factor -> mesh axes (None: replicated)
        for lab, s in zip(ops[0], sl):
            axes[lab] = s
        for lab, s in zip(ops[1], sr):
            if lab not in axes:
                axes[lab] = s
            elif s != axes[lab]:  # the two sides disagree (Shardy normally aligns them): keep it whole
                axes[lab] = None
        for lab in replicate:
            axes[lab] = None
        used = set()  # a mesh axis can split one factor only (e.g. x rows and w columns both on "d"):
        for lab in sorted(axes, key=lambda f: "bmkn".index(f[0]) if f[0] in "bmkn" else 4):  # later ones gather
            ax = axes[lab]
            names = [ax] if isinstance(ax, str) else list(ax or ())
            if used.intersection(names):
                axes[lab] = None
            used.update(names)
        spec_of = lambda labs: P(*[axes.get(x) for x in labs])
        arg_shardings = tuple(NamedSharding(mesh, spec_of(o)) for o in ops)
        out_sharding = NamedSharding(mesh, spec_of(out))
        k_axes = []  # the mesh axes the contracting dims are split over
        for x in reduction:
            ax = axes.get(x)
            k_axes += [ax] if isinstance(ax, str) else list(ax or ())
        if not k_axes:
            return mesh, local, out_sharding, arg_shardings
        _config.record(_config.Decision("partition", f"{list(shapes[0])} x {list(shapes[1])}", "kernel",
                                        f"psum over {k_axes}", "the contracting dims are sharded: partial "
                                        "products per device, summed like lax.dot_general's all-reduce"))

        def lower(*args):
            rest = list(args[2:])
            bias = rest.pop(0) if epilogue.has_bias else None
            c = rest.pop(0) if epilogue.has_c else None
            scale = rest.pop(0) if epilogue.has_scale else None
            part_epi = type(epilogue)(alpha=epilogue.alpha, has_scale=scale is not None)
            y = local(args[0], args[1], *([scale] if scale is not None else []), epi=part_epi, odt=np.dtype("float32"))
            y = jax.lax.psum(y, tuple(k_axes))
            if bias is not None:
                y = y + bias.astype(jnp.float32).reshape((1,) * (y.ndim - 1) + bias.shape)
            y = apply_activation(y, epilogue.activation)
            if c is not None:
                y = y + c.astype(jnp.float32)
            return y.astype(out_dtype)
        return mesh, lower, out_sharding, arg_shardings

    fn.def_partition(partition=partition, sharding_rule=rule, reduction_factors=reduction,
                     need_replication_factors=tuple(replicate))
    return fn


def wanted(ctx) -> bool:
    """Whether this lowering is of a program partitioned over several devices by XLA (jit with shardings):
    not a single-device program, and not inside shard_map (whose body is already per device)."""
    from jax._src import sharding_impls
    ac = ctx.module_context.axis_context
    return isinstance(ac, sharding_impls.ShardingContext) and ac.num_devices > 1
