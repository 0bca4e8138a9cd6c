"""What each GPU architecture's kernels take (jax_tmem/_core/arch.py), as the C++ dispatcher knows it:
the compiled kernel families come from cpp/src/instances.def through the extension, and the
trace-time checks and the K-major transposes are derived from them (checked here on any machine)."""

from __future__ import annotations

import numpy as np
import pytest

from jax_tmem._core import arch, canon as _canon, ext

BF16, F16, F32 = np.dtype("bfloat16"), np.dtype("float16"), np.dtype("float32")
E4M3, E5M2, I8 = np.dtype("float8_e4m3fn"), np.dtype("float8_e5m2"), np.dtype("int8")


@pytest.fixture(autouse=True)
def _extension():
    mod, why = ext.load()
    if mod is None:
        pytest.skip(why)


def _canon_of(a_major, b_major, m=256, n=256, k=256):
    lc = (1,) if a_major == "K" else (0,)
    rc = (1,) if b_major == "K" else (0,)
    sa = (m, k) if a_major == "K" else (k, m)
    sb = (n, k) if b_major == "K" else (k, n)
    return _canon.canonicalize(sa, sb, ((lc, rc), ((), ())))


def test_families_come_from_the_instances_lists():
    sm90, sm100, sm103 = arch.families("sm_90a"), arch.families("sm_100a"), arch.families("sm_103a")
    assert len(sm90) == 19 and len(sm100) == 29
    # the 8-bit MN-major sm_90a families, for an e4m3 (K, N) decode weight: the swap-AB kernel's (the weight is
    # its A) and the mma.sync decode kernel's (the weight is the problem's B); and 16-bit x e4m3, either layout
    # (the decode kernel's kMix: bf16 / f16 tokens x an fp8 weight read in place)
    mixed = {(a, "float8_e4m3fn", False, bmn) for a in ("bfloat16", "float16") for bmn in (False, True)}
    assert {f for f in sm90 if arch.swap_only("sm_90a", f)} == {("float8_e4m3fn", "float8_e4m3fn", True, False),
                                                                ("float8_e4m3fn", "float8_e4m3fn", False, True)} | mixed
    assert ("bfloat16", "bfloat16", True, True) in sm90
    assert ("float8_e4m3fn", "float8_e5m2", False, False) in sm90
    assert ("float8_e4m3fn", "float8_e5m2", True, False) not in sm90       # wgmma: 8-bit K-major only
    assert ("float8_e4m3fn", "float8_e5m2", True, True) in sm100           # tcgen05 reads MN-major 8-bit
    assert ("int8", "int8", False, False) in sm100 and not any(f[0] == "int8" for f in sm103)  # no kind::i8
    assert not any(f[0] == "int8" for f in sm90)
    assert sm103 == {f for f in sm100 if f[0] != "int8"}
    with pytest.raises(ValueError, match="arch"):
        ext.load()[0].kernel_families("sm_80")


def test_k_major_only_dtypes_are_derived():
    assert set(arch.k_major_dtypes("sm_90a")) == {F32, E4M3, E5M2}
    assert set(arch.k_major_dtypes("sm_100a")) == {F32}


@pytest.mark.parametrize("a,b,am,bm,arch_name,why", [
    (BF16, BF16, "MN", "MN", "sm_90a", ""),
    (E4M3, E5M2, "K", "K", "sm_90a", ""),
    (E4M3, E4M3, "MN", "K", "sm_90a", "no sm_90a kernel reads float8_e4m3fn (MN-major)"),
    (E4M3, E4M3, "MN", "K", "sm_100a", ""),
    (I8, I8, "K", "K", "sm_90a", "no sm_90a kernel for int8 x int8 (compiled: bfloat16 x bfloat16"),
    (I8, I8, "K", "MN", "sm_100a", ""),
    (I8, I8, "K", "K", "sm_103a", "no sm_103a kernel for int8 x int8"),
    (F32, F32, "MN", "K", "sm_100a", "no sm_100a kernel reads float32 (MN-major)"),
    (BF16, F16, "K", "K", "sm_90a", "no sm_90a kernel for bfloat16 x float16"),
])
def test_check_names_the_missing_family(a, b, am, bm, arch_name, why):
    got = arch.check(arch_name, _canon_of(am, bm), a, b, F32, True)
    assert (got == "") if not why else got.startswith(why), got


def test_check_other_rules():
    c = _canon_of("K", "K")
    assert "precision HIGH/HIGHEST" in arch.check("sm_90a", c, F32, F32, F32, False)
    assert "output dtype float8_e4m3fn" in arch.check("sm_90a", c, BF16, BF16, E4M3, True)
    odd = _canon.canonicalize((64, 100), (100, 64), (((1,), (0,)), ((), ())))  # 200-byte rows
    assert "row pitch of 200 bytes is not a multiple of 16" in arch.check("sm_90a", odd, BF16, BF16, F32, True)


def test_legality_comes_from_the_launchers_check():
    """The TMA/size rules are the launchers' own C++ check (legality.h), asked through the extension:
    a single-row operand takes any pitch, an unbatched or broadcast operand any batch stride, a strided
    batch needs 16-byte strides, and every dimension must be < 2^31."""
    from jax_tmem._core import ext as _ext
    mod, why = _ext.load()
    assert mod is not None, why
    legal = lambda **kw: mod.kernel_legality(**{**dict(a_dtype="bfloat16", b_dtype="bfloat16", batch=1, m=64,
                                                       n=64, k=64, a_mn_major=False, b_mn_major=False, lda=64,
                                                       ldb=64, stride_a=0, stride_b=0), **kw})
    assert legal() == ""
    assert legal(lda=100) == "lhs row pitch of 200 bytes is not a multiple of 16 (TMA)"
    assert legal(m=1, lda=100) == ""  # one row: the pitch is never stepped
    assert legal(ldb=68, b_dtype="float8_e4m3fn") == "rhs row pitch of 68 bytes is not a multiple of 16 (TMA)"
    assert legal(stride_a=4100) == ""  # batch 1: the stride is never used
    assert legal(batch=2, stride_a=4100) == "lhs batch stride of 8200 bytes is not a multiple of 16 (TMA)"
    assert legal(batch=2, stride_b=0) == ""  # a broadcast weight
    assert legal(k=2**31, lda=2**31, ldb=2**31) == "a dimension is >= 2^31"
    with pytest.raises(ValueError, match="unknown a_dtype"):
        legal(a_dtype="int32")
