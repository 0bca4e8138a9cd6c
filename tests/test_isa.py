"""Host-side (CPU, no GPU) tests of the tcgen05 / wgmma encoders exposed by ``jax_tmem.isa``.

Every expected value is worked out by hand from the PTX ISA tables as summarized in
/work/shared/reference/blackwell_tcgen05.md (sections 4, 5, 6, 2/3/9.1/13): either a literal hex
constant with its field breakdown in a comment, or an explicit OR of shifted fields written here.
No shared encoder is used to compute an expectation.

Instruction descriptor, dense kinds (f16, tf32, f8f6f4, i8), reference §5.1:
    bits 4-5 D format (F16=0, F32=1, S32=2) | 7-9 A format | 10-12 B format | 15 A major (1 = MN)
    16 B major (1 = MN) | 17-22 N >> 3 | 24-28 M >> 4
Instruction descriptor, block-scaled kinds (mxf8f6f4, mxf4, mxf4nvf4), reference §5.2:
    bits 4-5 SF-B id | 7-9 A format | 10-12 B format | 15/16 majors | 17-22 N >> 3
    23 scale type (UE8M0 = 1, UE4M3 = 0) | 27-28 M >> 7 | 29-30 SF-A id
Shared-memory descriptor, reference §6:
    bits 0-13 start >> 4 | 16-29 LBO >> 4 | 32-45 SBO >> 4 | 46 = 1 (sm100 only) | 49-51 base offset
    sm100 61-63 layout: none 0, 128B 2, 64B 4, 32B 6;  sm90 62-63: none 0, 128B 1, 64B 2, 32B 3
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from jax_tmem import isa
from jax_tmem._core import ext as _ext

try:  # the encoders need the C++ extension (a CPU build is enough)
    isa.instr_desc("f16", "bfloat16", "bfloat16", "float32", 128, 256)
except RuntimeError as e:  # pragma: no cover - depends on the install
    pytest.skip(f"jax_tmem C++ extension not available: {e}", allow_module_level=True)


def idesc(kind, a, b, acc="float32", m=128, n=256, **kw):
    return isa.instr_desc(kind, a, b, acc, m, n, **kw)


E8M0 = "float8_e8m0fnu"   # UE8M0 scale dtype
UE4M3 = "float8_e4m3fn"   # UE4M3 scale dtype (NVFP4)

# N=256 -> (256 >> 3) = 32 at bit 17 = 0x00400000; M=128 -> (128 >> 4) = 8 at bit 24 = 0x08000000.
N256_M128 = (32 << 17) | (8 << 24)
assert N256_M128 == 0x08400000


# ================================ worked examples (reference §5, §6.1) ================================

def test_worked_example_bf16_f32_m128_n256():
    # D F32 (1 << 4 = 0x10) | A BF16 (1 << 7 = 0x80) | B BF16 (1 << 10 = 0x400)
    # | N 256 >> 3 = 32 << 17 = 0x00400000 | M 128 >> 4 = 8 << 24 = 0x08000000
    assert idesc("f16", "bfloat16", "bfloat16", "float32", 128, 256) == 0x08400490


def test_worked_example_mxf8f6f4_e4m3_ue8m0_m128_n256():
    # SF-B id 0 | A E4M3 0 | B E4M3 0 | N 32 << 17 = 0x00400000 | scale UE8M0 1 << 23 = 0x00800000
    # | M 128 >> 7 = 1 << 27 = 0x08000000 | SF-A id 0
    assert idesc("mxf8f6f4", "float8_e4m3fn", "float8_e4m3fn", m=128, n=256, scale_dtype=E8M0) == 0x08C00000


def test_worked_example_smem_desc_sm100():
    # start 0x400 >> 4 = 0x40 | LBO 16 >> 4 = 1 << 16 = 0x10000 | SBO 1024 >> 4 = 0x40 << 32
    # | bit 46 = 0x0000400000000000 | 128B layout code 2 << 61 = 0x4000000000000000
    assert isa.smem_desc(0x400, 16, 1024, 128, arch="sm100") == 0x4000404000010040


def test_worked_example_smem_desc_sm90():
    # same fields, no bit 46, 128B code 1 << 62 = 0x4000000000000000
    assert isa.smem_desc(0x400, 16, 1024, 128, arch="sm90") == 0x4000004000010040


def test_default_arch_is_sm100_and_results_are_ints():
    d = isa.smem_desc(0x400, 16, 1024, 128)
    assert type(d) is int and d == 0x4000404000010040
    i = idesc("f16", "bfloat16", "bfloat16")
    assert type(i) is int and i == 0x08400490


# ================================ dense kinds: format fields ================================

DENSE_FORMATS = [
    # kind, A, B, acc, expected (M128 N256 K-major = 0x08400000 | D << 4 | A << 7 | B << 10)
    ("f16", "float16", "float16", "float32", 0x08400000 | (1 << 4)),                        # 0x08400010
    ("f16", "float16", "float16", "float16", 0x08400000),                                   # D F16 = 0
    ("f16", "bfloat16", "bfloat16", "float32", 0x08400000 | (1 << 4) | (1 << 7) | (1 << 10)),  # 0x08400490
    ("f16", "bfloat16", "bfloat16", "float16", 0x08400000 | (1 << 7) | (1 << 10)),         # 0x08400480
    ("tf32", "float32", "float32", "float32", 0x08400000 | (1 << 4) | (2 << 7) | (2 << 10)),  # 0x08400910
    ("tf32", "tensorfloat32", "tensorfloat32", "float32", 0x08400910),
    ("f8f6f4", "float8_e4m3fn", "float8_e4m3fn", "float32", 0x08400000 | (1 << 4)),        # 0x08400010
    ("f8f6f4", "float8_e4m3fn", "float8_e5m2", "float32", 0x08400000 | (1 << 4) | (1 << 10)),  # 0x08400410
    ("f8f6f4", "float8_e5m2", "float8_e4m3fn", "float32", 0x08400000 | (1 << 4) | (1 << 7)),   # 0x08400090
    ("f8f6f4", "float8_e5m2", "float8_e5m2", "float32", 0x08400490),                       # 0x10|0x80|0x400
    ("f8f6f4", "float8_e4m3fn", "float8_e4m3fn", "float16", 0x08400000),                   # D F16 = 0
    ("f8f6f4", "float8_e5m2", "float8_e5m2", "float16", 0x08400000 | (1 << 7) | (1 << 10)),  # 0x08400480
    ("f8f6f4", "float6_e2m3fn", "float6_e2m3fn", "float32", 0x08400000 | (1 << 4) | (3 << 7) | (3 << 10)),  # 0x08400D90
    ("f8f6f4", "float6_e3m2fn", "float6_e3m2fn", "float32", 0x08400000 | (1 << 4) | (4 << 7) | (4 << 10)),  # 0x08401210
    ("f8f6f4", "float4_e2m1fn", "float4_e2m1fn", "float32", 0x08400000 | (1 << 4) | (5 << 7) | (5 << 10)),  # 0x08401690
    ("f8f6f4", "float8_e4m3fn", "float4_e2m1fn", "float32", 0x08400000 | (1 << 4) | (5 << 10)),             # 0x08401410
    ("f8f6f4", "float6_e2m3fn", "float8_e5m2", "float32", 0x08400000 | (1 << 4) | (3 << 7) | (1 << 10)),    # 0x08400590
    ("i8", "uint8", "uint8", "int32", 0x08400000 | (2 << 4)),                               # 0x08400020
    ("i8", "int8", "int8", "int32", 0x08400000 | (2 << 4) | (1 << 7) | (1 << 10)),        # 0x084004A0
    ("i8", "int8", "uint8", "int32", 0x08400000 | (2 << 4) | (1 << 7)),                   # 0x084000A0
    ("i8", "uint8", "int8", "int32", 0x08400000 | (2 << 4) | (1 << 10)),                  # 0x08400420
]


@pytest.mark.parametrize("kind,a,b,acc,expected", DENSE_FORMATS, ids=lambda v: str(v))
def test_dense_format_fields(kind, a, b, acc, expected):
    assert idesc(kind, a, b, acc) == expected


def test_dense_format_literals():
    # The same values as literal hex, to pin the hand arithmetic above.
    assert idesc("f16", "float16", "float16", "float32") == 0x08400010
    assert idesc("tf32", "float32", "float32", "float32") == 0x08400910
    assert idesc("f8f6f4", "float6_e2m3fn", "float6_e2m3fn") == 0x08400D90
    assert idesc("f8f6f4", "float6_e3m2fn", "float6_e3m2fn") == 0x08401210
    assert idesc("f8f6f4", "float4_e2m1fn", "float4_e2m1fn") == 0x08401690
    assert idesc("i8", "int8", "int8", "int32") == 0x084004A0
    # i8: no saturate (bit 3) and no negate bits (13/14)
    assert idesc("i8", "int8", "int8", "int32") & ((1 << 3) | (1 << 13) | (1 << 14)) == 0


def test_dtype_objects_are_accepted():
    # numpy / ml_dtypes dtype objects go through np.dtype(...).name.
    assert idesc("f16", ml_dtypes.bfloat16, ml_dtypes.bfloat16, np.float32) == 0x08400490
    assert idesc("f16", np.float16, np.dtype("float16"), np.float16) == 0x08400000
    assert idesc("tf32", np.float32, np.float32, np.float32) == 0x08400910
    assert idesc("f8f6f4", ml_dtypes.float8_e5m2, ml_dtypes.float8_e4m3fn, np.float32) == 0x08400090
    assert idesc("f8f6f4", ml_dtypes.float4_e2m1fn, ml_dtypes.float4_e2m1fn, np.float32) == 0x08401690
    assert idesc("i8", np.int8, np.uint8, np.int32) == 0x084000A0
    assert idesc("mxf8f6f4", ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fn, np.float32,
                 scale_dtype=ml_dtypes.float8_e8m0fnu) == 0x08C00000
    assert idesc("mxf4nvf4", ml_dtypes.float4_e2m1fn, ml_dtypes.float4_e2m1fn, np.float32,
                 scale_dtype=ml_dtypes.float8_e4m3fn) == 0x08400480


# ================================ majors (bits 15 / 16) ================================

MAJOR_BASES = [
    # kind, A, B, acc, scale, K-major base at M128 N256
    ("f16", "bfloat16", "bfloat16", "float32", None, 0x08400490),
    ("f16", "float16", "float16", "float16", None, 0x08400000),
    ("tf32", "float32", "float32", "float32", None, 0x08400910),
    ("f8f6f4", "float8_e4m3fn", "float8_e4m3fn", "float32", None, 0x08400010),
    ("f8f6f4", "float8_e5m2", "float8_e4m3fn", "float32", None, 0x08400090),
    ("i8", "int8", "int8", "int32", None, 0x084004A0),
    ("i8", "uint8", "uint8", "int32", None, 0x08400020),
    ("mxf8f6f4", "float8_e4m3fn", "float8_e4m3fn", "float32", E8M0, 0x08C00000),
    ("mxf8f6f4", "float8_e5m2", "float8_e5m2", "float32", E8M0, 0x08C00480),
]


@pytest.mark.parametrize("kind,a,b,acc,scale,base", MAJOR_BASES, ids=lambda v: str(v))
@pytest.mark.parametrize("a_major,b_major", [("K", "K"), ("MN", "K"), ("K", "MN"), ("MN", "MN")])
def test_major_bits(kind, a, b, acc, scale, base, a_major, b_major):
    expected = base | ((a_major == "MN") << 15) | ((b_major == "MN") << 16)
    assert idesc(kind, a, b, acc, a_major=a_major, b_major=b_major, scale_dtype=scale) == expected


def test_major_literals():
    # bf16 worked example with A MN-major: 0x08400490 | 0x8000; B MN-major: | 0x10000; both: | 0x18000
    assert idesc("f16", "bfloat16", "bfloat16", a_major="MN") == 0x08408490
    assert idesc("f16", "bfloat16", "bfloat16", b_major="MN") == 0x08410490
    assert idesc("f16", "bfloat16", "bfloat16", a_major="MN", b_major="MN") == 0x08418490
    # 8-bit A MN-major has no N restriction (Table 50 restricts transposed B only):
    # D F32 0x10 | A major 1 << 15 = 0x8000 | N 24 >> 3 = 3 << 17 = 0x60000 | M 8 << 24
    assert idesc("f8f6f4", "float8_e4m3fn", "float8_e4m3fn", n=24, a_major="MN") == 0x08068010
    # 8-bit B MN-major with N a multiple of 16 is fine: N 16 -> 2 << 17 = 0x40000, B major 0x10000
    assert idesc("f8f6f4", "float8_e4m3fn", "float8_e4m3fn", n=16, b_major="MN") == 0x08050010
    # M=256 pair: 8-bit MN-major B with N 32: 4 << 17 = 0x80000, M 16 << 24 = 0x10000000
    assert idesc("f8f6f4", "float8_e4m3fn", "float8_e4m3fn", m=256, n=32, b_major="MN") == 0x10090010
    # mxf8f6f4 MN-major B at N=16: 0x00800000 | 0x10000 | 0x40000 | 1 << 27
    assert idesc("mxf8f6f4", "float8_e4m3fn", "float8_e4m3fn", n=16, b_major="MN", scale_dtype=E8M0) == 0x08850000


# ================================ M / N fields ================================

def _legal_n(m):
    return range(16, 257, 16) if m == 256 else range(8, 257, 8)


@pytest.mark.parametrize("m", [64, 128, 256])
def test_dense_m_n_fields_all_legal(m):
    for n in _legal_n(m):
        expected = (1 << 4) | (1 << 7) | (1 << 10) | ((n >> 3) << 17) | ((m >> 4) << 24)
        assert idesc("f16", "bfloat16", "bfloat16", "float32", m, n) == expected, (m, n)
        expected = (1 << 4) | ((n >> 3) << 17) | ((m >> 4) << 24)
        assert idesc("f8f6f4", "float8_e4m3fn", "float8_e4m3fn", "float32", m, n) == expected, (m, n)
        expected = (1 << 4) | (2 << 7) | (2 << 10) | ((n >> 3) << 17) | ((m >> 4) << 24)
        assert idesc("tf32", "float32", "float32", "float32", m, n) == expected, (m, n)


def test_dense_m_n_edge_literals():
    # M64 N8: N 1 << 17 = 0x00020000 | M 4 << 24 = 0x04000000 | 0x490
    assert idesc("f16", "bfloat16", "bfloat16", m=64, n=8) == 0x04020490
    # M64 N256: 0x00400000 | 0x04000000 | 0x490
    assert idesc("f16", "bfloat16", "bfloat16", m=64, n=256) == 0x04400490
    # M128 N8: 0x00020000 | 0x08000000 | 0x490
    assert idesc("f16", "bfloat16", "bfloat16", m=128, n=8) == 0x08020490
    # M128 N248: 31 << 17 = 0x003E0000 | 0x08000000 | 0x490
    assert idesc("f16", "bfloat16", "bfloat16", m=128, n=248) == 0x083E0490
    # M256 N16: 2 << 17 = 0x00040000 | 16 << 24 = 0x10000000 | 0x490
    assert idesc("f16", "bfloat16", "bfloat16", m=256, n=16) == 0x10040490
    # M256 N256: 0x00400000 | 0x10000000 | 0x490
    assert idesc("f16", "bfloat16", "bfloat16", m=256, n=256) == 0x10400490
    # M256 N240: 30 << 17 = 0x003C0000
    assert idesc("f16", "bfloat16", "bfloat16", m=256, n=240) == 0x103C0490
    # The two 1-CTA sm100 tile widths (f32 acc, M128): N256 and N128 (16 << 17 = 0x00200000)
    assert idesc("f16", "bfloat16", "bfloat16", m=128, n=128) == 0x08200490
    assert idesc("f8f6f4", "float8_e4m3fn", "float8_e4m3fn", m=128, n=128) == 0x08200010


I8_LEGAL_CTA1 = [8, 16, 24, 32] + list(range(48, 257, 16))
I8_ILLEGAL_CTA1 = [0, 40, 56, 72, 88, 120, 200, 248, 264]


@pytest.mark.parametrize("m", [64, 128])
def test_i8_n_values_cta_group_1(m):
    for n in I8_LEGAL_CTA1:
        expected = (2 << 4) | (1 << 7) | (1 << 10) | ((n >> 3) << 17) | ((m >> 4) << 24)
        assert idesc("i8", "int8", "int8", "int32", m, n) == expected, n
    for n in I8_ILLEGAL_CTA1:
        with pytest.raises(ValueError):
            idesc("i8", "int8", "int8", "int32", m, n)


def test_i8_n_values_cta_pair():
    for n in range(32, 257, 32):
        expected = (2 << 4) | (1 << 7) | (1 << 10) | ((n >> 3) << 17) | (16 << 24)
        assert idesc("i8", "int8", "int8", "int32", 256, n) == expected, n
    for n in (8, 16, 24, 48, 80, 240):
        with pytest.raises(ValueError, match="multiple of 32"):
            idesc("i8", "int8", "int8", "int32", 256, n)
    # literals: M64 N24 u8: 0x20 | 3 << 17 = 0x60000 | 4 << 24 = 0x04000000
    assert idesc("i8", "uint8", "uint8", "int32", 64, 24) == 0x04060020
    # M256 N32 s8: 0x4A0 | 4 << 17 = 0x80000 | 0x10000000
    assert idesc("i8", "int8", "int8", "int32", 256, 32) == 0x100804A0


@pytest.mark.parametrize("m", [128, 256])
def test_block_scaled_m_n_fields_all_legal(m):
    for n in _legal_n(m):
        # mxf8f6f4 e4m3: scale UE8M0 bit 23 | N >> 3 at 17 | M >> 7 at 27
        expected = (1 << 23) | ((n >> 3) << 17) | ((m >> 7) << 27)
        assert idesc("mxf8f6f4", "float8_e4m3fn", "float8_e4m3fn", "float32", m, n, scale_dtype=E8M0) == expected
        # M >> 7 at bit 27 == M >> 4 at bit 24 for the legal block-scaled M values
        assert ((m >> 7) << 27) == ((m >> 4) << 24)
        # mxf4: E2M1 = 1 at bits 7 and 10
        expected = (1 << 7) | (1 << 10) | (1 << 23) | ((n >> 3) << 17) | ((m >> 7) << 27)
        assert idesc("mxf4", "float4_e2m1fn", "float4_e2m1fn", "float32", m, n, scale_dtype=E8M0) == expected
        # mxf4nvf4 UE4M3: bit 23 = 0
        expected = (1 << 7) | (1 << 10) | ((n >> 3) << 17) | ((m >> 7) << 27)
        assert idesc("mxf4nvf4", "float4_e2m1fn", "float4_e2m1fn", "float32", m, n, scale_dtype=UE4M3) == expected


def test_block_scaled_m256_literals():
    # mxf8f6f4 M256 N256: 0x00800000 | 0x00400000 | 256 >> 7 = 2 << 27 = 0x10000000
    assert idesc("mxf8f6f4", "float8_e4m3fn", "float8_e4m3fn", m=256, n=256, scale_dtype=E8M0) == 0x10C00000
    # mxf4nvf4 UE4M3 M256 N256: 0x480 | 0x00400000 | 0x10000000
    assert idesc("mxf4nvf4", "float4_e2m1fn", "float4_e2m1fn", m=256, n=256, scale_dtype=UE4M3) == 0x10400480
    # mxf8f6f4 M128 N8: 0x00800000 | 1 << 17 = 0x20000 | 0x08000000
    assert idesc("mxf8f6f4", "float8_e4m3fn", "float8_e4m3fn", m=128, n=8, scale_dtype=E8M0) == 0x08820000
    # no bits in 24-26 (reserved) for block-scaled
    assert idesc("mxf8f6f4", "float8_e4m3fn", "float8_e4m3fn", m=256, n=256, scale_dtype=E8M0) & (7 << 24) == 0


# ================================ block-scaled kinds ================================

def test_mxf8f6f4_formats():
    # scale UE8M0 0x00800000 | N256 0x00400000 | M128 0x08000000 = 0x08C00000; formats at 7-9 / 10-12
    assert idesc("mxf8f6f4", "float8_e5m2", "float8_e4m3fn", scale_dtype=E8M0) == 0x08C00000 | (1 << 7)   # 0x08C00080
    assert idesc("mxf8f6f4", "float8_e4m3fn", "float8_e5m2", scale_dtype=E8M0) == 0x08C00000 | (1 << 10)  # 0x08C00400
    assert idesc("mxf8f6f4", "float8_e5m2", "float8_e5m2", scale_dtype=E8M0) == 0x08C00480
    assert idesc("mxf8f6f4", "float6_e2m3fn", "float6_e2m3fn", scale_dtype=E8M0) == 0x08C00000 | (3 << 7) | (3 << 10)  # 0x08C00D80
    assert idesc("mxf8f6f4", "float6_e3m2fn", "float6_e3m2fn", scale_dtype=E8M0) == 0x08C00000 | (4 << 7) | (4 << 10)  # 0x08C01200
    # E2M1 is 5 under mxf8f6f4 (padded 4-bit), not 1
    assert idesc("mxf8f6f4", "float4_e2m1fn", "float4_e2m1fn", scale_dtype=E8M0) == 0x08C00000 | (5 << 7) | (5 << 10)  # 0x08C01680
    assert idesc("mxf8f6f4", "float4_e2m1fn", "float4_e2m1fn", scale_dtype=E8M0) == 0x08C01680
    assert idesc("mxf8f6f4", "float8_e4m3fn", "float6_e3m2fn", scale_dtype=E8M0) == 0x08C01000  # B 4 << 10


@pytest.mark.parametrize("sfa", [0, 1, 2, 3])
@pytest.mark.parametrize("sfb", [0, 1, 2, 3])
def test_mxf8f6f4_sf_ids(sfa, sfb):
    expected = 0x08C00000 | (sfa << 29) | (sfb << 4)
    assert idesc("mxf8f6f4", "float8_e4m3fn", "float8_e4m3fn", sfa_id=sfa, sfb_id=sfb, scale_dtype=E8M0) == expected


def test_mxf8f6f4_sf_id_literals():
    # sfa 3 -> 3 << 29 = 0x60000000; sfb 3 -> 3 << 4 = 0x30
    assert idesc("mxf8f6f4", "float8_e4m3fn", "float8_e4m3fn", sfa_id=3, sfb_id=3, scale_dtype=E8M0) == 0x68C00030
    # sfa 1 -> 0x20000000; sfb 2 -> 0x20
    assert idesc("mxf8f6f4", "float8_e4m3fn", "float8_e4m3fn", sfa_id=1, sfb_id=2, scale_dtype=E8M0) == 0x28C00020
    # sfa 0, sfb 1 -> 0x10: a dense F32 D-format bit would look exactly like this, so sf 0 must give bit 4 = 0
    assert idesc("mxf8f6f4", "float8_e4m3fn", "float8_e4m3fn", sfb_id=1, scale_dtype=E8M0) == 0x08C00010
    assert idesc("mxf8f6f4", "float8_e4m3fn", "float8_e4m3fn", scale_dtype=E8M0) & (3 << 4) == 0


@pytest.mark.parametrize("sfa", [0, 2])
@pytest.mark.parametrize("sfb", [0, 2])
@pytest.mark.parametrize("kind", ["mxf4", "mxf4nvf4"])
def test_mxf4_kinds_ue8m0_sf_ids(kind, sfa, sfb):
    # E2M1 = 1 at 7 and 10 (0x480) | UE8M0 1 << 23 | N256 | M128 | sfa << 29 | sfb << 4
    expected = (1 << 7) | (1 << 10) | (1 << 23) | (32 << 17) | (1 << 27) | (sfa << 29) | (sfb << 4)
    assert idesc(kind, "float4_e2m1fn", "float4_e2m1fn", sfa_id=sfa, sfb_id=sfb, scale_dtype=E8M0) == expected


def test_mxf4_kinds_literals():
    # mxf4 UE8M0, ids 0: 0x480 | 0x00800000 | 0x00400000 | 0x08000000
    assert idesc("mxf4", "float4_e2m1fn", "float4_e2m1fn", scale_dtype=E8M0) == 0x08C00480
    # ids 2/2: | 2 << 29 = 0x40000000 | 2 << 4 = 0x20
    assert idesc("mxf4", "float4_e2m1fn", "float4_e2m1fn", sfa_id=2, sfb_id=2, scale_dtype=E8M0) == 0x48C004A0
    # mxf4nvf4 UE8M0 (2X / block32), ids 0 and 2
    assert idesc("mxf4nvf4", "float4_e2m1fn", "float4_e2m1fn", scale_dtype=E8M0) == 0x08C00480
    assert idesc("mxf4nvf4", "float4_e2m1fn", "float4_e2m1fn", sfa_id=2, sfb_id=0, scale_dtype=E8M0) == 0x48C00480
    assert idesc("mxf4nvf4", "float4_e2m1fn", "float4_e2m1fn", sfa_id=0, sfb_id=2, scale_dtype=E8M0) == 0x08C004A0
    # mxf4nvf4 UE4M3 (NVFP4, 4X / block16): bit 23 = 0, ids 0 -> 0x480 | 0x00400000 | 0x08000000
    assert idesc("mxf4nvf4", "float4_e2m1fn", "float4_e2m1fn", scale_dtype=UE4M3) == 0x08400480
    # mxf4nvf4 UE4M3 M128 N128: 16 << 17 = 0x00200000
    assert idesc("mxf4nvf4", "float4_e2m1fn", "float4_e2m1fn", n=128, scale_dtype=UE4M3) == 0x08200480


# ================================ invalid instruction descriptors ================================

BAD_IDESC = [
    # (args, kwargs, regex naming the rule)
    (("f16", "bfloat16", "bfloat16", "float32", 256, 200), {}, "multiple of 16 for M=256"),
    (("f16", "bfloat16", "bfloat16", "float32", 256, 8), {}, "multiple of 16 for M=256"),
    (("tf32", "float32", "float32", "float32", 256, 24), {}, "multiple of 16 for M=256"),
    (("mxf8f6f4", "float8_e4m3fn", "float8_e4m3fn", "float32", 256, 200), {"scale_dtype": E8M0},
     "multiple of 16 for M=256"),
    (("f16", "bfloat16", "bfloat16", "float32", 128, 12), {}, "multiple of 8"),
    (("f16", "bfloat16", "bfloat16", "float32", 128, 0), {}, "multiple of 8"),
    (("f16", "bfloat16", "bfloat16", "float32", 64, 4), {}, "multiple of 8"),
    (("f16", "bfloat16", "bfloat16", "float32", 128, 264), {}, "N must be <= 256"),
    (("f16", "bfloat16", "bfloat16", "float32", 128, 512), {}, "N must be <= 256"),
    (("f16", "bfloat16", "bfloat16", "float32", 256, 272), {}, "N must be <= 256"),
    (("f16", "bfloat16", "bfloat16", "float32", 96, 128), {}, "M must be 64 or 128"),
    (("f16", "bfloat16", "bfloat16", "float32", 32, 128), {}, "M must be 64 or 128"),
    (("f16", "bfloat16", "bfloat16", "float32", 512, 128), {}, "M must be 64 or 128"),
    (("mxf8f6f4", "float8_e4m3fn", "float8_e4m3fn", "float32", 64, 128), {"scale_dtype": E8M0},
     "M must be 128.*block-scaled"),
    (("mxf4", "float4_e2m1fn", "float4_e2m1fn", "float32", 64, 128), {"scale_dtype": E8M0},
     "M must be 128.*block-scaled"),
    (("mxf4nvf4", "float4_e2m1fn", "float4_e2m1fn", "float32", 64, 128), {"scale_dtype": UE4M3},
     "M must be 128.*block-scaled"),
    # K-major only
    (("mxf4", "float4_e2m1fn", "float4_e2m1fn", "float32", 128, 128), {"a_major": "MN", "scale_dtype": E8M0},
     "K-major A and B only"),
    (("mxf4", "float4_e2m1fn", "float4_e2m1fn", "float32", 128, 128), {"b_major": "MN", "scale_dtype": E8M0},
     "K-major A and B only"),
    (("mxf4nvf4", "float4_e2m1fn", "float4_e2m1fn", "float32", 128, 128), {"a_major": "MN", "scale_dtype": UE4M3},
     "K-major A and B only"),
    (("mxf4nvf4", "float4_e2m1fn", "float4_e2m1fn", "float32", 128, 128), {"b_major": "MN", "scale_dtype": E8M0},
     "K-major A and B only"),
    (("f8f6f4", "float4_e2m1fn", "float4_e2m1fn", "float32", 128, 128), {"a_major": "MN"}, "must be K-major"),
    (("f8f6f4", "float4_e2m1fn", "float4_e2m1fn", "float32", 128, 128), {"b_major": "MN"}, "must be K-major"),
    (("f8f6f4", "float6_e2m3fn", "float6_e2m3fn", "float32", 128, 128), {"a_major": "MN"}, "must be K-major"),
    (("f8f6f4", "float6_e3m2fn", "float6_e3m2fn", "float32", 128, 128), {"b_major": "MN"}, "must be K-major"),
    (("f8f6f4", "float8_e4m3fn", "float4_e2m1fn", "float32", 128, 128), {"b_major": "MN"}, "must be K-major"),
    (("mxf8f6f4", "float4_e2m1fn", "float4_e2m1fn", "float32", 128, 128), {"a_major": "MN", "scale_dtype": E8M0},
     "must be K-major"),
    (("mxf8f6f4", "float6_e2m3fn", "float6_e2m3fn", "float32", 128, 128), {"b_major": "MN", "scale_dtype": E8M0},
     "must be K-major"),
    # 8-bit MN-major B: N multiple of 16 (cta_group::1) / 32 (pair)
    (("f8f6f4", "float8_e4m3fn", "float8_e4m3fn", "float32", 128, 24), {"b_major": "MN"},
     "MN-major 8-bit B needs N a multiple of 16"),
    (("f8f6f4", "float8_e5m2", "float8_e5m2", "float32", 64, 8), {"b_major": "MN"},
     "MN-major 8-bit B needs N a multiple of 16"),
    (("f8f6f4", "float8_e4m3fn", "float8_e4m3fn", "float32", 128, 248), {"b_major": "MN"},
     "MN-major 8-bit B needs N a multiple of 16"),
    (("i8", "int8", "int8", "int32", 128, 24), {"b_major": "MN"}, "MN-major 8-bit B needs N a multiple of 16"),
    (("mxf8f6f4", "float8_e4m3fn", "float8_e4m3fn", "float32", 128, 8), {"b_major": "MN", "scale_dtype": E8M0},
     "MN-major 8-bit B needs N a multiple of 16"),
    (("f8f6f4", "float8_e4m3fn", "float8_e4m3fn", "float32", 256, 48), {"b_major": "MN"},
     "multiple of 32 for M=256"),
    # kind::i8 N grid
    (("i8", "int8", "int8", "int32", 128, 40), {}, "8, 16, 24, 32 or a multiple of 16"),
    (("i8", "uint8", "uint8", "int32", 64, 56), {}, "8, 16, 24, 32 or a multiple of 16"),
    (("i8", "int8", "int8", "int32", 256, 48), {}, "multiple of 32 in \\[32, 256\\] for kind::i8 with M=256"),
    # operand types
    (("f16", "float16", "bfloat16", "float32", 128, 128), {}, "same type"),
    (("f16", "bfloat16", "float16", "float32", 128, 128), {}, "same type"),
    (("f16", "float8_e4m3fn", "float8_e4m3fn", "float32", 128, 128), {}, "not an operand type of kind::f16"),
    (("f16", "bfloat16", "float32", "float32", 128, 128), {}, "b_dtype float32 is not an operand type of kind::f16"),
    (("tf32", "bfloat16", "bfloat16", "float32", 128, 128), {}, "not an operand type of kind::tf32"),
    (("i8", "float8_e4m3fn", "int8", "int32", 128, 128), {}, "a_dtype float8_e4m3fn is not an operand type of kind::i8"),
    (("f8f6f4", "int8", "int8", "float32", 128, 128), {}, "not an operand type of kind::f8f6f4"),
    (("mxf4", "float8_e4m3fn", "float8_e4m3fn", "float32", 128, 128), {"scale_dtype": E8M0},
     "not an operand type of kind::mxf4"),
    (("mxf4nvf4", "float6_e2m3fn", "float6_e2m3fn", "float32", 128, 128), {"scale_dtype": E8M0},
     "not an operand type of kind::mxf4nvf4"),
    (("mxf8f6f4", "float8_e8m0fnu", "float8_e4m3fn", "float32", 128, 128), {"scale_dtype": E8M0},
     "not an operand type of kind::mxf8f6f4"),
    # accumulator dtype per kind
    (("tf32", "float32", "float32", "float16", 128, 128), {}, "kind::tf32 accumulates in float32"),
    (("i8", "int8", "int8", "float32", 128, 128), {}, "kind::i8 accumulates in int32"),
    (("i8", "uint8", "uint8", "float16", 128, 128), {}, "kind::i8 accumulates in int32"),
    (("f16", "bfloat16", "bfloat16", "int32", 128, 128), {}, "only kind::i8"),
    (("f8f6f4", "float8_e4m3fn", "float8_e4m3fn", "int32", 128, 128), {}, "only kind::i8"),
    (("f16", "bfloat16", "bfloat16", "float64", 128, 128), {}, "acc_dtype must be"),
    (("f16", "bfloat16", "bfloat16", "bfloat16", 128, 128), {}, "acc_dtype must be"),
    (("mxf8f6f4", "float8_e4m3fn", "float8_e4m3fn", "float16", 128, 128), {"scale_dtype": E8M0},
     "block-scaled kinds accumulate in float32"),
    (("mxf4nvf4", "float4_e2m1fn", "float4_e2m1fn", "bfloat16", 128, 128), {"scale_dtype": UE4M3},
     "block-scaled kinds accumulate in float32"),
    # scales
    (("mxf8f6f4", "float8_e4m3fn", "float8_e4m3fn", "float32", 128, 128), {}, "need scale_dtype"),
    (("mxf4", "float4_e2m1fn", "float4_e2m1fn", "float32", 128, 128), {}, "need scale_dtype"),
    (("mxf4nvf4", "float4_e2m1fn", "float4_e2m1fn", "float32", 128, 128), {}, "need scale_dtype"),
    (("mxf8f6f4", "float8_e4m3fn", "float8_e4m3fn", "float32", 128, 128), {"scale_dtype": UE4M3},
     "not valid for kind::mxf8f6f4"),
    (("mxf4", "float4_e2m1fn", "float4_e2m1fn", "float32", 128, 128), {"scale_dtype": UE4M3},
     "not valid for kind::mxf4"),
    (("mxf4nvf4", "float4_e2m1fn", "float4_e2m1fn", "float32", 128, 128), {"scale_dtype": "float32"},
     "not valid for kind::mxf4nvf4"),
    (("f16", "bfloat16", "bfloat16", "float32", 128, 128), {"scale_dtype": E8M0}, "only for block-scaled"),
    (("f8f6f4", "float8_e4m3fn", "float8_e4m3fn", "float32", 128, 128), {"sfa_id": 1}, "only for block-scaled"),
    (("i8", "int8", "int8", "int32", 128, 128), {"sfb_id": 2}, "only for block-scaled"),
    # sf ids
    (("mxf8f6f4", "float8_e4m3fn", "float8_e4m3fn", "float32", 128, 128), {"sfa_id": 4, "scale_dtype": E8M0},
     "must be <= 3"),
    (("mxf8f6f4", "float8_e4m3fn", "float8_e4m3fn", "float32", 128, 128), {"sfb_id": 7, "scale_dtype": E8M0},
     "must be <= 3"),
    (("mxf4", "float4_e2m1fn", "float4_e2m1fn", "float32", 128, 128), {"sfa_id": 1, "scale_dtype": E8M0},
     "must be 0 or 2"),
    (("mxf4", "float4_e2m1fn", "float4_e2m1fn", "float32", 128, 128), {"sfb_id": 3, "scale_dtype": E8M0},
     "must be <= 2"),
    (("mxf4", "float4_e2m1fn", "float4_e2m1fn", "float32", 128, 128), {"sfa_id": 4, "scale_dtype": E8M0},
     "must be <= 2"),
    (("mxf4nvf4", "float4_e2m1fn", "float4_e2m1fn", "float32", 128, 128), {"sfb_id": 1, "scale_dtype": E8M0},
     "must be 0 or 2"),
    (("mxf4nvf4", "float4_e2m1fn", "float4_e2m1fn", "float32", 128, 128), {"sfa_id": 2, "scale_dtype": UE4M3},
     "must be 0 with UE4M3"),
    (("mxf4nvf4", "float4_e2m1fn", "float4_e2m1fn", "float32", 128, 128), {"sfb_id": 2, "scale_dtype": UE4M3},
     "must be 0 with UE4M3"),
    # unknown kind / major
    (("f64", "float32", "float32", "float32", 128, 128), {}, "kind must be one of"),
    (("fp8", "float8_e4m3fn", "float8_e4m3fn", "float32", 128, 128), {}, "kind must be one of"),
    (("F16", "float16", "float16", "float32", 128, 128), {}, "kind must be one of"),
    (("f16", "bfloat16", "bfloat16", "float32", 128, 128), {"a_major": "k"}, "a_major must be 'K' or 'MN'"),
    (("f16", "bfloat16", "bfloat16", "float32", 128, 128), {"a_major": "M"}, "a_major must be 'K' or 'MN'"),
    (("f16", "bfloat16", "bfloat16", "float32", 128, 128), {"b_major": "N"}, "b_major must be 'K' or 'MN'"),
    (("f16", "bfloat16", "bfloat16", "float32", 128, 128), {"b_major": "T"}, "b_major must be 'K' or 'MN'"),
]


@pytest.mark.parametrize("args,kwargs,rule", BAD_IDESC, ids=[f"{a[0]}-{r[:30]}-{i}" for i, (a, k, r) in enumerate(BAD_IDESC)])
def test_invalid_instr_desc(args, kwargs, rule):
    with pytest.raises(ValueError, match=rule):
        isa.instr_desc(*args, **kwargs)


def test_n_over_256_rejected_for_every_kind():
    with pytest.raises(ValueError, match="N must be <= 256"):
        idesc("tf32", "float32", "float32", n=264)
    with pytest.raises(ValueError, match="N must be <= 256"):
        idesc("f8f6f4", "float8_e4m3fn", "float8_e4m3fn", n=264)
    with pytest.raises(ValueError, match="N must be <= 256"):
        idesc("i8", "int8", "int8", "int32", n=272)
    with pytest.raises(ValueError, match="N must be <= 256"):
        idesc("mxf4", "float4_e2m1fn", "float4_e2m1fn", n=264, scale_dtype=E8M0)
    with pytest.raises(ValueError, match="N must be <= 256"):
        idesc("mxf8f6f4", "float8_e4m3fn", "float8_e4m3fn", m=256, n=512, scale_dtype=E8M0)


# ================================ shared-memory descriptors ================================

# start 0x400, LBO 16, SBO 1024: 0x40 | 1 << 16 | 0x40 << 32 = 0x0000004000010040
FIELDS_400_16_1024 = (0x400 >> 4) | ((16 >> 4) << 16) | ((1024 >> 4) << 32)
assert FIELDS_400_16_1024 == 0x0000004000010040

SWIZZLES = [
    # swizzle, sm100 (3-bit code << 61, | bit 46), sm90 (2-bit code << 62)
    (0, 0x0000404000010040, 0x0000004000010040),      # code 0 / 0
    (32, 0xC000404000010040, 0xC000004000010040),     # 6 << 61 = 0xC000.. / 3 << 62 = 0xC000..
    (64, 0x8000404000010040, 0x8000004000010040),     # 4 << 61 = 0x8000.. / 2 << 62 = 0x8000..
    (128, 0x4000404000010040, 0x4000004000010040),    # 2 << 61 = 0x4000.. / 1 << 62 = 0x4000..
]


@pytest.mark.parametrize("swizzle,sm100,sm90", SWIZZLES)
def test_smem_desc_every_swizzle(swizzle, sm100, sm90):
    code100 = {0: 0, 32: 6, 64: 4, 128: 2}[swizzle]
    code90 = {0: 0, 32: 3, 64: 2, 128: 1}[swizzle]
    assert sm100 == FIELDS_400_16_1024 | (1 << 46) | (code100 << 61)
    assert sm90 == FIELDS_400_16_1024 | (code90 << 62)
    d100 = isa.smem_desc(0x400, 16, 1024, swizzle, arch="sm100")
    d90 = isa.smem_desc(0x400, 16, 1024, swizzle, arch="sm90")
    assert d100 == sm100
    assert d90 == sm90
    assert (d100 >> 46) & 1 == 1
    assert (d90 >> 46) & 1 == 0
    assert (d100 >> 61) == code100
    assert (d90 >> 62) == code90
    assert (d90 >> 61) & 1 == 0  # sm90 never sets bit 61 (the sm100 128B_BASE32B code)


def test_smem_desc_start_address_field():
    # start 0x3FFF0 = 2^18 - 16 -> 0x3FFF (all 14 bits), nothing else but the fixed bit 46 on sm100
    assert isa.smem_desc(0x3FFF0, 0, 0, 0, arch="sm100") == 0x0000400000003FFF
    assert isa.smem_desc(0x3FFF0, 0, 0, 0, arch="sm90") == 0x0000000000003FFF
    assert isa.smem_desc(0x10, 0, 0, 0, arch="sm90") == 0x1
    assert isa.smem_desc(0, 0, 0, 0, arch="sm90") == 0x0
    assert isa.smem_desc(0, 0, 0, 0, arch="sm100") == 1 << 46
    # 0x12340 >> 4 = 0x1234
    assert isa.smem_desc(0x12340, 0, 0, 0, arch="sm90") == 0x1234


def test_smem_desc_lbo_sbo_fields():
    # LBO 2^18 - 16 -> 0x3FFF << 16 = 0x3FFF0000
    assert isa.smem_desc(0, 0x3FFF0, 0, 0, arch="sm90") == 0x000000003FFF0000
    # SBO 2^18 - 16 -> 0x3FFF << 32
    assert isa.smem_desc(0, 0, 0x3FFF0, 0, arch="sm90") == 0x00003FFF00000000
    # LBO 0x1230 -> 0x123 << 16, SBO 0x4560 -> 0x456 << 32
    assert isa.smem_desc(0, 0x1230, 0x4560, 0, arch="sm90") == 0x0000045601230000
    assert isa.smem_desc(0, 0x1230, 0x4560, 0, arch="sm100") == 0x0000445601230000


def test_smem_desc_all_fields_saturated_do_not_overlap():
    # start/LBO/SBO 0x3FFF0 -> 0x3FFF each, base offset 7 -> 7 << 49 = 0x000E000000000000
    # sm90 128B: 1 << 62 = 0x4000000000000000 -> 0x400E3FFF3FFF3FFF
    assert isa.smem_desc(0x3FFF0, 0x3FFF0, 0x3FFF0, 128, arch="sm90", base_offset=7) == 0x400E3FFF3FFF3FFF
    # sm100 128B: + bit 46 (0x0000400000000000) -> 0x400E7FFF3FFF3FFF
    assert isa.smem_desc(0x3FFF0, 0x3FFF0, 0x3FFF0, 128, arch="sm100", base_offset=7) == 0x400E7FFF3FFF3FFF
    # sm100 32B: 6 << 61 = 0xC000000000000000 -> 0xC00E7FFF3FFF3FFF
    assert isa.smem_desc(0x3FFF0, 0x3FFF0, 0x3FFF0, 32, arch="sm100", base_offset=7) == 0xC00E7FFF3FFF3FFF


@pytest.mark.parametrize("arch,fixed", [("sm100", (1 << 46) | (2 << 61)), ("sm90", 1 << 62)])
def test_smem_desc_base_offset(arch, fixed):
    for bo in range(8):
        expected = FIELDS_400_16_1024 | fixed | (bo << 49)
        assert isa.smem_desc(0x400, 16, 1024, 128, arch=arch, base_offset=bo) == expected
    # literal: base offset 5 -> 5 << 49 = 0x000A000000000000
    assert isa.smem_desc(0x400, 16, 1024, 128, arch="sm100", base_offset=5) == 0x400A404000010040
    assert isa.smem_desc(0x400, 16, 1024, 128, arch="sm90", base_offset=1) == 0x4002004000010040


@pytest.mark.parametrize("arch", ["sm100", "sm90"])
@pytest.mark.parametrize("swizzle", [0, 32, 64, 128])
def test_smem_desc_k_step_advance(arch, swizzle):
    # K-major: one MMA consumes 32 bytes of each row -> +32 B start = +2 in the low 14-bit field,
    # every other field unchanged (reference §6.3).
    for start in (0x400, 0x8000, 0x1C000, 0x3FF00):
        d0 = isa.smem_desc(start, 16, 1024, swizzle, arch=arch)
        for j in range(4):
            assert isa.smem_desc(start + 32 * j, 16, 1024, swizzle, arch=arch) - d0 == 2 * j
    # literal: bf16 worked example k-step 3: 0x40 + 6 = 0x46
    if arch == "sm100" and swizzle == 128:
        assert isa.smem_desc(0x400 + 96, 16, 1024, 128) == 0x4000404000010046


def test_smem_desc_mn_major_kernel_values():
    # 16-bit MN-major (BLOCK_K = 64): atom 64 elements x 64 K-rows -> LBO 64 * 128 = 8192, SBO 1024, 128B.
    # start 0x8000 >> 4 = 0x800 | 8192 >> 4 = 0x200 << 16 = 0x02000000 | 1024 >> 4 = 0x40 << 32 | bit 46 | 2 << 61
    assert isa.smem_desc(0x8000, 8192, 1024, 128, arch="sm100") == 0x4000404002000800
    # 8-bit MN-major (BLOCK_K = 128): LBO 128 * 128 = 16384 -> 0x400 << 16 = 0x04000000
    assert isa.smem_desc(0x8000, 16384, 1024, 128, arch="sm100") == 0x4000404004000800
    # Hopper kernels use the same LBO 8192 / SBO 1024 with the 2-bit 128B code
    assert isa.smem_desc(0x8000, 8192, 1024, 128, arch="sm90") == 0x4000004002000800
    # MN-major K step: UMMA_K rows x 128 B: 16-bit 16 x 128 = 2048 B -> +0x80; 8-bit 32 x 128 = 4096 B -> +0x100
    d16 = isa.smem_desc(0x8000, 8192, 1024, 128)
    d8 = isa.smem_desc(0x8000, 16384, 1024, 128)
    for j in range(4):
        assert isa.smem_desc(0x8000 + 2048 * j, 8192, 1024, 128) == d16 + 0x80 * j
        assert isa.smem_desc(0x8000 + 4096 * j, 16384, 1024, 128) == d8 + 0x100 * j
    assert isa.smem_desc(0x8000 + 3 * 2048, 8192, 1024, 128) == 0x4000404002000980
    # K-major kernel operand: LBO 16, SBO 1024 at a 1024-aligned stage base 0x10400 -> 0x1040
    assert isa.smem_desc(0x10400, 16, 1024, 128) == 0x4000404000011040


BAD_SMEM = [
    ((0x408, 16, 1024, 128), {}, "start_addr must be a multiple of 16"),
    ((0x401, 16, 1024, 128), {"arch": "sm90"}, "start_addr must be a multiple of 16"),
    ((0x400, 8, 1024, 128), {}, "lbo must be a multiple of 16"),
    ((0x400, 16, 1000, 128), {}, "sbo must be a multiple of 16"),
    ((1 << 18, 16, 1024, 128), {}, "start_addr must be < 2\\^18"),
    ((0x40400, 16, 1024, 128), {"arch": "sm90"}, "start_addr must be < 2\\^18"),
    ((0x400, 1 << 18, 1024, 128), {}, "lbo must be < 2\\^18"),
    ((0x400, 16, 1 << 18, 128), {}, "sbo must be < 2\\^18"),
    ((0x400, 16, 1024, 128), {"base_offset": 8}, "base_offset must be in \\[0, 7\\]"),
    ((0x400, 16, 1024, 128), {"base_offset": 8, "arch": "sm90"}, "base_offset must be in \\[0, 7\\]"),
    ((0x400, 16, 1024, 16), {}, "swizzle_bytes must be 0, 32, 64 or 128"),
    ((0x400, 16, 1024, 16), {"arch": "sm90"}, "swizzle_bytes must be 0, 32, 64 or 128"),
    ((0x400, 16, 1024, 256), {}, "swizzle_bytes must be 0, 32, 64 or 128"),
    ((0x400, 16, 1024, 1), {"arch": "sm90"}, "swizzle_bytes must be 0, 32, 64 or 128"),
    ((0x400, 16, 1024, 128), {"arch": "sm80"}, "arch must be 'sm100' or 'sm90'"),
    ((0x400, 16, 1024, 128), {"arch": "sm_100"}, "arch must be 'sm100' or 'sm90'"),
]


@pytest.mark.parametrize("args,kwargs,rule", BAD_SMEM, ids=[f"{r[:24]}-{i}" for i, (a, k, r) in enumerate(BAD_SMEM)])
def test_invalid_smem_desc(args, kwargs, rule):
    with pytest.raises(ValueError, match=rule):
        isa.smem_desc(*args, **kwargs)


# ================================ TMEM plan ================================

def _decode_kn_only(e) -> bool:
    """A decode entry that reads a (K, N) weight only: 128-row CTAs (31: fp8's 128-byte k-rows), or the mma.sync form
    with its K split over a cluster (54)."""
    return e["split"] == "decode" and (e["block_m"] > 64 or (e["cluster_m"] > 1 and e["schedule"] != "wgmma"))


def test_kernel_menus_come_from_the_config_tables():
    """isa.kernel_menu is the dispatcher's own table (sm90_configs.def / sm100_configs.def, no Python copy
    to drift), with each entry's fields; what an entry is comes from its fields, not its id."""
    sm90 = isa.kernel_menu("sm_90a")
    sm100 = isa.kernel_menu("sm_100a")
    assert [e["config"] for e in sm90] == [0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 20, 22, 24, 11, 12, 13, 14, 18, 19, 35, 36,
                                           38, 39, 40, 41, 48, 49, 50, 37, 15, 16, 17, 25, 26, 27, 28, 29, 30, 31, 32,
                                           33, 34, 51, 52, 53, 54]
    assert [e["config"] for e in sm100] == [0, 1, 4, 8, 9, 11, 12, 13, 14]
    assert isa.kernel_menu("sm_103a") == sm100
    assert [e["config"] for e in sm90 if e["swap_ab"]] == [11, 12, 13, 18, 19, 35, 36, 38, 39, 40, 41, 48, 49, 50, 37,
                                                           15, 16, 17]
    assert [e["block_m"] for e in sm90 if e["swap_ab"]] == [128] * 12 + [192, 192, 128] + [64] * 3
    assert [e["cluster_m"] for e in sm90 if e["swap_ab"]] == [1] * 6 + [2, 1, 1, 4, 1, 1, 1, 1, 4] + [1] * 3
    assert [e["cluster_n"] for e in sm90 if e["swap_ab"]] == [1] * 8 + [2, 1, 1, 2, 1, 2] + [1] * 4
    assert all(e["cluster_n"] == 1 for e in sm100)
    assert [e["config"] for e in sm100 if e["split_k"]] == [11, 12, 13, 14]
    pair = {e["config"]: e for e in sm100}[4]
    assert pair["name"] == "256x256 CTA pair (cta_group::2)" and (pair["block_m"], pair["cluster_m"]) == (256, 2)
    by_entry = {e["entry"]: e for e in sm90}
    assert by_entry["k128x256TmaStore"]["epilogue"] == "tma-store" and by_entry["k128x256TmaStore"]["block_n"] == 256
    assert by_entry["k128x256TmaStoreOverlap"]["epilogue"] == "tma-store-overlap"
    assert by_entry["k128x128PingPong"]["schedule"] == "ping-pong"
    assert by_entry["k128x128Cluster2"]["cluster_m"] == 2
    assert [e["block_n"] for e in sm90 if e["swap_ab"]] == [16, 32, 64, 128, 256, 192, 192, 96, 96, 160, 80, 80, 80,
                                                            80, 192, 16, 32, 64]
    assert [(e["config"], e["block_m"], e["block_n"]) for e in sm90 if e["split"] == "decode"] == [
        (25, 16, 8), (26, 16, 16), (27, 32, 16), (28, 64, 8), (29, 64, 16), (30, 64, 8), (31, 128, 8), (32, 64, 16),
        (33, 64, 32), (34, 64, 64), (51, 64, 16), (52, 64, 32), (53, 64, 64), (54, 64, 8)]
    assert [e["config"] for e in sm90 if e["schedule"] == "wgmma"] == [32, 33, 34, 51, 52, 53]
    # 51-54: 32-34 and 28 with the K range over a cluster of 2 CTAs (forced only)
    assert [(e["cluster_m"], e["candidate"]) for e in sm90 if e["config"] in (51, 52, 53, 54)] == [(2, True)] * 4
    for e in sm90 + sm100:
        assert e["split_k"] == (e["split"] not in ("none", "decode")) == (e["epilogue"] == "partial"), e
        assert e["swap_ab"] == (e["split"] == "swap-ab"), e
        # always compiled if the heuristic may choose it or it is a candidate; the rest with JAX_TMEM_CONFIGS=all
        assert not (e["heuristic"] and e["candidate"]), e
        assert e["built"] == (e["heuristic"] or e["candidate"] or _ext.build_info()["configs"] == "all"), e
    for e in sm90 + sm100:  # each entry is one the plan accepts when forced (31, 54: on an fp8 (K, N) weight only)
        kw = dict(a_dtype="float8_e4m3fn", b_mn_major=True) if _decode_kn_only(e) else {}
        arch = "sm_90a" if e in sm90 else "sm_100a"
        assert isa.kernel_plan(arch, 512, 512, 512, config=e["config"], **kw)["config"] == e["config"]
    with pytest.raises(ValueError, match="arch"):
        isa.kernel_menu("sm_80")


