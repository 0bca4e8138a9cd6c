"""One partitionable primitive for jax_tmem's custom calls other than the GEMM (the fused quantize, the
block-scaled GEMM): ``part_p``, whose ``spec`` parameter (a frozen dataclass of the op's module) says
what the call is. Single-device programs and shard_map bodies lower ``spec.local`` (the FFI custom
call); a program partitioned over several devices lowers it through custom_partitioning with the spec's
Shardy rule (``partition.Rule``; the reduction, logging and cache tag as for the GEMM, ops/partition.py).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax._src import dispatch as _dispatch
from jax.experimental.custom_partitioning import custom_partitioning
from jax.extend.core import Primitive
from jax.interpreters import batching, mlir
from jax.sharding import NamedSharding

from jax_tmem.ops.partition import (_with_tag, explicit_mesh, partial_dtype, plan, reduce_partials, safe_partition,
                                    tag_operand, wanted)

# A spec is a frozen (hashable) dataclass with:
#   out_avals(*avals) -> list of ShapedArray       abstract evaluation
#   local(*args, partial=False) -> list of arrays  one device's call (the FFI custom call); partial=True:
#                                                  its partial products (partition.partial_dtype of
#                                                  out_dtype), to be summed over the devices
#   rule(shapes) -> Rule                           the sharding rule for these global operand shapes
#   batch(args, dims) -> (outs, out_dims)          vmap
#   name                                           for the log
#   out_dtype                                      the dtype after a sum (only the specs that contract:
#                                                  scaled_gemm; quantize and transpose sum nothing)

part_p = Primitive("jax_tmem_partitioned_call")
part_p.multiple_results = True


def bind(spec, *args):
    return part_p.bind(*args, spec=spec)


def _part_abstract_eval(*avals, spec):
    return spec.out_avals(*avals)


def _part_impl(*args, spec):
    return _jit_of(spec)(*args)


@functools.lru_cache(maxsize=256)
def _jit_of(spec):
    return jax.jit(lambda *a: part_p.bind(*a, spec=spec))


@functools.lru_cache(maxsize=512)
def _partitioned(spec, shapes, explicit=False):
    rule = _with_tag(spec.rule(shapes))
    problem = " x ".join(str(list(s)) for s in shapes)
    fn = custom_partitioning(lambda *args: tuple(spec.local(*args[:-1])))

    def partition(mesh, arg_shapes, result_shape):
        res = result_shape[0] if isinstance(result_shape, (tuple, list)) else result_shape
        pl = plan(rule, mesh, arg_shapes, res, explicit, spec.name, problem,
                  sum_dtype=partial_dtype(spec.out_dtype) if hasattr(spec, "out_dtype") else None)
        arg_shardings = tuple(NamedSharding(mesh, pl.spec_of(d)) for d in rule.dims)
        if not pl.k_axes:
            outs = tuple(NamedSharding(mesh, pl.spec_of(d)) for d in rule.out)
            return mesh, lambda *a: tuple(spec.local(*a[:-1])), outs, arg_shardings

        def lower(*args):
            (y,) = spec.local(*args[:-1], partial=True)
            return (reduce_partials(y, pl.k_axes, pl.scatter, pl.by_gather).astype(spec.out_dtype),)
        return mesh, lower, (NamedSharding(mesh, pl.out_spec),), arg_shardings

    fn.def_partition(partition=safe_partition(partition, spec.name, problem, lambda *a: tuple(spec.local(*a[:-1])),
                                              len(rule.dims), len(rule.out)), **rule.kwargs())
    return lambda *args: fn(*args, tag_operand((repr(spec), shapes)))


def _part_lowering(ctx, *args, spec):
    if wanted(ctx):
        fn = _partitioned(spec, tuple(tuple(a.shape) for a in ctx.avals_in), explicit_mesh(ctx))
        return mlir.lower_fun(lambda *a: list(fn(*a)), multiple_results=True)(ctx, *args)
    return mlir.lower_fun(lambda *a: list(spec.local(*a)), multiple_results=True)(ctx, *args)


def _part_batch(args, dims, *, spec):
    return spec.batch(args, dims)


part_p.def_abstract_eval(_part_abstract_eval)
part_p.def_impl(_part_impl)
mlir.register_lowering(part_p, _part_lowering)
batching.primitive_batchers[part_p] = _part_batch
_dispatch.prim_requires_devices_during_lowering.add(part_p)


def map_batch(spec, args, dims):
    """A batching rule that runs the call once per example (``lax.map``), each call still partitionable."""
    mapped = [i for i, d in enumerate(dims) if d is not None]
    xs = [jnp.moveaxis(args[i], dims[i], 0) for i in mapped]

    def one(xs_i):
        full = list(args)
        for i, v in zip(mapped, xs_i):
            full[i] = v
        return tuple(bind(spec, *full))
    outs = jax.lax.map(one, xs)
    return list(outs), [0] * len(outs)
