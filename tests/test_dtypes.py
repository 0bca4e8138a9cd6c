"""The element-type table (cpp/include/jax_tmem/dtypes.def): the Python reader and the compiled
extension see the same rows, and the API's dtype lists come from it."""

from __future__ import annotations

import numpy as np
import pytest

import jax_tmem
from jax_tmem._core import arch, dtypes, ext


def test_python_reads_the_table_the_extension_compiled():
    mod, why = ext.load()
    if mod is None:
        pytest.skip(why)
    compiled = mod.dtype_table()
    assert [r["name"] for r in compiled] == [r.name for r in dtypes.table()]
    for c, p in zip(compiled, dtypes.table()):
        assert (c["id"], c["bits"], c["operand"], c["output"], c["scale"], tuple(c["fmt"])) == \
            (p.id, p.bits, p.operand, p.output, p.scale, p.fmt), p.name


def test_api_lists_come_from_the_table():
    assert jax_tmem.SUPPORTED_DTYPES == tuple(r.dtype for r in dtypes.table() if r.operand)
    assert arch.OUT_TYPES == tuple(r.dtype for r in dtypes.table() if r.output)
    assert set(arch.FP8) == {np.dtype("float8_e4m3fn"), np.dtype("float8_e5m2")}


def test_every_row_is_a_numpy_dtype_of_its_width():
    for r in dtypes.table():
        assert r.dtype.name == r.name
        if r.bits >= 8:
            assert r.dtype.itemsize * 8 == r.bits, r.name


def test_tcgen05_format_codes_match_the_isa_encoder():
    """The format columns are what jax_tmem.isa.instr_desc encodes (PTX ISA Tables 43/44)."""
    from jax_tmem import isa
    kinds = dict(zip(dtypes.FORMAT_FAMILIES, ("f16", "tf32", "f8f6f4", "i8", "mxf4")))
    for r in dtypes.table():
        for fam, code in zip(dtypes.FORMAT_FAMILIES, r.fmt):
            kind = kinds[fam]
            if code < 0:
                with pytest.raises(ValueError, match="not an operand type"):
                    isa.instr_desc(kind, r.name, r.name, "int32" if kind == "i8" else "float32", 128, 64,
                                   scale_dtype="float8_e8m0fnu" if kind == "mxf4" else None)
                continue
            acc = "int32" if kind == "i8" else "float32"
            d = isa.instr_desc(kind, r.name, r.name, acc, 128, 64,
                               scale_dtype="float8_e8m0fnu" if kind == "mxf4" else None)
            assert (d >> 7) & 0x7 == code and (d >> 10) & 0x7 == code, (r.name, kind)


def test_cpu_decoder_is_exact_for_every_table_type():
    """The CPU reference handler decodes every element type of dtypes.def from its name (no per-type code):
    every bit pattern of each type of <= 16 bits (fp4 and fp6 included; a sample of float32) equals
    ml_dtypes' value, NaN where ml_dtypes has NaN."""
    from jax_tmem._core import dtypes as _dtypes, ext as _ext
    mod, why = _ext.load()
    assert mod is not None, why
    rng = np.random.default_rng(0)
    checked = []
    for row in _dtypes.table():
        if row.bits <= 16:
            raw = np.arange(2 ** row.bits, dtype=np.uint32)
        else:
            raw = rng.integers(0, 2 ** 32, 4096, dtype=np.uint64).astype(np.uint32)
        storage = raw.astype(np.uint8 if row.bits <= 8 else {16: np.uint16, 32: np.uint32}[row.bits])
        with np.errstate(invalid="ignore"):  # ml_dtypes casts its NaN codes with a warning
            want = storage.view(row.dtype).astype(np.float64)
        got = np.asarray(mod.host_decode(row.name, raw.tolist()), np.float64)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=row.name)
        ok = ~np.isnan(want)
        np.testing.assert_array_equal(got[ok], want[ok], err_msg=row.name)
        checked.append(row.name)
    assert {"float32", "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "int8", "uint8",
            "float8_e8m0fnu", "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn"} <= set(checked), checked
