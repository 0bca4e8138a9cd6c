"""Element types: the one table, ``cpp/include/jax_tmem/dtypes.def``, read here as the C++ preprocessor
reads it (the wheel carries a copy next to this file). Which dtypes the ops take as operands, which
they write, bit widths and tcgen05 format codes all come from it; nothing here lists a dtype by hand.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass

import ml_dtypes  # noqa: F401  (registers the narrow float types with numpy)
import numpy as np

_ROW = re.compile(r"^JT_DTYPE\((k\w+), (\w+), (\w+), (\w+), (\d+), ([01]), ([01]), ([01]), "
                  r"(-?\d+), (-?\d+), (-?\d+), (-?\d+), (-?\d+)\)\s*$")
FORMAT_FAMILIES = ("f16", "tf32", "f8f6f4", "i8", "mxf4")  # the order of the format columns


@dataclass(frozen=True)
class DType:
    id: int          # DType's value in C++ (the row number)
    key: str         # the C++ enumerator, e.g. "kE4M3"
    name: str        # the numpy / JAX name, e.g. "float8_e4m3fn"
    ffi: str         # the XLA FFI DataType ("INVALID": no XLA array type)
    bits: int
    operand: bool    # the dense GEMM ops take it as A/B
    output: bool     # they write it
    scale: bool      # a block-scale type
    fmt: tuple       # tcgen05 format code per FORMAT_FAMILIES (-1: not taken)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(getattr(ml_dtypes, self.name, self.name))


def _def_path() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in (os.path.join(here, "dtypes.def"),  # installed wheel
                 os.path.join(here, "..", "..", "cpp", "include", "jax_tmem", "dtypes.def")):  # source tree
        if os.path.exists(cand):
            return cand
    raise ImportError("jax_tmem: dtypes.def (the element-type table) is missing from the installation")


@functools.lru_cache(maxsize=None)
def table() -> tuple[DType, ...]:
    rows = []
    with open(_def_path()) as f:
        for line in f:
            if not line.startswith("JT_DTYPE("):
                continue
            m = _ROW.match(line)
            if not m:
                raise ImportError(f"jax_tmem: cannot read the dtypes.def row {line.strip()!r}")
            g = m.groups()
            rows.append(DType(len(rows), g[0], g[1], g[2], int(g[4]), g[5] == "1", g[6] == "1", g[7] == "1",
                              tuple(int(x) for x in g[8:13])))
    return tuple(rows)


def by_name(name) -> DType | None:
    name = np.dtype(name).name if not isinstance(name, str) else name
    return next((r for r in table() if r.name == name), None)


OPERAND_DTYPES = tuple(r.dtype for r in table() if r.operand)
OUTPUT_DTYPES = tuple(r.dtype for r in table() if r.output)
FP8_DTYPES = tuple(r.dtype for r in table() if r.operand and r.bits == 8 and r.name.startswith("float8"))