def test_block_scaled_menu_comes_from_its_table():
    """isa.block_scaled_menu is the sm_90a block-scaled dispatcher's table (sm90_block_scaled_configs.def);
    the tcgen05 block-scaled kernels are kernel_menu entries, so their list is empty."""
    sm90 = isa.block_scaled_menu("sm_90a")
    assert [e["config"] for e in sm90] == [0, 1, 2, 3, 4]
    assert [(e["block_m"], e["block_n"], e["stages"]) for e in sm90] == [(128, 128, 6), (128, 64, 8), (128, 128, 6),
                                                                          (128, 128, 6), (128, 256, 2)]
    assert [e["schedule"] for e in sm90] == ["plain", "plain", "ordered", "pipelined", "widened"]
    assert all(e["name"].startswith(f"128x{e['block_n']}, ") for e in sm90)
    assert isa.block_scaled_menu("sm_100a") == [] == isa.block_scaled_menu("sm_103a")
    with pytest.raises(ValueError, match="arch"):
        isa.block_scaled_menu("sm_80")


@pytest.mark.parametrize("arch,sms", [("sm_90a", 132), ("sm_100a", 148), ("sm_100a", 160)])
def test_heuristic_only_chooses_heuristic_entries(arch, sms):
    """What the build compiles by default (the entries marked kHeuristic) covers every plan the heuristic
    makes: a grid of shapes, dtypes, layouts and output types, including decode (16-bit x fp8 too) and split-K."""
    heuristic = {e["config"] for e in isa.kernel_menu(arch) if e["heuristic"]}
    chosen = set()
    for m in (1, 16, 17, 33, 64, 65, 128, 160, 176, 200, 1000, 2048, 4096, 8192):
        for n in (8, 128, 1001, 4096, 4097, 6144, 16384, 28672):
            for k in (64, 4096, 65536):
                for dt, bdt in (("bfloat16", None), ("float8_e4m3fn", None), ("float32", None), ("int8", None),
                                ("bfloat16", "float8_e4m3fn")):
                    for out in ("bfloat16", "float32"):
                        for mn, bmn in ((False, False), (True, False), (False, True)):
                            c = isa.kernel_plan(arch, m, n, k, a_dtype=dt, out_dtype=out, a_mn_major=mn,
                                                b_mn_major=bmn, num_sms=sms, b_dtype=bdt)["config"]
                            assert c in heuristic, (arch, m, n, k, dt, bdt, out, mn, bmn, c)
                            chosen.add(c)
    assert chosen == heuristic, f"entries marked kHeuristic that the heuristic never chooses: {heuristic - chosen}"


