"""The GPU-only tests carry the ``gpu`` marker, so that ``pytest -m gpu`` (scripts/gpu_check.sh and the
device runs) selects them. A test that calls one of the helpers that skip without a GPU kernel but has no
marker ran on no device run: tests/test_decode_mma.py's forced-entry tests went unrun that way until
2026-11-26 (docs/PERF.md, 09:40). Tests that run on the CPU reference path too (most of the suite) are not
marked: the README's test command runs them, through the kernels, on a GPU."""

from __future__ import annotations

import ast
import pathlib

# Helpers (tests/) that skip the calling test unless a GPU with the kernels is present.
GPU_ONLY_HELPERS = ("_require_kernels", "_require_decode_entries", "_require_config", "_require_sm90_plan")


def _marked_gpu(node: ast.AST) -> bool:
    return "gpu" in ast.unparse(node)


def test_tests_that_need_a_gpu_are_marked_gpu():
    unmarked = []
    for path in sorted(pathlib.Path(__file__).parent.glob("test_*.py")):
        tree = ast.parse(path.read_text())
        module_mark = any(isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)
                          and _marked_gpu(n.value) for n in tree.body)
        if module_mark:
            continue
        for fn in tree.body:
            if not (isinstance(fn, ast.FunctionDef) and fn.name.startswith("test_")):
                continue
            if any("mark.gpu" in ast.unparse(d) for d in fn.decorator_list):
                continue
            calls = {n.func.id for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
            if calls & set(GPU_ONLY_HELPERS):
                unmarked.append(f"{path.name}::{fn.name}")
    assert not unmarked, f"GPU-only tests without @pytest.mark.gpu (pytest -m gpu skips them): {unmarked}"
