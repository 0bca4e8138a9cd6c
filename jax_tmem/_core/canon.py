"""Turning ``lax.dot_general`` dimension numbers into the kernels' canonical strided GEMM.

The kernels compute ``out[b, i, j] = sum_k A[b, i, k] * B[b, j, k]`` over strided 3-D views of the
operand buffers (``cpp/include/jax_tmem/gemm_problem.h``). Any dimension numbers whose dims can be
grouped, using row-major strides only, into one batch mode, one free mode and one contracting mode per
operand, with one of the free/contracting modes of unit stride, map onto that form without moving data:
the unit-stride mode decides the operand's majorness (K-major or MN-major). What cannot be grouped
(a transpose would be needed) is reported with a reason and goes to ``lax.dot_general``.

Batch pairs may name ``None`` on one side: that operand is broadcast over the batch (stride 0). The
batching rule uses this to vmap over one operand without copying the other.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Optional, Sequence

# ((lhs_contract, rhs_contract), (lhs_batch, rhs_batch)); batch entries may be None (broadcast).
DimNums = tuple[tuple[tuple[int, ...], tuple[int, ...]], tuple[tuple[Optional[int], ...], tuple[Optional[int], ...]]]


@dataclass(frozen=True)
class Canon:
    batch: int
    m: int
    n: int
    k: int
    a_mn_major: bool
    b_mn_major: bool
    lda: int
    ldb: int
    stride_a: int
    stride_b: int
    out_shape: tuple[int, ...]

    def attrs(self) -> dict:
        return dict(batch=self.batch, m=self.m, n=self.n, k=self.k, a_mn_major=self.a_mn_major,
                    b_mn_major=self.b_mn_major, lda=self.lda, ldb=self.ldb, stride_a=self.stride_a,
                    stride_b=self.stride_b)

    def describe(self) -> str:
        maj = ("MN" if self.a_mn_major else "K") + "/" + ("MN" if self.b_mn_major else "K")
        b = f"{self.batch}x" if self.batch > 1 else ""
        return f"{b}{self.m}x{self.n}x{self.k} (MxNxK, A/B {maj}-major)"


def symbolic(*shapes) -> bool:
    """Whether any dimension is symbolic (``jax.export`` shape polymorphism): the kernels are planned for
    concrete shapes at trace time, so such GEMMs take the XLA path."""
    return any(not isinstance(d, numbers.Integral) for shape in shapes for d in shape)


def row_major_strides(shape: Sequence[int]) -> list[int]:
    strides, acc = [0] * len(shape), 1
    for d in range(len(shape) - 1, -1, -1):
        strides[d] = acc
        acc *= shape[d]
    return strides


def _coalesce(dims: Sequence[int], shape: Sequence[int], strides: Sequence[int]):
    """Merges ``dims`` (in the given order, outer to inner) into one mode (size, stride).

    Size-1 dims are ignored. Returns None if they are not consecutive in memory in that order.
    The stride of an empty (size-1) mode is None.
    """
    dims = [d for d in dims if shape[d] != 1]
    if not dims:
        return 1, None
    for outer, inner in zip(dims, dims[1:]):
        if strides[outer] != strides[inner] * shape[inner]:
            return None
    return math.prod(shape[d] for d in dims), strides[dims[-1]]


def output_shape(lhs_shape, rhs_shape, dn: DimNums) -> tuple[int, ...]:
    (lc, rc), (lb, rb) = dn
    batch = [lhs_shape[l] if l is not None else rhs_shape[r] for l, r in zip(lb, rb)]
    lf = [d for d in range(len(lhs_shape)) if d not in lc and d not in lb]
    rf = [d for d in range(len(rhs_shape)) if d not in rc and d not in rb]
    return tuple(batch) + tuple(lhs_shape[d] for d in lf) + tuple(rhs_shape[d] for d in rf)


def canonicalize(lhs_shape: Sequence[int], rhs_shape: Sequence[int], dn: DimNums) -> Canon | str:
    """Returns the canonical problem, or a string saying why there is none (needs a transpose)."""
    (lc, rc), (lb, rb) = dn
    ls, rs = row_major_strides(lhs_shape), row_major_strides(rhs_shape)
    out_shape = output_shape(lhs_shape, rhs_shape, dn)

    # Contracting mode: pair order sorted by the lhs dim; the rhs dims must then be increasing too.
    pairs = sorted((l, r) for l, r in zip(lc, rc) if lhs_shape[l] != 1)
    k_l = _coalesce([l for l, _ in pairs], lhs_shape, ls)
    k_r = _coalesce([r for _, r in pairs], rhs_shape, rs)
    if k_l is None or k_r is None or [r for _, r in pairs] != sorted(r for _, r in pairs):
        return "the contracting dims are not adjacent in the same order in both operands"
    k = math.prod(lhs_shape[l] for l in lc) if lc else 1

    # Batch mode, in the output's order (the dimension-number order).
    bsizes = [lhs_shape[l] if l is not None else rhs_shape[r] for l, r in zip(lb, rb)]
    live = [i for i, s in enumerate(bsizes) if s != 1]
    batch = math.prod(bsizes) if bsizes else 1

    def batch_mode(dims, shape, strides, name):
        present = [dims[i] for i in live if dims[i] is not None]
        if not present:
            return 0, ""
        if len(present) != len(live):
            return None, f"{name} is broadcast over some batch dims but not others"
        mode = _coalesce(present, shape, strides)
        if mode is None or (len(present) > 1 and present != sorted(present)):
            return None, f"the batch dims of {name} are not adjacent in memory"
        return (mode[1] or 0), ""

    stride_a, why = batch_mode(lb, lhs_shape, ls, "lhs")
    if stride_a is None:
        return why
    stride_b, why = batch_mode(rb, rhs_shape, rs, "rhs")
    if stride_b is None:
        return why

    lfree = [d for d in range(len(lhs_shape)) if d not in lc and d not in lb]
    rfree = [d for d in range(len(rhs_shape)) if d not in rc and d not in rb]
    m_mode = _coalesce(lfree, lhs_shape, ls)
    n_mode = _coalesce(rfree, rhs_shape, rs)
    if m_mode is None:
        return "the free (M) dims of lhs are not adjacent in memory"
    if n_mode is None:
        return "the free (N) dims of rhs are not adjacent in memory"
    m, n = m_mode[0], n_mode[0]

    def majorness(free_stride, k_stride, rows_free, name):
        # K-major: contiguous K, rows step by the free mode's stride. MN-major: contiguous M/N.
        if k_stride in (None, 1) and (free_stride is not None or rows_free == 1):
            ld = free_stride if (free_stride is not None and rows_free > 1) else max(k, 1)
            return False, ld, ""
        if free_stride in (None, 1):
            ld = k_stride if k_stride is not None else max(rows_free, 1)
            return True, ld, ""
        return None, None, f"{name} has no unit-stride contracting or free dim (it would need a transpose)"

    a_mn, lda, why = majorness(m_mode[1], k_l[1], m, "lhs")
    if a_mn is None:
        return why
    b_mn, ldb, why = majorness(n_mode[1], k_r[1], n, "rhs")
    if b_mn is None:
        return why
    return Canon(batch=batch, m=m, n=n, k=k, a_mn_major=a_mn, b_mn_major=b_mn, lda=lda, ldb=ldb,
                 stride_a=stride_a if batch > 1 else 0, stride_b=stride_b if batch > 1 else 0,
                 out_shape=out_shape)