def test_forcing_an_entry_outside_the_build_raises_at_trace_time():
    """A sweep-only entry forced on a build without it: a ValueError naming the rebuild flag (the plan
    itself, isa.kernel_plan, knows every entry)."""
    from jax_tmem._core import arch as _arch, canon as _canon
    canon = _canon.Canon(batch=1, m=256, n=256, k=256, a_mn_major=False, b_mn_major=False, lda=256, ldb=256,
                         stride_a=0, stride_b=0, out_shape=(256, 256))
    kn = dataclasses.replace(canon, b_mn_major=True)  # (entries 31 / 54 read fp8 / (K, N) weights only)
    for e in isa.kernel_menu("sm_90a"):
        c, dt = (kn, "float8_e4m3fn") if _decode_kn_only(e) else (canon, "bfloat16")
        if e["built"]:
            assert _arch.kernel_plan("sm_90a", c, dt, e["config"], "bfloat16")[0] == e["config"]
        else:
            with pytest.raises(ValueError, match="JAX_TMEM_CONFIGS=all"):
                _arch.kernel_plan("sm_90a", c, dt, e["config"], "bfloat16")


def test_entry_reads_is_the_extensions_operand_rule():
    """isa.entry_reads, which the GPU tests ask before forcing an entry: the decode entries' operand rule
    (C++ menu::mma_decode_reads: a K-major lhs; 16-bit pairs of one type or fp8; a (K, N) weight in k-rows
    of 32-128 bytes, an (N, K) one in CTAs of <= 64 rows, not by the mma.sync entry in clusters), the compiled
    families, swap-AB's K-major lhs; and a forced call refused by the same rule at trace time."""
    menu = {e["config"]: e for e in isa.kernel_menu("sm_90a")}
    decode = [c for c, e in menu.items() if e["split"] == "decode"]
    assert decode, "the sm_90a menu has decode entries"
    bf16, e4m3, e5m2 = "bfloat16", "float8_e4m3fn", "float8_e5m2"
    for c in decode:
        bm = menu[c]["block_m"]
        assert (isa.entry_reads("sm_90a", c, bf16, bf16) == "") is not _decode_kn_only(menu[c])
        assert (isa.entry_reads("sm_90a", c, bf16, bf16, b_mn_major=True) == "") is (32 <= 2 * bm <= 128)
        assert (isa.entry_reads("sm_90a", c, e4m3, e4m3, b_mn_major=True) == "") is (32 <= bm <= 128)
        assert "K-major lhs" in isa.entry_reads("sm_90a", c, bf16, bf16, a_mn_major=True)
        assert isa.entry_reads("sm_90a", c, "float32", "float32") != ""
        assert "no sm_90a kernel family" in isa.entry_reads("sm_90a", c, bf16, "float16")
        assert "no sm_90a kernel family" in isa.entry_reads("sm_90a", c, e5m2, e4m3, b_mn_major=True)
    swap = next(c for c, e in menu.items() if e["swap_ab"])
    assert "K-major" in isa.entry_reads("sm_90a", swap, bf16, bf16, a_mn_major=True)
    assert isa.entry_reads("sm_90a", swap, e4m3, e4m3, b_mn_major=True) == ""  # the transposing swap-AB
    dense = next(c for c, e in menu.items() if e["split"] == "none" and not e["swap_ab"])
    assert "decode and swap-AB entries only" in isa.entry_reads("sm_90a", dense, e4m3, e4m3, b_mn_major=True)
    assert isa.entry_reads("sm_90a", dense, bf16, bf16, a_mn_major=True, b_mn_major=True) == ""
    assert "not an sm_90a menu entry" in isa.entry_reads("sm_90a", 999, bf16, bf16)


