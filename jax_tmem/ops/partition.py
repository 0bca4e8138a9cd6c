"""How jax_tmem's custom calls partition under ``jit`` with sharded operands (issue 17).

An FFI custom call is opaque to XLA's partitioner, which would gather every operand onto every device.
Every jax_tmem custom call of a program partitioned over several devices therefore lowers through
``jax.experimental.custom_partitioning`` with a Shardy sharding rule (:class:`Rule`):

* the GEMM (``gemm.py``'s primitive, rule from the dimension numbers): batch, M and N factors pass
  through with no communication; the contracting factors are reduction factors: each device multiplies
  its K slice (alpha and the scale operand are linear and stay in the kernel) and the partial products
  are summed over those mesh axes, as XLA does for ``lax.dot_general``: an all-reduce (``psum``), or a
  reduce-scatter (``psum_scatter``) onto an output dimension when the output is wanted sharded over a
  contracting mesh axis (sequence parallelism, the FSDP/ZeRO gradient); bias, activation and ``c`` are
  applied after the sum by XLA. A bias over several flattened N dims needs those dims replicated.
* the block-scaled GEMM and the fused quantize (``part_call.part_p``, one primitive for both, their specs in
  ``scaled_gemm.py`` and ``block_scale.py``): the scale tensors follow their data through compound
  factors (the data's K dim is ``(kb q)`` with ``q`` the block, the scales' ``kb``), so K splits in
  whole blocks; scales in the 128x4 tiles follow in whole tiles (``(mt 128)``, ``(kt 4*block)``) and,
  where the tiles are padded (rows not a multiple of 128, K / block not of 4), those dims stay whole.

Each device's local call decides its path again (a local shape no kernel takes runs XLA's semantics
there, logged). Decisions that communicate are logged (``JAX_TMEM_LOG=1``, ``jax_tmem.decisions()``).
Single-device programs and ``shard_map`` bodies lower the plain custom call.

The persistent compilation cache: JAX keys a custom_partitioning call by a Python object id, so every
process misses the cache (jax-ml/jax#21159); JAX's flag ``jax_remove_custom_partitioning_ptr_from_cache_key``
drops that id. With it, two programs differing only in parameters held by the Python callback (an
activation, alpha) would share a key; each of our calls therefore carries a small constant operand, a
digest of its static parameters (``tag``), so the key tells them apart.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.custom_partitioning import custom_partitioning
from jax.sharding import NamedSharding, PartitionSpec as P

from jax_tmem._core import config as _config


@dataclasses.dataclass(frozen=True)
class Rule:
    """A Shardy sharding rule and what the partition callback needs of it.

    ``dims``: per operand, then ``out``: per output, one entry per dimension: a factor name, or a tuple of
    factor names for a compound dimension (major first; the major factor takes the dimension's mesh axes).
    ``sizes``: the sizes of factors that appear only inside compound dimensions. ``reduction``: the
    contracting factors. ``replicate``: factors that must stay whole. ``priority``: factor-name prefixes
    in the order that keeps a mesh axis when two factors of one call want the same axis."""
    dims: tuple
    out: tuple
    sizes: tuple = ()
    reduction: tuple = ()
    replicate: tuple = ()
    priority: str = "bmkn"
    why: tuple = ()  # (factor, why it stays whole) for the log

    @staticmethod
    def _text(d):
        return " ".join(f"({' '.join(f)})" if isinstance(f, tuple) else f for f in d)

    @property
    def text(self) -> str:
        return ", ".join(self._text(d) for d in self.dims) + " -> " + ", ".join(self._text(d) for d in self.out)

    @staticmethod
    def major(d):
        return [f[0] if isinstance(f, tuple) else f for f in d]

    @property
    def factors(self) -> list:
        """The factors in the order they first appear in the rule (Shardy's factor indices)."""
        seen = [x for d in self.dims + self.out for f in d for x in (f if isinstance(f, tuple) else (f,))]
        return list(dict.fromkeys(seen))

    def kwargs(self) -> dict:
        """def_partition's keyword arguments (factors not in this rule left out; special factors in
        index order, as Shardy wants them)."""
        fs = self.factors
        pick = lambda names: tuple(f for f in fs if f in set(names))
        return dict(sharding_rule=self.text, reduction_factors=pick(self.reduction),
                    need_replication_factors=pick(self.replicate), **dict(self.sizes))

    def rank(self, factor: str) -> int:
        return self.priority.index(factor[0]) if factor[0] in self.priority else len(self.priority)


# jax 0.11.2 (seen on the H200 machine, 2026-11-24): a psum (or psum_scatter) inside a custom_partitioning
# lowering under an explicit-axis mesh gets sharding annotations in its reduction region, which XLA rejects
# ("Unsupported reduction computation"; the callback's mesh has Auto axes already). There the partial
# products are all-gathered and summed on each device in device order (no reduction region; for two
# devices as many bytes as an all-reduce), logged; jax 0.10 sums with psum as everywhere else.
_EXPLICIT_PSUM_BROKEN = tuple(int(x) for x in jax.__version__.split(".")[:2]) >= (0, 11)


def explicit_mesh(ctx) -> bool:
    """Whether the program being lowered uses an explicit-axis mesh (the partition callback's own mesh
    does not say: custom_partitioning rebuilds it with Auto axes)."""
    am = getattr(ctx.module_context.axis_context, "abstract_mesh", None)
    return any(t == jax.sharding.AxisType.Explicit for t in getattr(am, "axis_types", ()) or ())


def sum_by_gather(explicit: bool, k_axes, what: str, problem: str) -> bool:
    """Whether the partial products are summed by an all-gather + local sum instead of psum (an explicit-
    axis mesh where the psum cannot be emitted, ``_EXPLICIT_PSUM_BROKEN``); logged when so."""
    if not (explicit and k_axes and _EXPLICIT_PSUM_BROKEN):
        return False
    _config.record(_config.Decision("partition", f"{what} {problem}", "kernel",
                                    f"all-gather of the partial products over {list(k_axes)} + a local sum",
                                    f"jax {jax.__version__} rejects a psum inside custom_partitioning under an "
                                    "explicit-axis mesh"))
    return True


def _spec(sharding, ndim):
    spec = tuple(sharding.spec) if isinstance(sharding, NamedSharding) else ()
    return spec + (None,) * (ndim - len(spec))


def _names(ax):
    return [ax] if isinstance(ax, str) else list(ax or ())


def _entry(names):
    return None if not names else (names[0] if len(names) == 1 else tuple(names))


SPLIT_WHY = ("this dim splits only in whole blocks / 128x4 scale tiles, and it is one block or tile, or its "
             "tiles are padded (rows not a multiple of 128, K / block not of 4)")


def split_dim(major: str, minor: str, size: int, unit: int, sizes: dict, replicate: list, whole: str):
    """A dimension of ``size`` that may split only in whole ``unit``s: the compound ``(major minor)`` with
    ``minor`` of size ``unit``; a dimension of one unit, or not a multiple of it, is the factor ``whole``,
    kept whole (with ``major``, which the other operands then keep whole too)."""
    if size % unit == 0 and size // unit > 1:
        sizes[minor] = unit
        return (major, minor)
    replicate += [whole, major]
    return whole


def scale_tile_dims(rows: int, k: int, block: int, sizes: dict, replicate: list, r: str):
    """A block-scaled operand whose scales are in the 128x4 tiles: its rows ``(rt 128)`` and K ``(kt 4 *
    block)`` dims (with ``r`` the rows' name: each whole where its tiles are padded or single) and its
    scales' dims ``[rt, kt, u, v]`` (a tile's inside stays whole; a whole rows dim is the factor ``r``)."""
    rdim = split_dim(r + "t", "r" + r, rows, 128, sizes, replicate, r)
    kdim = split_dim("kt", "q4", k, 4 * block, sizes, replicate, "kx")
    replicate += ["u", "v"]
    return rdim, kdim, [r + "t", "kt", "u", "v"]


def assign_axes(rule: Rule, arg_shapes, what: str = "", problem: str = "") -> dict:
    """The mesh axes each factor takes, from the operands' shardings (what Shardy propagated). A sharded
    dim that cannot keep its axes is gathered by the partitioner; each such case is logged with why."""
    axes, gathered = {}, []
    for d, a in zip(rule.dims, arg_shapes):
        for lab, s in zip(Rule.major(d), _spec(a.sharding, len(d))):
            if lab not in axes:
                axes[lab] = s
            elif s != axes[lab]:  # the operands disagree (Shardy normally aligns them): keep it whole
                gathered.append((lab, s or axes[lab], "the operands split it differently"))
                axes[lab] = None
    why = dict(rule.why)
    for lab in rule.replicate:
        if axes.get(lab):
            gathered.append((lab, axes[lab], why.get(lab, "this call cannot split it")))
        axes[lab] = None
    used = set()  # a mesh axis can split one factor only (e.g. x rows and w columns both on "d"):
    for lab in sorted(axes, key=rule.rank):  # the later ones are gathered
        names = _names(axes[lab])
        if used.intersection(names):
            gathered.append((lab, axes[lab], "its mesh axis already splits another dim of this call"))
            axes[lab] = None
        used.update(names)
    for lab, ax, reason in gathered:
        _config.record(_config.Decision("partition", f"{what} {problem}".strip(), "kernel",
                                        f"gathers factor {lab!r} (sharded over {ax})", reason))
    return axes


def safe_partition(partition, what: str, problem: str, local, n_args: int, n_out: int):
    """``partition`` that never raises inside XLA's callback: on an error the call runs whole on every
    device (its operands gathered, as XLA does for an opaque custom call), and the log says why."""
    def run(mesh, arg_shapes, result_shape):
        try:
            return partition(mesh, arg_shapes, result_shape)
        except Exception as e:  # noqa: BLE001 (an exception here would abort the compilation, or the process)
            _config.record(_config.Decision("partition", f"{what} {problem}", "kernel", "gathers every operand",
                                            f"the partition rule failed: {type(e).__name__}: {e}"))
            rep = NamedSharding(mesh, P())
            outs = rep if n_out == 0 else tuple([rep] * n_out)
            return mesh, local, outs, tuple([rep] * n_args)
    return run


def adopt_output_axes(rule: Rule, axes: dict, result_shape) -> None:
    """Where the wanted output splits a dim over more mesh axes than its factor has, and those axes are
    free (no factor of this call uses them), the factor takes them: each device then computes only its
    part (its operands are sliced, not communicated, as they are replicated over those axes)."""
    if result_shape is None:
        return
    out = Rule.major(rule.out[0])
    want = _spec(getattr(result_shape, "sharding", None), len(out))
    used = {a for v in axes.values() for a in _names(v)}
    for lab, w in zip(out, want):
        if lab in rule.replicate:
            continue
        cur, w = _names(axes.get(lab)), _names(w)
        if w[:len(cur)] != cur:
            continue
        extra = []
        for a in w[len(cur):]:
            if a in used:
                break
            extra.append(a)
        if extra:
            axes[lab] = _entry(cur + extra)
            used.update(extra)


def reduction_plan(rule: Rule, axes: dict, mesh, result_shape, no_scatter=()):
    """For a call with sharded contracting factors: ``(k_axes, scatter, out_spec)``: the mesh axes the
    partial products are summed over, ``{output dim: mesh axes}`` of those summed by a reduce-scatter
    onto that dim (where the wanted output sharding splits it over contracting axes after the axes it
    already has, evenly), and the output's PartitionSpec."""
    k_axes = [a for x in rule.reduction for a in _names(axes.get(x))]
    out = Rule.major(rule.out[0])
    cur = [_names(axes.get(lab)) for lab in out]
    scatter = {}
    if k_axes and result_shape is not None:
        want = _spec(getattr(result_shape, "sharding", None), len(out))
        left = list(k_axes)
        for d, (lab, w) in enumerate(zip(out, want)):
            w = _names(w)
            extra = w[len(cur[d]):]
            if lab in no_scatter or w[:len(cur[d])] != cur[d] or not extra or any(a not in left for a in extra):
                continue
            if result_shape.shape[d] % int(np.prod([mesh.shape[a] for a in w])):
                continue
            scatter[d] = tuple(extra)
            left = [a for a in left if a not in extra]
    spec = P(*[_entry(cur[d] + list(scatter.get(d, ()))) for d in range(len(out))])
    return k_axes, scatter, spec


def reduce_partials(y, k_axes, scatter, by_gather=False):
    """Sums the per-device partial products: reduce-scatter onto the dims of ``scatter``, all-reduce over
    the remaining contracting mesh axes; ``by_gather`` (see :func:`sum_by_gather`; no scatter then): an
    all-gather and a sum in device order."""
    if by_gather:
        names = tuple(k_axes)
        return jnp.sum(jax.lax.all_gather(y, names if len(names) > 1 else names[0], axis=0), axis=0)
    done = set()
    for d, names in scatter.items():
        y = jax.lax.psum_scatter(y, names if len(names) > 1 else names[0], scatter_dimension=d, tiled=True)
        done.update(names)
    rest = tuple(a for a in k_axes if a not in done)
    return jax.lax.psum(y, rest) if rest else y


def _log_reduction(what, problem, k_axes, scatter, sum_dtype=None):
    how = (f"reduce-scatter over {sorted({a for v in scatter.values() for a in v})} onto output dims "
           f"{sorted(scatter)}" if scatter else "")
    rest = [a for a in k_axes if a not in {x for v in scatter.values() for x in v}]
    how += ("; " if how and rest else "") + (f"psum over {rest}" if rest else "")
    how += f" of {np.dtype(sum_dtype).name} partial products" if sum_dtype is not None else ""
    _config.record(_config.Decision("partition", f"{what} {problem}", "kernel", how,
                                    "the contracting dims are sharded: partial products per device, summed as "
                                    "lax.dot_general's partitioning sums them"))


@dataclasses.dataclass
class Plan:
    """How one call partitions: the mesh axes of each factor, the contracting mesh axes (``k_axes``, empty:
    no sum), the output dims summed by a reduce-scatter, the output's spec, and whether the sum is an
    all-gather (``sum_by_gather``)."""
    axes: dict
    k_axes: list
    scatter: dict
    out_spec: P
    by_gather: bool

    def spec_of(self, d) -> P:
        return P(*[self.axes.get(x) for x in Rule.major(d)])


def plan(rule: Rule, mesh, arg_shapes, result_shape, explicit: bool, what: str, problem: str, no_scatter=(),
         sum_dtype=None) -> Plan:
    """The partition callback's decisions for ``rule`` (shared by the GEMM and the part_p calls), logged
    (with ``sum_dtype``, the dtype of the partial products a sharded contraction sums)."""
    axes = assign_axes(rule, arg_shapes, what, problem)
    if len(rule.out) == 1:
        adopt_output_axes(rule, axes, result_shape)
    by_gather = sum_by_gather(explicit, [a for x in rule.reduction for a in _names(axes.get(x))], what, problem)
    # summed by gather: no slicing inside the partitioned body (jax 0.11 leaves a Sharding call there); XLA slices
    k_axes, scatter, out_spec = reduction_plan(rule, axes, mesh, None if by_gather else result_shape, no_scatter)
    if k_axes:
        _log_reduction(what, problem, k_axes, scatter, sum_dtype)
    return Plan(axes, k_axes, scatter, out_spec, by_gather)


def digest(*static) -> int:
    """A process-independent int32 digest of a call's static parameters (the ``tag`` operand)."""
    from jax_tmem import __version__  # a cached program partitioned by another version is not reused
    h = hashlib.sha256(repr((__version__,) + static).encode()).digest()
    return int.from_bytes(h[:4], "little", signed=True)


def tag_operand(static):
    return jnp.full((1,), digest(*static), jnp.int32)


def _with_tag(rule: Rule) -> Rule:
    return dataclasses.replace(rule, dims=rule.dims + (("tag",),), replicate=rule.replicate + ("tag",))


def explicit_contraction_sharding(lhs, rhs, lax_dn):
    """Under an explicit-axis mesh with a sharded contraction, lax.dot_general asks for the result's
    sharding: the one the kernel path gives (the operands' batch and free dims keep their axes, the sum is
    replicated over the contracting axes); the caller's ``out_sharding`` reshards it after. Else None."""
    try:
        sl, sr = jax.typeof(lhs).sharding, jax.typeof(rhs).sharding
    except Exception:  # noqa: BLE001 (no sharding in the type: nothing to say)
        return None
    mesh = getattr(sl, "mesh", None)
    if mesh is None or not any(t == jax.sharding.AxisType.Explicit for t in getattr(mesh, "axis_types", ())):
        return None
    pl, pr = _spec(sl, lhs.ndim), _spec(sr, rhs.ndim)
    (lc, rc), (lb, rb) = lax_dn
    if all(pl[d] is None for d in lc) and all(pr[d] is None for d in rc):
        return None
    dims = ([pl[d] for d in lb] + [pl[d] for d in range(lhs.ndim) if d not in lc and d not in lb]
            + [pr[d] for d in range(rhs.ndim) if d not in rc and d not in rb])
    used = {a for d in lc for a in _names(pl[d])}  # the contracting axes: not on the (summed) output
    out = []
    for e in dims:
        out.append(None if used.intersection(_names(e)) else e)
        used.update(_names(e))
    return NamedSharding(mesh, P(*out))


# ---- the GEMM ------------------------------------------------------------------------------------

def labels(lhs_ndim, rhs_ndim, dn, has_bias, has_c, has_scale) -> Rule:
    """The GEMM's rule from its dimension numbers (operands a, b[, bias][, c][, scale])."""
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
    why = tuple((f, "a bias over several flattened N dims is one (N,) vector: those dims stay whole")
                for f in replicate if f != "s")
    return Rule(dims=tuple(tuple(o) for o in ops), out=(tuple(out),),
                reduction=tuple(f"k{i}" for i in range(len(lc))), replicate=tuple(replicate), why=why)


def partial_dtype(out_dtype, linear: bool = True) -> np.dtype:
    """The dtype of the per-device partial products of a sharded contraction, and of their sum. With a
    linear epilogue (``linear``: alpha and the scale operand only) and a 16- or 32-bit output, the output
    dtype: XLA partitions ``lax.dot_general`` so (each device's dot in the preferred element type, the
    all-reduce in it too), and the collective then moves as many bytes as XLA's (float32 partials of a
    bf16 output moved twice as many, and took twice the memory). float32 where the epilogue adds a bias,
    applies an activation or adds ``c`` after the sum (one rounding, as the fused epilogue promises), and
    for 8-bit outputs."""
    odt = np.dtype(out_dtype)
    if not linear or odt.itemsize < 2:
        return np.dtype("float32")
    return odt


@functools.lru_cache(maxsize=512)
def wrapped(dn, out_dtype, epilogue, allow_tf32, config, shapes, local_gemm, finish_epilogue, explicit=False):
    """The GEMM of these static parameters as a custom_partitioning function of its operands and a tag.
    ``shapes``: the global operand shapes (the cache key). ``local_gemm(*args, dn, out_dtype, epilogue,
    allow_tf32, config)``: one device's GEMM (gemm.py binds the primitive with the path decided for the
    local shapes); ``finish_epilogue(y, c, epilogue)`` its epilogue's last steps (the activation and c, or the
    activation's derivative at c) on a float32 sum."""
    rule = _with_tag(labels(len(shapes[0]), len(shapes[1]), dn, epilogue.has_bias, epilogue.has_c,
                            epilogue.has_scale))
    problem = f"{list(shapes[0])} x {list(shapes[1])}"
    bias_n = rule.dims[2] if epilogue.has_bias else ()  # a bias pins its N dims: no scatter there

    def local(*args, epi=epilogue, odt=out_dtype):
        return local_gemm(*args, dn=dn, out_dtype=odt, epilogue=epi, allow_tf32=allow_tf32, config=config)

    fn = custom_partitioning(lambda *args: local(*args[:-1]))

    linear = not (epilogue.has_bias or epilogue.has_c or epilogue.activation is not None)
    sum_dtype = partial_dtype(out_dtype, linear)

    def partition(mesh, arg_shapes, result_shape):
        pl = plan(rule, mesh, arg_shapes, result_shape, explicit, "gemm", problem, no_scatter=bias_n,
                  sum_dtype=sum_dtype)
        arg_specs = [pl.spec_of(d) for d in rule.dims]
        if epilogue.has_c:  # c is added after the sum: it follows the output's final sharding
            arg_specs[2 + epilogue.has_bias] = pl.out_spec
        arg_shardings = tuple(NamedSharding(mesh, s) for s in arg_specs)
        out_sharding = NamedSharding(mesh, pl.out_spec)
        if not pl.k_axes:
            return mesh, lambda *a: local(*a[:-1]), out_sharding, arg_shardings

        def lower(*args):
            rest = list(args[2:-1])
            bias = rest.pop(0) if epilogue.has_bias else None
            c = rest.pop(0) if epilogue.has_c else None
            scale = rest.pop(0) if epilogue.has_scale else None
            part_epi = type(epilogue)(alpha=epilogue.alpha, has_scale=scale is not None)
            y = local(args[0], args[1], *([scale] if scale is not None else []), epi=part_epi, odt=sum_dtype)
            y = reduce_partials(y, pl.k_axes, pl.scatter, pl.by_gather)
            if bias is not None:
                y = y + bias.astype(jnp.float32).reshape((1,) * (y.ndim - 1) + bias.shape)
            return finish_epilogue(y, c, epilogue).astype(out_dtype)
        return mesh, lower, out_sharding, arg_shardings

    fn.def_partition(partition=safe_partition(partition, "gemm", problem, lambda *a: local(*a[:-1]), len(rule.dims), 0),
                     **rule.kwargs())
    tag = (dn, str(out_dtype), repr(epilogue), allow_tf32, config, shapes)
    return lambda *args: fn(*args, tag_operand(tag))


def wanted(ctx) -> bool:
    """Whether this lowering is of a program partitioned over several devices by XLA (jit with shardings):
    not a single-device program, and not inside shard_map (whose body is already per device)."""
    from jax._src import sharding_impls
    ac = ctx.module_context.axis_context
    return isinstance(ac, sharding_impls.ShardingContext) and ac.num_devices > 1
