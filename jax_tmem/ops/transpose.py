"""The layouts of operands that the tensor cores read K-major only, and the transpose of 1-byte (fp8) ones.

wgmma reads 8-bit operands K-major only, so an MN-major fp8 operand of a large GEMM (the training
recipes' w^T in the forward pass, x^T and g^T for the weight gradient) is transposed in memory first.
XLA fused those transposes into the fp8 conversion and ran them at ~0.5 TB/s on the H200 (2026-11-25:
3.8 ms of the fp8 recipe's 15.3 ms MLP step; XLA's standalone fp8 transpose 1.6-2.7 TB/s, this kernel's
2.4-3.3, scripts/transpose_probe.py); on the GPU a transpose that swaps two adjacent blocks of trailing dims runs as our
batched 1-byte transpose (cpp/include/jax_tmem/kernels/transpose8.cuh) instead. Any other permutation,
dims that are not multiples of 4, or no GPU / extension: ``jnp.transpose``, with the reason recorded
(``JAX_TMEM_LOG=1`` / the report). Under jit with sharded operands the call partitions like the GEMM's
other calls (ops/part_call.py): every dim keeps its sharding and moves with its data.

``to_k_major`` decides which operands of a GEMM are transposed, and transposes them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from jax_tmem._core import arch as _arch, canon as _canon, config as _config, ext as _ext
from jax_tmem.ops import part_call as _part_call
from jax_tmem.ops import partition as _partition


def swap_form(perm) -> tuple[int, int] | None:
    """``(j, i)`` when ``transpose(x, perm)`` keeps dims ``[0, j)`` and swaps the adjacent blocks
    ``[j, i)`` and ``[i, n)`` (so it is a batched 2-D transpose of a reshaped x), else None (also for
    the identity)."""
    perm = [int(p) for p in perm]
    n = len(perm)
    j = 0
    while j < n and perm[j] == j:
        j += 1
    if j == n:
        return None
    i = perm[j]
    if i > j and perm[j:] == list(range(i, n)) + list(range(j, i)):
        return j, i
    return None


@dataclass(frozen=True)
class TransposeCall:
    """x -> transpose(x, perm) for a 1-byte x and the perm of ``swap_form`` ``(lead, split)``: dims
    ``[0, lead)`` stay, the blocks ``[lead, split)`` and ``[split, ndim)`` swap (the kernel sees
    (batch, rows, cols) of those three products). As a partitionable call every dim keeps its sharding
    and moves with its data. No communication."""
    lead: int
    split: int
    impl: str = "ffi"  # "xla": tests of the partitioning on machines without the CUDA kernel
    name = "transpose"

    def perm(self, ndim):
        return tuple(range(self.lead)) + tuple(range(self.split, ndim)) + tuple(range(self.lead, self.split))

    def out_avals(self, x):
        return [jax.core.ShapedArray(tuple(x.shape[d] for d in self.perm(x.ndim)), x.dtype)]

    def local(self, x, partial=False):
        del partial  # nothing to sum
        if self.impl == "xla":
            return [jnp.transpose(x, self.perm(x.ndim))]
        ok, why = _ext.ensure_registered("cuda")
        if not ok:
            raise RuntimeError(f"jax_tmem: the transpose kernel is not available: {why}")
        (out,) = self.out_avals(x)
        return [jax.ffi.ffi_call("jax_tmem_transpose8", jax.ShapeDtypeStruct(out.shape, out.dtype))(
            x, lead=np.int64(self.lead), split=np.int64(self.split))]

    def rule(self, shapes):
        names = [f"d{i}" for i in range(len(shapes[0]))]
        return _partition.Rule(dims=(tuple(names),), out=(tuple(names[d] for d in self.perm(len(names))),),
                               priority="d")

    def batch(self, args, dims):
        x = jnp.moveaxis(args[0], dims[0], 0)  # a new leading dim stays in place
        return _part_call.bind(TransposeCall(self.lead + 1, self.split + 1, self.impl), x), [0]


def kernel_reason(x, perm) -> str:
    """"" when the 1-byte transpose kernel takes ``transpose(x, perm)``, else why not."""
    if jax.dtypes.itemsize_bits(x.dtype) != 8:
        return f"the transpose kernel moves 1-byte elements, not {np.dtype(x.dtype).name}"
    form = swap_form(perm)
    if form is None:
        return f"the permutation {tuple(perm)} is not a swap of two adjacent trailing dim blocks"
    j, i = form
    p, q = math.prod(x.shape[j:i]), math.prod(x.shape[i:])
    if p % 4 or q % 4:
        return f"the swapped blocks ({p}, {q}) are not multiples of 4 bytes"
    if jax.default_backend() != "gpu":
        return "no GPU (the transpose kernel is CUDA only)"
    ok, why = _ext.ensure_registered("cuda")
    return "" if ok else why


def transpose(x, perm, *, impl: str = "ffi"):
    """``jnp.transpose(x, perm)`` for a 1-byte ``x``: by the CUDA kernel where it applies (see the module
    docstring), else by XLA; either way the choice is recorded. ``impl="xla"`` (tests only): the same
    partitionable call with XLA's transpose as each device's local code."""
    perm = tuple(int(p) for p in perm)
    why = kernel_reason(x, perm) if impl == "ffi" else ""
    problem = f"{np.dtype(x.dtype).name}{list(x.shape)} perm {perm}"
    if why:
        _config.record(_config.Decision("transpose", problem, "xla", "jnp.transpose", why))
        return jnp.transpose(x, perm)
    _config.record(_config.Decision("transpose", problem, "kernel", "cuda, jax_tmem_transpose8" if impl == "ffi"
                                    else "xla (impl='xla')", "a batched 2-D transpose of 1-byte elements"))
    j, i = swap_form(perm)
    (y,) = _part_call.bind(TransposeCall(j, i, impl), x)
    return y


# ---- the layouts a GEMM reads ------------------------------------------------------------------

def to_k_major(lhs, rhs, dn, requested, accept=None):
    """``dot_general(lhs, rhs, dn)``'s operands with those of a type the tensor cores read K-major only
    (wgmma: fp8 and tf32; tcgen05 as built: tf32) transposed to K-major (16-bit ones are read in place,
    and so is an fp8 decode weight that ``arch.reads_mn_weight``), and the dimension numbers after them.
    The output of the GEMM is unchanged (batch and free dims keep their order). ``accept(lhs_shape,
    rhs_shape, dn)``, if given, is asked first whether a kernel takes the moved problem: if not, nothing is
    transposed (a transpose would only feed XLA's dot, e.g. an f32 row pitch TMA cannot take)."""
    none = (lhs, rhs, dn)
    if requested == "xla" or jax.default_backend() != "gpu":
        return none
    cc = _arch.device_cc()[0]
    if cc != 90 and not (requested in ("kernel", "prefer") or _arch.sm100_trusted()):
        return none  # the kernels will not run this call: leave the layout to XLA
    arch, _ = _arch.arch_target(cc) if cc > 0 else ("", "")
    k_major_only = _arch.k_major_dtypes(arch) if arch else ()
    canon = _canon.canonicalize(tuple(lhs.shape), tuple(rhs.shape), dn)
    if not k_major_only or not isinstance(canon, _canon.Canon):
        return none
    (lc, rc), (lb, rb) = dn
    pairs = sorted(zip(lc, rc))
    lc, rc = tuple(l for l, _ in pairs), tuple(r for _, r in pairs)

    def k_major(x, batch, contract):  # (perm, contracting dims after it, batch dims after it)
        free = [d for d in range(x.ndim) if d not in contract and d not in batch]
        perm = [d for d in batch if d is not None] + free + list(contract)
        pos = {d: i for i, d in enumerate(perm)}
        return perm, tuple(pos[d] for d in contract), tuple(None if d is None else pos[d] for d in batch)

    needs = lambda x: np.dtype(x.dtype) in k_major_only
    moves = {}
    if canon.a_mn_major and canon.m > 1 and needs(lhs):
        moves["lhs"] = k_major(lhs, lb, lc)
        lc, lb = moves["lhs"][1:]
    in_place = _arch.reads_mn_weight(arch, canon, lhs.dtype, rhs.dtype)  # an fp8 decode weight, (K, N)
    if canon.b_mn_major and canon.n > 1 and needs(rhs) and not in_place:
        moves["rhs"] = k_major(rhs, rb, rc)
        rc, rb = moves["rhs"][1:]
    if not moves:
        return none
    new_dn = ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))
    shape = lambda x, name: tuple(x.shape[d] for d in moves[name][0]) if name in moves else tuple(x.shape)
    if accept is not None and not accept(shape(lhs, "lhs"), shape(rhs, "rhs"), new_dn):
        return none

    def move(x, name):
        if name not in moves:
            return x
        _config.record(_config.Decision("layout", f"{np.dtype(x.dtype).name}{list(x.shape)}", "kernel", "transpose",
                                        f"{name} is MN-major {np.dtype(x.dtype).name}: transposed to K-major first "
                                        "(the tensor cores read it K-major only)"))
        perm = moves[name][0]
        return transpose(x, perm) if jax.dtypes.itemsize_bits(x.dtype) == 8 else jnp.transpose(x, perm)  # tf32: XLA

    return move(lhs, "lhs"), move(rhs, "rhs"), new_dn