# The 1-CTA tile widths of the sm100 menu (128x256 and 128x128, two accumulator buffers each).
@pytest.mark.parametrize("block_n,alloc,offsets", [(256, 512, [0, 256]), (128, 256, [0, 128])])
def test_tmem_plan_menu_configs(block_n, alloc, offsets):
    p = isa.tmem_plan(block_n, 2, block_m=128)
    assert p == {"acc_cols": block_n, "acc_offsets": offsets, "sfa_cols": 0, "sfb_cols": 0,
                 "sfa_offsets": [], "sfb_offsets": [], "used_cols": alloc, "alloc_cols": alloc, "ctas_per_sm": 1}


def test_tmem_plan_literal_menu():
    p = isa.tmem_plan(256)  # default acc_stages = 2
    assert (p["acc_offsets"], p["used_cols"], p["alloc_cols"]) == ([0, 256], 512, 512)
    p = isa.tmem_plan(128)
    assert (p["acc_offsets"], p["used_cols"], p["alloc_cols"]) == ([0, 128], 256, 256)
    p = isa.tmem_plan(128, 3)
    assert (p["acc_offsets"], p["used_cols"], p["alloc_cols"]) == ([0, 128, 256], 384, 512)


SF_BUDGETS = [
    # block_n, k_tile, sf_vec, sfa_cols, sfb_cols  (cols = 4 * ceil(K / (4 * VS)) * ceil(rows / 128))
    (128, 128, 32, 4, 4),     # MXFP8 K=128: 4 * ceil(128 / 128) = 4
    (128, 256, 32, 8, 8),     # MXFP4 K=256: 4 * ceil(256 / 128) = 8
    (128, 256, 16, 16, 16),   # NVFP4 K=256, VS 16: 4 * ceil(256 / 64) = 16
    (256, 128, 32, 4, 8),     # SFB for N=256 = 2 x SFA
    (256, 256, 32, 8, 16),
    (256, 256, 16, 16, 32),
    (192, 128, 32, 4, 8),     # N=192 rounds up to 256 rows of SFB
    (64, 128, 32, 4, 4),      # N=64 rounds up to 128
    (128, 64, 32, 4, 4),      # K=64: ceil(64 / 128) = 1 group of 4
    (128, 512, 32, 16, 16),   # K=512: 4 * 4
]


@pytest.mark.parametrize("block_n,k_tile,sf_vec,sfa,sfb", SF_BUDGETS)
def test_tmem_plan_scale_factor_budget(block_n, k_tile, sf_vec, sfa, sfb):
    p = isa.tmem_plan(block_n, 1, block_m=128, k_tile=k_tile, sf_vec=sf_vec, sf_stages=1)
    assert p["sfa_cols"] == sfa
    assert p["sfb_cols"] == sfb
    assert p["acc_offsets"] == [0]
    assert p["sfa_offsets"] == [block_n]
    assert p["sfb_offsets"] == [block_n + sfa]
    assert p["used_cols"] == block_n + sfa + sfb


def test_tmem_plan_scale_factor_stages_layout():
    # MXFP8, block_n 128, 2 acc stages, 2 SF stages: acc [0, 128]; SFA at 256, 260; SFB at 264, 268
    p = isa.tmem_plan(128, 2, block_m=128, k_tile=128, sf_vec=32, sf_stages=2)
    assert p["acc_offsets"] == [0, 128]
    assert p["sfa_offsets"] == [256, 260]
    assert p["sfb_offsets"] == [264, 268]
    assert p["used_cols"] == 256 + 2 * (4 + 4)  # 272
    assert p["alloc_cols"] == 512
    # NVFP4 block_n 128 K 256, 4 SF stages: 256 + 4 * (16 + 16) = 384 -> alloc 512
    p = isa.tmem_plan(128, 2, block_m=128, k_tile=256, sf_vec=16, sf_stages=4)
    assert p["sfa_offsets"] == [256, 272, 288, 304]
    assert p["sfb_offsets"] == [320, 336, 352, 368]
    assert (p["used_cols"], p["alloc_cols"]) == (384, 512)
    # the block-scaled kernels' own plans (cpp/src/sm100_block_scaled.cu: BLOCK_N 128, 2 accumulators, one SF
    # region per stage of the 6-stage ring, a k-block = one 128-byte row: 128 8-bit or 256 4-bit elements)
    for k_tile, sf_vec, per_stage in ((128, 32, 8), (256, 32, 16), (256, 16, 32)):  # MXFP8, MXFP4, NVFP4
        p = isa.tmem_plan(128, 2, block_m=128, k_tile=k_tile, sf_vec=sf_vec, sf_stages=6)
        assert (p["used_cols"], p["alloc_cols"]) == (256 + 6 * per_stage, 512), (k_tile, sf_vec)
    # dense plans carry no SF region even if sf_stages is given
    p = isa.tmem_plan(128, 2, sf_stages=4)
    assert (p["sfa_cols"], p["sfb_cols"], p["sfa_offsets"], p["sfb_offsets"], p["used_cols"]) == (0, 0, [], [], 256)


@pytest.mark.parametrize("block_n,stages,used,alloc", [
    (8, 1, 8, 32), (8, 4, 32, 32), (16, 2, 32, 32), (24, 2, 48, 64), (40, 1, 40, 64), (64, 1, 64, 64),
    (64, 2, 128, 128), (72, 2, 144, 256), (136, 1, 136, 256), (256, 1, 256, 256), (192, 2, 384, 512),
    (128, 4, 512, 512), (248, 2, 496, 512),
])
def test_tmem_plan_alloc_rounds_to_power_of_two(block_n, stages, used, alloc):
    p = isa.tmem_plan(block_n, stages)
    assert p["used_cols"] == used
    assert p["alloc_cols"] == alloc
    assert p["acc_offsets"] == [block_n * s for s in range(stages)]


def test_tmem_plan_ctas_per_sm():
    # 2 CTAs x 256 allocated columns = 512: fits
    p = isa.tmem_plan(128, 2, ctas_per_sm=2)
    assert (p["alloc_cols"], p["ctas_per_sm"]) == (256, 2)
    # 136 columns round to 256: 2 x 256 = 512 still fits; 4 x 128 = 512 fits
    assert isa.tmem_plan(136, 1, ctas_per_sm=2)["alloc_cols"] == 256
    assert isa.tmem_plan(128, 1, ctas_per_sm=4)["alloc_cols"] == 128
    # 2 x 512 would deadlock in tcgen05.alloc
    with pytest.raises(ValueError, match="exceeds 512"):
        isa.tmem_plan(256, 2, ctas_per_sm=2)
    with pytest.raises(ValueError, match="block in tcgen05.alloc"):
        isa.tmem_plan(256, 1, ctas_per_sm=3)
    # 3 x 256 (used 136 rounds to 256) > 512
    with pytest.raises(ValueError, match="exceeds 512"):
        isa.tmem_plan(136, 1, ctas_per_sm=3)
    with pytest.raises(ValueError, match="ctas_per_sm must be >= 1"):
        isa.tmem_plan(128, 1, ctas_per_sm=0)


def test_tmem_plan_invalid():
    # 2 x 256 accumulators + MXFP8 scale factors (4 + 8) = 524 > 512
    with pytest.raises(ValueError, match="exceed the 512 TMEM columns"):
        isa.tmem_plan(256, 2, block_m=128, k_tile=128, sf_vec=32, sf_stages=1)
    # 3 x 256 = 768
    with pytest.raises(ValueError, match="exceed the 512 TMEM columns"):
        isa.tmem_plan(256, 3)
    # 2 x 264 = 528
    with pytest.raises(ValueError, match="exceed the 512 TMEM columns"):
        isa.tmem_plan(264, 2)
    # 128 x 2 + NVFP4 K=256 x 8 SF stages: 256 + 8 * 32 = 512 fits exactly; 9 stages do not
    assert isa.tmem_plan(128, 2, k_tile=256, sf_vec=16, sf_stages=8)["used_cols"] == 512
    with pytest.raises(ValueError, match="exceed the 512 TMEM columns"):
        isa.tmem_plan(128, 2, k_tile=256, sf_vec=16, sf_stages=9)
    with pytest.raises(ValueError, match="multiple of 8"):
        isa.tmem_plan(12, 2)
    with pytest.raises(ValueError, match="multiple of 8"):
        isa.tmem_plan(100, 1)
    with pytest.raises(ValueError, match="no accumulator"):
        isa.tmem_plan(128, 0)
    with pytest.raises(ValueError, match="no accumulator"):
        isa.tmem_plan(0, 2)


# ============ overflow guards (found by these tests: 32-bit wrap-around in the planner) ============

def test_tmem_plan_rejects_uint32_overflow():
    # 2 x 2^31 accumulator columns are far more than the 512 TMEM columns of an SM.
    with pytest.raises(ValueError, match="512"):
        isa.tmem_plan(2 ** 31, 2)


def test_tmem_plan_huge_sf_vec_does_not_crash():
    # In a subprocess: the old bug (4 * vec_size wrapping to 0) killed the interpreter with SIGFPE.
    code = ("from jax_tmem import isa\n"
            "try:\n"
            "    isa.tmem_plan(128, 2, k_tile=128, sf_vec=2 ** 30, sf_stages=1)\n"
            "    print('accepted')\n"
            "except ValueError as e:\n"
            "    print('ValueError', e)\n")
    r = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (r.returncode, r.stderr[-500:])
    assert r.stdout.startswith("ValueError")


@pytest.mark.parametrize("lbo,swizzle", [(16, 128), (8192, 128)])
def test_sm90_descriptor_stepping_matches_reencoding(lbo, swizzle):
    """The sm_90a kernels encode one descriptor per operand and step it by adding (offset >> 4)
    (desc::sm90_desc_advance): over every 16-byte step of a 227 KB shared-memory window this must equal
    re-encoding the advanced address (no carry out of the 14-bit address field)."""
    base = isa.smem_desc(0, lbo, 1024, swizzle, arch="sm90")
    for addr in range(0, 232448 + 1024, 16):
        assert isa.smem_desc(addr, lbo, 1024, swizzle, arch="sm90") == base + (addr >> 4)


# ================================ kernel menus: the heuristic ================================
# The same C++ code the CUDA dispatchers call (cpp/include/jax_tmem/menu.h); H200 = 132 SMs, B200 = 148.

SM90_NAMES = {0: "128x128 cooperative", 1: "128x256 cooperative", 2: "128x64 cooperative",
              8: "128x256 cooperative, TMA-store epilogue", 9: "128x128 cooperative, TMA-store epilogue",
              20: "128x256 cooperative, TMA-store epilogue under the next tile's MMAs",
              22: "128x256 cooperative, 2x1 cluster, B multicast, TMA-store epilogue under the next tile's MMAs",
              11: "swap-AB 128(N)x16(M), split-K", 12: "swap-AB 128(N)x32(M), split-K",
              13: "swap-AB 128(N)x64(M), split-K", 14: "128x128 cooperative, split-K",
              15: "swap-AB 64(N)x16(M), 512 B rows, split-K", 16: "swap-AB 64(N)x32(M), 512 B rows, split-K",
              17: "swap-AB 64(N)x64(M), 512 B rows, split-K",
              48: "swap-AB 128(N)x80(M), split-K, 1x2 cluster, weight multicast",
              25: "decode 16(N)x8(M), mma.sync, K over 4 warps",
              26: "decode 16(N)x16(M), mma.sync, K over 4 warps", 27: "decode 32(N)x16(M), mma.sync, K over 4 warps",
              28: "decode 64(N)x8(M), mma.sync + ldmatrix.trans, K over 4 chunks",
              29: "decode 64(N)x16(M), mma.sync + ldmatrix.trans, K over 4 chunks",
              30: "decode 64(N)x8(M), mma.sync + ldmatrix.trans, K over 4 chunks, 3 stages",
              31: "decode 128(N)x8(M), mma.sync + ldmatrix.trans, K over 4 chunks, 2 stages",
              32: "decode 64(N)x16(M), wgmma with register A, K over 4 warpgroups",
              33: "decode 64(N)x32(M), wgmma with register A, K over 4 warpgroups",
              34: "decode 64(N)x64(M), wgmma with register A, K over 4 warpgroups, 3 stages"}


@pytest.mark.parametrize("m,n,k,batch,out,expect", [
    (8192, 8192, 8192, 1, "bfloat16", 20),   # 64 x 32 = 2048 tiles of 128x256 >= 132: the widest tile
    (4096, 4096, 4096, 1, "bfloat16", 22),   # 32 x 16 = 512 (116 left: whole tiles, in 2x1 clusters)
    (2048, 2048, 2048, 1, "bfloat16", 20),   # 16 x 8 = 128 tiles of 128x256: one wave, 97 % of the SMs
    (4224, 4096, 4096, 1, "bfloat16", 20),   # 33 tile rows (4 whole waves): no idle half cluster
    (4096, 4096, 4096, 1, "float32", 20),    # f32 out: the cluster only where it measured (16-bit)
    (128, 8192, 8192, 1, "bfloat16", 2),    # 32 / 64 / 128 tiles: 24 / 48 / 97 % x 0.85 (a 64-wide tile)
    (128, 57344, 8192, 1, "bfloat16", 20),   # 224 / 448 / 896 tiles: 85 / 85 / 97 % x 0.85: the widest of equals
    (256, 28672, 4096, 1, "bfloat16", 20),
    (256, 8192, 8192, 1, "bfloat16", 9),    # 64 / 128 tiles: 128x128 (the old rule: 128x64, 0.87 x XLA)
    (256, 57344, 8192, 1, "bfloat16", 9),   # 448 tiles of 128x256 = 3.4 waves (85 %); 896 of 128x128: 97 %
    (256, 10240, 8192, 1, "bfloat16", 2),   # 80 / 160 / 320 tiles: 61 / 61 / 81 % -> the fullest waves
    (256, 6144, 4096, 1, "bfloat16", 9),    # 48 / 96 / 192 tiles: 36 / 73 / 73 % -> the widest of equals
    (64, 8192, 8192, 1, "bfloat16", 13),    # decode, M <= 64: swap-AB, the narrowest wgmma N that holds M
    (33, 8192, 8192, 1, "bfloat16", 13),
    (32, 8192, 8192, 1, "bfloat16", 16),    # M <= 32: 64-row tiles, 512-byte weight rows
    (17, 8192, 8192, 1, "bfloat16", 16),
    (16, 8192, 8192, 1, "bfloat16", 15),
    (8, 8192, 8192, 1, "bfloat16", 25),     # M <= 8, a 16-bit weight: the mma.sync decode entries
    (1, 8192, 8192, 1, "bfloat16", 25),
    (512, 512, 65536, 1, "bfloat16", 14),   # 32 tiles of 128x64 <= 132 / 4 and 1024 K blocks: split-K
    (128, 8192, 14336, 1, "bfloat16", 2),   # 128 tiles > 132 / 4: no split, however long K (224 K blocks)
    # 16-bit weights at 65-128 tokens: the 128-row swap-AB entry's 2 x 32 tiles of 64 tokens, 2 K splits summed
    # in a cluster (sm90_cluster_decode) where they fit on the SMs; 6144 wide: 2 x 48 x 2 > 132 SMs; K >= 8192: 48's
    # weight-multicast pairs (test_sm90_pairs_128_tokens)
    (128, 4096, 4096, 1, "bfloat16", 13), (128, 4096, 14336, 1, "bfloat16", 48), (128, 6144, 4096, 1, "bfloat16", 2),
    (256, 256, 64, 66, "bfloat16", 20),      # batch counts: 66 x 2 x 1 = 132 tiles of 128x256
    (8192, 8196, 8192, 1, "bfloat16", 1),   # rows of 16392 bytes: no TMA store, the register epilogue
    (8192, 8196, 8192, 1, "float32", 20),    # the same N in f32: 32784-byte rows, TMA store
    (2048, 2044, 2048, 1, "float16", 1),    # 128 tiles of 128x256, 4088-byte rows: the register epilogue
])
def test_sm90_heuristic(m, n, k, batch, out, expect):
    """Also: swap-AB needs a K-major lhs (see test_sm90_swap_ab_needs_k_major_lhs)."""
    cfg, name = isa.kernel_choice("sm_90a", m, n, k, batch=batch, num_sms=132, out_dtype=out)
    assert cfg == expect, (cfg, name)
    assert name == SM90_NAMES[expect]


@pytest.mark.parametrize("dtype,b_mn_major,expect,splits,m", [
    # 16-bit weights: 64 tiles of 64 rows, 2 K splits summed in clusters of 2 (sm90_cluster_decode)
    ("bfloat16", False, 15, -2, 16), ("bfloat16", True, 15, -2, 16), ("float8_e4m3fn", False, 15, 1, 16),
    # an fp8 (K, N) weight: the wgmma decode entry (register A built from the (K, N) tile, no splits) at
    # M 9-64; above, only the 128-row swap-AB entries transpose it in shared memory, and their busy
    # consumers keep split_count's K splits (32 tiles -> 4 splits, 128 CTAs)
    ("float8_e4m3fn", True, 32, 1, 16), ("float8_e4m3fn", True, 18, 4, 128),
])
def test_sm90_decode_entry_by_weight_layout(dtype, b_mn_major, expect, splits, m):
    plan = isa.kernel_plan("sm_90a", m, 4096, 4096, a_dtype=dtype, b_mn_major=b_mn_major, num_sms=132)
    assert (plan["config"], plan["splits"]) == (expect, splits), plan


def test_sm90_swap_ab_needs_k_major_lhs():
    cfg, _ = isa.kernel_choice("sm_90a", 16, 8192, 8192, num_sms=132, a_mn_major=True)
    assert cfg == 2


@pytest.mark.parametrize("m,n,k,dtype,splits", [
    (16, 8192, 8192, "bfloat16", 1),        # 128 swap tiles of 64 weight rows: over half the SMs, no split
    (16, 8192, 8192, "float8_e4m3fn", 1),
    (64, 8192, 8192, "bfloat16", 1),        # M = 64: the 128-row entry, 64 tiles: half the SMs already
    # 16-bit weights whose 64-row tiles x 2 fit on the SMs: those tiles, 2 K splits summed in a cluster
    # (sm90_cluster_decode; it replaces the 128-row entry's 32 tiles with 2 splits and a reduce pass, or 1)
    (64, 4096, 14336, "bfloat16", -2), (64, 4096, 4096, "bfloat16", -2), (32, 4096, 4096, "bfloat16", -2),
    (64, 4096, 4096, "float16", -2), (64, 6144, 4096, "bfloat16", 1),  # 96 tiles x 2 > 132 SMs
    (64, 4096, 4096, "float32", 2),         # tf32: not taken (measured on 16-bit weights only)
    (64, 4096, 14336, "float8_e4m3fn", 1),  # 8-bit weights: 64-row entries to M = 64, 64 tiles: no split
    (64, 1024, 4096, "float8_e4m3fn", 2),   # 16 tiles: 4 splits by the SMs, 2 by the 2 KB of a 4 KB row
    (64, 6144, 4096, "float8_e4m3fn", 1),   # 96 tiles
    (16, 4096, 4096, "float8_e4m3fn", 1),   # 64 tiles of 64 rows
    (16, 4096, 4096, "bfloat16", -2),       # 64 tiles of 64 rows: 2 splits summed in a cluster
    (16, 2048, 4096, "bfloat16", -2),
    (16, 32768, 8192, "bfloat16", 1),
    (16, 1024, 8192, "bfloat16", -2),       # 16 tiles: 2 splits by the 16 KB rows, now summed in a cluster
    (16, 256, 65536, "bfloat16", 8),        # 4 tiles: 16 by the SMs, capped at 8 (more CTAs than a cluster of 2)
    (8, 256, 65536, "bfloat16", 1),         # M <= 8: the mma.sync entries, no split
    (16, 256, 256, "bfloat16", 1),
    (512, 512, 65536, "bfloat16", 8),       # 16 tiles of 128x128
    (512, 512, 65536, "float32", 8),
])
def test_sm90_split_plan(m, n, k, dtype, splits):
    """The split count and the workspace Python allocates for the launcher: splits x M x N rounded up
    to 4, f32, in the output's orientation; none for one split (the kernel finishes the output itself)."""
    plan = isa.kernel_plan("sm_90a", m, n, k, a_dtype=dtype, num_sms=132)
    assert plan["splits"] == splits, plan
    assert plan["workspace_floats"] == (splits * m * ((n + 3) // 4 * 4) if splits > 1 else 0)


def test_sm90_cluster_decode_boundaries():
    """sm90_cluster_decode: 64-row tiles x 2 K splits summed in a cluster, only where they all fit on the
    SMs, give at least the CTAs of the plan they replace, and keep 16 K blocks of 128 bytes per split."""
    plan = lambda m, n, k, sms=132, **kw: isa.kernel_plan("sm_90a", m, n, k, num_sms=sms, **kw)
    assert (plan(64, 4096, 4096)["config"], plan(64, 4096, 4096)["splits"]) == (17, -2)
    assert plan(64, 4096, 4096, sms=114)["splits"] == 1    # 128 CTAs > 114 SMs: the 128-row entry, 1 split
    assert plan(64, 4224, 4096)["splits"] == -2 and plan(64, 4352, 4096)["splits"] == 1  # 66 / 68 tiles
    assert plan(64, 4096, 2048)["splits"] == -2            # 32 K blocks: 16 per split
    assert plan(64, 4096, 1984)["splits"] == 1             # 31 K blocks
    assert plan(16, 256, 65536)["splits"] == 8             # 4 tiles x 8 reduce-pass splits: more CTAs
    assert plan(64, 4096, 4096, batch=2)["splits"] == 1    # 2 x 64 tiles x 2 > 132
    assert plan(64, 4096, 4096, a_mn_major=True)["config"] not in (15, 16, 17)  # swap-AB needs a K-major lhs
    for m in (16, 32, 64, 128):  # fp8 weights keep their measured plans (no cluster)
        assert plan(m, 4096, 4096, a_dtype="float8_e4m3fn")["splits"] > 0
    # 65-128 tokens: the 128-row entry's 64-token tiles (2 x 32 x 2 splits = 128 CTAs), in place of 64 dense tiles
    for m in (65, 96, 128):
        assert (plan(m, 4096, 4096)["config"], plan(m, 4096, 4096)["splits"]) == (13, -2)
        assert plan(m, 4096, 4096, b_mn_major=True)["splits"] == -2  # a 16-bit (K, N) weight too
    assert plan(128, 4352, 4096)["config"] == 2  # 2 x 34 tiles x 2 splits = 136 CTAs (129-192: test_sm90_token_tiles)
    assert plan(128, 4096, 4096, a_mn_major=True)["config"] == 2  # swap-AB needs a K-major lhs
    assert plan(128, 2048, 4096)["config"] == 14  # 16 x 8 reduce-pass splits: more CTAs than 2 x 16 x 2


def test_candidate_entries_are_built_and_forcible_but_never_chosen():
    """The 192-token swap-AB entries: 35 alone, 36 / 37 in clusters of 2 / 4 weight tiles that multicast the tokens.
    35 and 36 are kCandidates (sm90_configs.def: compiled by the default build, forced only); 37 is the heuristic's,
    by its own rule only (test_sm90_wide_tokens). All three can be forced with K splits through the workspace; 35
    also with splits summed in the kernel (96 accumulators per thread), 36 / 37 not (their clusters are their own).
    39 / 48 (96 / 80 tokens wide, two token tiles in a pair sharing the weight by multicast) with splits summed in the
    kernel through the workspace (each split a pair of its own, as cuBLAS's 1x2 decode kernels).
    The heuristic's choice by width (ConfigTable::narrowest / widest) takes none of them: below #SMs weight tiles,
    129-192 tokens with an fp8 (K, N) weight keep entry 19."""
    menu = {e["config"]: e for e in isa.kernel_menu("sm_90a")}
    for c, cluster in ((35, 1), (36, 2), (37, 4)):
        e = menu[c]
        assert (e["block_n"], e["swap_ab"], e["heuristic"], e["candidate"], e["built"], e["cluster_m"]) == (
            192, True, c == 37, c != 37, True, cluster), e
        assert isa.entry_reads("sm_90a", c, "float8_e4m3fn", "float8_e4m3fn", b_mn_major=True) == ""
        p = isa.kernel_plan("sm_90a", 192, 4096, 4096, config=c, splits=3)
        assert (p["splits"], p["workspace_floats"] > 0) == (3, True), p
    assert isa.kernel_plan("sm_90a", 192, 4096, 4096, config=35, splits=-2)["splits"] == -2
    for c in (36, 37):
        with pytest.raises(ValueError, match="runs in clusters of its own: its K splits go through the workspace"):
            isa.kernel_plan("sm_90a", 192, 4096, 4096, config=c, splits=-2)
    for c, m, width in ((39, 192, 96), (48, 136, 80)):  # 32 weight tiles x 1 pair of token tiles
        for splits in (2, 5, 8):
            p = isa.kernel_plan("sm_90a", m, 4096, 14336, config=c, splits=-splits)
            slots = 32 * (splits - 1) * 2  # a slot of 128 x width f32 sums per CTA of each later split, and a flag
            assert (p["splits"], p["workspace_floats"]) == (-splits, slots * 128 * width + slots), p
        with pytest.raises(ValueError, match=r"at most 8 \(one cluster of CTAs per tile\), not 9"):
            isa.kernel_plan("sm_90a", m, 4096, 14336, config=c, splits=-9)
    for m in (129, 150, 192, 256):
        assert isa.kernel_plan("sm_90a", m, 8192, 4096, a_dtype="float8_e4m3fn", b_mn_major=True)["config"] == 19
        assert isa.kernel_plan("sm_90a", m, 4096, 4096)["config"] not in (35, 36, 37, 39)
    for c, width, cluster_n in ((38, 96, 1), (39, 96, 2), (41, 80, 1), (48, 80, 2)):  # alone (the heuristic's:
        e = menu[c]                          # test_sm90_token_tiles) / two token tiles sharing the weight (measured
        assert (e["block_n"], e["heuristic"], e["candidate"], e["cluster_m"], e["cluster_n"]) == (  # and lost: sweeps;
            width, True, False, 1, cluster_n), e        # 48 / 39 the rules at K >= 8192, 129-160 / 161-192 tokens)
        assert e["built"], e  # (39: the rule at K >= 8192, 161-192 tokens where 38 runs one split)
        assert isa.kernel_plan("sm_90a", 192, 4096, 4096, config=c, splits=1)["splits"] == 1
    # token tiles sized to 129-160 tokens: 40 = 37 160 wide, 41 = 38 80 wide, each by its rule (test_sm90_wide_tokens,
    # test_sm90_token_tiles)
    for c, width, cluster in ((40, 160, 4), (41, 80, 1)):
        e = menu[c]
        assert (e["block_n"], e["swap_ab"], e["heuristic"], e["candidate"], e["built"], e["cluster_m"]) == (
            width, True, True, False, True, cluster), e
        assert isa.entry_reads("sm_90a", c, "float8_e4m3fn", "float8_e4m3fn", b_mn_major=True) == ""
        assert isa.kernel_plan("sm_90a", 150, 4096, 4096, config=c, splits=3)["splits"] == 3
    assert isa.kernel_plan("sm_90a", 150, 4096, 4096, config=41, splits=-2)["splits"] == -2
    # 49: 192 weight rows x 80 tokens (three consumer warpgroups; cuBLAS's QKV tile at 160 tokens), sweeps only until
    # measured; its K splits summed in a cluster (40 accumulators per thread) or by the reduce pass
    e = menu[49]
    assert (e["block_m"], e["block_n"], e["swap_ab"], e["heuristic"], e["candidate"], e["cluster_m"]) == (
        192, 80, True, False, False, 1), e
    assert e["built"] == (_ext.build_info()["configs"] == "all"), e
    p = isa.kernel_plan("sm_90a", 150, 6144, 4096, config=49, splits=-2)
    assert (p["splits"], p["workspace_floats"]) == (-2, 0), p
    assert isa.kernel_plan("sm_90a", 150, 6144, 4096, config=49, splits=2)["workspace_floats"] == 2 * 150 * 6144
    with pytest.raises(ValueError, match="runs in clusters of its own"):
        isa.kernel_plan("sm_90a", 150, 4096, 4096, config=40, splits=-2)


def test_sm90_wide_tokens():
    """129-192 tokens against a weight of at least as many 128-row tiles as SMs (menu.h sm90_wide_tokens): entry 40
    at 129-160 tokens, 37 at 161-192 (swap-AB 160 / 192 tokens wide in clusters of 4 weight tiles, the tokens
    multicast), one split, no workspace, for 16-bit and 8-bit operands, the weight (N, K) or (K, N); at K >= 8192 also
    over half as many tiles as SMs, but an 8-bit (K, N) weight; not below 129 or above 192 tokens,
    below #SMs tiles otherwise, for a batch, an MN-major lhs, tf32 or 16-bit x fp8 operands."""
    plan = lambda m, n, k=4096, **kw: isa.kernel_plan("sm_90a", m, n, k, num_sms=132, **kw)
    for m, c in ((129, 40), (144, 40), (160, 40), (161, 37), (192, 37)):
        for kw in ({}, {"b_mn_major": True}, {"a_dtype": "float8_e4m3fn"},
                   {"a_dtype": "float8_e4m3fn", "b_mn_major": True}, {"a_dtype": "float16"}):
            p = plan(m, 28672, **kw)
            assert (p["config"], p["splits"], p["workspace_floats"]) == (c, 1, 0), (m, kw, p)
    for m, c in ((160, 40), (176, 37)):
        assert plan(m, 132 * 128)["config"] == c and plan(m, 131 * 128 + 1)["config"] == c  # 132 tiles
        assert plan(m, 131 * 128)["config"] not in (37, 40)  # 131 tiles
    for m in (128, 193, 256):
        assert plan(m, 28672)["config"] not in (37, 40), m
    assert plan(160, 6144)["config"] not in (37, 40)  # the 8B QKV: 48 tiles
    # K >= 8192: also a weight of over half as many tiles as SMs (the 70B QKV, 80 tiles: 41's / 38's two token tiles
    # each do not fit), but an 8-bit (K, N) weight (19); 66 tiles: 48's / 39's pairs (test_sm90_token_tiles)
    for kw in ({}, {"b_mn_major": True}, {"a_dtype": "float8_e4m3fn"}, {"a_dtype": "float16"}):
        for m, c in ((129, 40), (144, 40), (160, 40), (161, 37), (176, 37), (192, 37)):
            for n in (10240, 128 * 66 + 1):
                p = plan(m, n, 8192, **kw)
                assert (p["config"], p["splits"], p["workspace_floats"]) == (c, 1, 0), (m, n, kw, p)
            assert plan(m, 128 * 66, 8192, **kw)["config"] == (48 if m <= 160 else 39)
            assert plan(m, 10240, 8191, **kw)["config"] not in (37, 40)  # K < 8192
        assert plan(128, 10240, 8192, **kw)["config"] not in (37, 40)
        assert plan(193, 10240, 8192, **kw)["config"] not in (37, 40)
    for m in (144, 176):
        assert plan(m, 10240, 8192, a_dtype="float8_e4m3fn", b_mn_major=True)["config"] == 19
    assert plan(160, 28672, batch=2)["config"] not in (37, 40)
    assert plan(160, 28672, a_mn_major=True)["config"] not in (37, 40)
    assert plan(160, 28672, a_dtype="float32")["config"] not in (37, 40)
    assert plan(160, 28672, b_dtype="float8_e4m3fn")["config"] not in (37, 40)
    assert isa.kernel_plan("sm_90a", 160, 28672, 4096, num_sms=240)["config"] not in (37, 40)  # 224 tiles, 240 SMs


def test_sm90_token_tiles():
    """129-192 tokens against a weight of at most #SMs 128-row tiles (menu.h sm90_token_tiles): swap-AB, two token
    tiles per weight tile, 80 wide at 129-160 tokens (entry 41; at K >= 8192 in weight-multicast pairs, 48, a pair per
    split, also where those units fill the SMs twice over), 96 at 161-192 (38; at K >= 8192 39's pairs where 38 would
    run one split), their 2 K splits summed in a
    cluster where twice the tiles fit on the SMs and each split keeps 16 K blocks of 128 bytes, else one split (not
    for an 8-bit (K, N) weight: the 256-token entry 19); no workspace; not below 129 or above 192 tokens, for a batch,
    an MN-major lhs, int8, tf32 or 16-bit x fp8."""
    plan = lambda m, n, k=4096, sms=132, **kw: isa.kernel_plan("sm_90a", m, n, k, num_sms=sms, **kw)
    both = lambda p: (p["config"], p["splits"], p["workspace_floats"])
    layouts = ({}, {"b_mn_major": True}, {"a_dtype": "float8_e4m3fn"}, {"a_dtype": "float8_e4m3fn", "b_mn_major": True},
               {"a_dtype": "float16"})
    for m, c in ((129, 41), (150, 41), (160, 41), (161, 38), (192, 38)):
        for kw in layouts:
            assert both(plan(m, 4096, **kw)) == (c, -2, 0), (m, kw)      # the 8B O projection: 2 x 32 tiles
            # the 8B down projection: at 129-160 tokens in weight-multicast pairs (48), a pair per split, its sums
            # through a workspace (64 slots of 128 x 80 floats, 64 ready flags), but for an 8-bit (K, N) weight
            pairs = m <= 160 and not (kw.get("b_mn_major") and kw.get("a_dtype") == "float8_e4m3fn")
            assert both(plan(m, 4096, 14336, **kw)) == ((48, -2, 64 * 128 * 80 + 64) if pairs else (c, -2, 0)), (m, kw)
            assert plan(m, 4096, 8192, **kw)["config"] == (48 if pairs else c)
            assert plan(m, 4096, 8191, **kw)["config"] == c
            one = plan(m, 6144, **kw)                                       # the 8B QKV: 2 x 48 tiles
            assert both(one) == ((19, 2, one["workspace_floats"]) if kw.get("b_mn_major") and kw.get("a_dtype") ==
                                 "float8_e4m3fn" else (c, 1, 0)), (m, kw, one)
    for m, c in ((160, 41), (176, 38)):
        # the 70B O / down projections (2 x 64 tiles: the pairs' units fill the SMs twice over): 48's pairs at 129-160
        # tokens (128 slots of 128 x 80 floats, 128 flags), 39's at 161-192 (128 slots of 128 x 96 floats: where 38
        # would run one split), but for an 8-bit (K, N) weight
        for k in (8192, 28672):
            for kw in layouts:
                transposed = kw.get("b_mn_major") and kw.get("a_dtype") == "float8_e4m3fn"
                got = both(plan(m, 8192, k, **kw))
                if transposed:  # (in shared memory: two splits or another plan, never one split on 41 / 38)
                    assert got[0] not in (38, 39, 41, 48), (m, k, kw, got)
                else:
                    assert got == ((48, -2, 128 * 128 * 80 + 128) if m <= 160 else (39, -2, 128 * 128 * 96 + 128)), (
                        m, k, kw, got)
        assert both(plan(m, 8192, 8191)) == (c, 1, 0)  # K < 8192: one split on 41 / 38
        assert both(plan(m, 128 * 33)) == (c, -2, 0) and both(plan(m, 128 * 33 + 1)) == (c, 1, 0)  # 66 / 68 tiles
        assert both(plan(m, 128 * 66)) == (c, 1, 0) and plan(m, 128 * 66 + 1)["config"] not in (38, 41)  # 132 / 134
        assert both(plan(m, 4096, 2048)) == (c, -2, 0) and both(plan(m, 4096, 1984)) == (c, 1, 0)  # 32 / 31 K blocks
        assert both(plan(m, 4096, sms=128)) == (c, -2, 0) and both(plan(m, 4096, sms=127)) == (c, 1, 0)  # 128 CTAs
    for m in (128, 193, 256):
        assert plan(m, 4096)["config"] not in (38, 41), m
    assert plan(160, 4096, batch=2)["config"] not in (38, 41)
    assert plan(160, 4096, a_mn_major=True)["config"] not in (38, 41)
    assert plan(160, 4096, a_dtype="int8")["config"] not in (38, 41)
    assert plan(160, 4096, a_dtype="float32")["config"] not in (38, 41)
    assert plan(160, 4096, b_dtype="float8_e4m3fn")["config"] not in (38, 41)
    assert plan(160, 28672)["config"] == 40 and plan(176, 28672)["config"] == 37  # wider weights: the wide-tokens rule


def test_sm90_pairs_128_tokens():
    """65-128 tokens, 16-bit operands, K >= 8192, a weight of at most a quarter as many 128-row tiles as SMs (menu.h
    sm90_pairs_128_tokens: the 8B down projection): entry 48's weight-multicast pairs of 80-token tiles, a pair per K
    split (2 splits, 128 CTAs for 32 tiles), their sums through a workspace (a slot of 128 x 80 floats and a flag per
    CTA of the second split: 64); at 65-80 tokens a pair's second tile holds no token. Not at 64 tokens or fewer, for
    8-bit operands, more tiles, K < 8192, a batch, an MN-major lhs, tf32 or 16-bit x fp8."""
    plan = lambda m, n=4096, k=14336, sms=132, **kw: isa.kernel_plan("sm_90a", m, n, k, num_sms=sms, **kw)
    both = lambda p: (p["config"], p["splits"], p["workspace_floats"])
    ws = 64 * 128 * 80 + 64
    for m in (65, 72, 80, 81, 100, 128):
        for kw in ({}, {"b_mn_major": True}, {"a_dtype": "float16"}, {"a_dtype": "float16", "b_mn_major": True}):
            assert both(plan(m, **kw)) == (48, -2, ws), (m, kw)
        assert both(plan(m, 4096, 8192)) == (48, -2, ws) and plan(m, 4096, 8191)["config"] != 48  # K >= 8192
        assert both(plan(m, 128 * 33)) == (48, -2, 66 * 128 * 80 + 66)  # 33 tiles: 132 CTAs
        assert plan(m, 128 * 33 + 1)["config"] != 48 and plan(m, sms=127)["config"] != 48  # 34 tiles; 32 x 4 > 127
        for kw in ({"a_dtype": "float8_e4m3fn"}, {"a_dtype": "float8_e4m3fn", "b_mn_major": True}, {"batch": 2},
                   {"a_mn_major": True}, {"a_dtype": "float32"}, {"b_dtype": "float8_e4m3fn"}):
            assert plan(m, **kw)["config"] != 48, (m, kw)
        assert plan(m, 8192, 28672)["config"] != 48  # the 70B down projection: 64 tiles (measured a loss)
    for m in (48, 63, 64):
        assert plan(m)["config"] != 48, m
    assert plan(129)["config"] == 48  # (129-160 tokens: test_sm90_token_tiles)
    p = isa.kernel_plan("sm_90a", 128, 4096, 14336, a_dtype="bfloat16", num_sms=132)
    assert p["config"] == 48, p


def test_one_split_plans_need_no_workspace():
    """Issue 15: a swap-AB / split-K plan with one K split asked XLA for a workspace of M x N floats (64 MiB
    for 16 x 1048584 x 2056) and ran a reduce pass; with one split the kernel finishes the output."""
    plan = isa.kernel_plan("sm_90a", 32, 1048584, 2056, a_dtype="bfloat16", num_sms=132)
    assert plan["config"] == 16 and plan["splits"] == 1 and plan["workspace_floats"] == 0, plan
    for arch, sms in (("sm_90a", 132), ("sm_100a", 148)):
        plan = isa.kernel_plan(arch, 16, 4096, 4096, config=11, splits=1, num_sms=sms)
        assert (plan["splits"], plan["workspace_floats"]) == (1, 0), plan
        plan = isa.kernel_plan(arch, 16, 4096, 4096, config=11, splits=2, num_sms=sms)
        assert plan["workspace_floats"] == 2 * 16 * 4096, plan


def test_sm90_forced_splits_clamped_to_k_blocks():
    plan = isa.kernel_plan("sm_90a", 16, 4096, 200, config=11, splits=9)  # 200 bf16 = 4 K blocks of 64
    assert plan["config"] == 11 and plan["splits"] == 4
    plan = isa.kernel_plan("sm_90a", 16, 4096, 600, config=15, splits=9)  # 600 bf16 = 3 ring slots of 256
    assert plan["config"] == 15 and plan["splits"] == 3
    plan = isa.kernel_plan("sm_90a", 1000, 1000, 1000, config=14, splits=3)
    assert plan["splits"] == 3 and plan["workspace_floats"] == 3 * 1000 * 1000
    assert isa.kernel_plan("sm_90a", 8192, 8192, 8192, config=8)["workspace_floats"] == 0


@pytest.mark.parametrize("config", [0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 20, 22, 24, 11, 12, 13, 14, 18, 19, 15, 16, 17,
                                    25, 26, 27, 28, 29])
def test_sm90_forced_config_is_kept(config):
    cfg, name = isa.kernel_choice("sm_90a", 8192, 8192, 8192, config=config)
    assert cfg == config and name


@pytest.mark.parametrize("arch,config", [("sm_90a", 4), ("sm_90a", 23), ("sm_90a", -2), ("sm_100a", 2),
                                         ("sm_100a", 3), ("sm_103a", 6), ("sm_100a", 15)])
def test_config_outside_the_menu_raises(arch, config):
    with pytest.raises(ValueError, match="menu entry"):
        isa.kernel_choice(arch, 256, 256, 256, config=config)


@pytest.mark.parametrize("m,dtype,expect", [(33, "float8_e4m3fn", 17), (64, "float8_e4m3fn", 17),
                                             (33, "bfloat16", 13), (64, "bfloat16", 13), (32, "bfloat16", 16)])
def test_sm90_decode_rows(m, dtype, expect):
    """M of 33-64: 8-bit K-major weights take the 64-row swap-AB entry (17), 16-bit ones the 128-row one."""
    assert isa.kernel_plan("sm_90a", m, 8192, 8192, a_dtype=dtype)["config"] == expect


def test_sm90_split_k_counts_k_bytes():
    """Split-K needs three quarters of the SMs idle and K of >= 32 blocks of 128 bytes: 64 tiles never split
    (whatever K); 16 tiles (<= 132 / 4) split from 32 blocks: an e4m3 K of 4096, a bf16 one of 2048, not an
    e4m3 one of 2048 (16 blocks)."""
    assert isa.kernel_plan("sm_90a", 128, 4096, 14336, a_dtype="float8_e4m3fn")["config"] == 2
    assert isa.kernel_plan("sm_90a", 128, 6144, 14336, a_dtype="bfloat16")["config"] == 2  # (4096: cluster decode)
    assert isa.kernel_plan("sm_90a", 128, 1024, 4096, a_dtype="float8_e4m3fn")["config"] == 14
    assert isa.kernel_plan("sm_90a", 128, 1024, 2048, a_dtype="bfloat16")["config"] == 14
    assert isa.kernel_plan("sm_90a", 128, 1024, 2048, a_dtype="float8_e4m3fn")["config"] == 2


@pytest.mark.parametrize("m,n,dtype,expect", [
    (8192, 8192, "bfloat16", 4),   # 32 x 32 = 1024 pair tiles >= 148 / 2
    (2048, 2048, "bfloat16", 0),   # 8 x 8 = 64 pair tiles < 74; 16 x 8 = 128 < 148 at 256 wide; 256 at 128
    (128, 8192, "bfloat16", 14),   # 1 x 32 pair tiles; 32 / 64 1-CTA tiles: none fills -> 128x128, and with
    #                                64 tiles <= 148 / 2 and K = 4096 (64 blocks): split-K over 2 splits
    (8192, 8192, "int8", 1),       # kind::i8 has no pair kernel: its pair choice runs 128x256 1-CTA
])
def test_sm100_heuristic(m, n, dtype, expect):
    cfg, name = isa.kernel_choice("sm_100a", m, n, 4096, a_dtype=dtype, num_sms=148)
    assert cfg == expect, (cfg, name)


@pytest.mark.parametrize("m,n,k,dtype,expect,splits", [
    (16, 8192, 8192, "bfloat16", 11, 2),       # decode on 148 SMs: 64 swap tiles x 2 splits
    (64, 8192, 8192, "float8_e4m3fn", 13, 2),
    (16, 8192, 8192, "int8", 0, 1),            # int8 has no split-K entries (s32 sums): dense 128x128
    (512, 512, 65536, "bfloat16", 14, 8),      # 16 pair tiles / 16 1-CTA 128x256 tiles < 74: split-K
])
def test_sm100_decode_and_split_plan(m, n, k, dtype, expect, splits):
    plan = isa.kernel_plan("sm_100a", m, n, k, a_dtype=dtype, num_sms=148)
    assert (plan["config"], plan["splits"]) == (expect, splits), plan
    assert plan["workspace_floats"] == (splits * m * ((n + 3) // 4 * 4) if splits > 1 else 0)


@pytest.mark.parametrize("config", [0, 1, 4, 8, 9, 11, 12, 13, 14])
def test_sm100_forced_config_is_kept(config):
    cfg, name = isa.kernel_choice("sm_100a", 8192, 8192, 8192, a_dtype="bfloat16", config=config, num_sms=148)
    assert cfg == config and name


def test_kernel_choice_rejects_unknown_arch():
    with pytest.raises(ValueError, match="arch must be"):
        isa.kernel_choice("sm_80", 256, 256, 256)
