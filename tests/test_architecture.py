"""The package's structure, as issue 13 asks it to stay: no import cycle in jax_tmem, the layers import
only downwards (``_core`` <- ``ops`` <- ``api`` <- layers/recipes/sharding), and no hand-written file in
cpp/ or jax_tmem/ grows past ~500 lines."""

from __future__ import annotations

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "jax_tmem")
# Layer of each top-level part of the package: a module may import only from its own layer or lower.
LAYERS = {"_core": 0, "_jax_tmem": 0, "ops": 1, "api": 2, "_checks": 2, "isa": 2, "export": 2, "report": 3, "flax": 3, "__main__": 4, "__init__": 3}
GENERATED = {"cpp/include/jax_tmem/ptx/wgmma_ops.cuh"}  # scripts/gen_wgmma.py writes it
MAX_LINES = 500


def _modules():
    if not os.path.isdir(PKG):
        pytest.skip("no source checkout next to the tests")
    out = {}
    for dirpath, _, files in os.walk(PKG):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(dirpath, f), ROOT)[:-3].replace(os.sep, ".")
                out[rel.removesuffix(".__init__")] = os.path.join(dirpath, f)
    return out


def _imports(name, path, known):
    """jax_tmem modules that `name` imports (anywhere in the file, function bodies included)."""
    pkg = name if path.endswith("__init__.py") else name.rsplit(".", 1)[0]
    deps = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.Import):
            deps |= {a.name for a in node.names if a.name.startswith("jax_tmem")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            if not base.startswith("jax_tmem"):
                continue
            for a in node.names:  # `from jax_tmem._core import ext` imports the module jax_tmem._core.ext
                deps.add(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base)
    return {d for d in deps if d in known and d != name}


def _layer(mod):
    parts = mod.split(".")
    return LAYERS[parts[1] if len(parts) > 1 else "__init__"]


def test_no_import_cycle_and_layers_point_down():
    mods = _modules()
    graph = {m: _imports(m, p, mods) for m, p in mods.items()}
    for m, deps in graph.items():
        for d in deps:
            if d == "jax_tmem":
                continue
            assert _layer(d) <= _layer(m), f"{m} imports {d}, a higher layer ({LAYERS})"
    # No cycle (package __init__ re-exports are the top layer, so they cannot close one).
    state = {}

    def visit(m, stack):
        state[m] = 1
        for d in graph[m]:
            if d == "jax_tmem":
                continue
            if state.get(d) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack + [m, d]))
            if d not in state:
                visit(d, stack + [m])
        state[m] = 2

    for m in graph:
        if m not in state:
            visit(m, [])


def test_the_layers_are_detected():
    """The checker sees real edges (so the test above can fail)."""
    mods = _modules()
    assert "jax_tmem._core.config" in _imports("jax_tmem.ops.gemm", mods["jax_tmem.ops.gemm"], mods)
    assert "jax_tmem.ops.gemm" in _imports("jax_tmem.api", mods["jax_tmem.api"], mods)


def test_no_hand_written_file_over_the_limit():
    over = {}
    for top in ("cpp", "jax_tmem"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if not f.endswith((".py", ".h", ".cuh", ".cu", ".cc", ".def")):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, f), ROOT).replace(os.sep, "/")
                n = sum(1 for _ in open(os.path.join(dirpath, f)))
                if n > MAX_LINES and rel not in GENERATED:
                    over[rel] = n
    assert not over, f"files over {MAX_LINES} lines (split them: one concern per file): {over}"


def test_every_launch_goes_through_launch_kernel():
    """Every kernel launch and memset of the CUDA launchers goes through jax_tmem/record.h (launch_kernel,
    zero_async), so that the FFI record stage sees all of a call's work: no <<<>>>, cudaLaunchKernelEx or
    cudaMemsetAsync elsewhere in cpp/ (the record_kernels.cu zeroing kernel included)."""
    import re
    bad = []
    for base in ("cpp/src", "cpp/include"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, base)):
            for f in files:
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, ROOT)
                if rel == "cpp/include/jax_tmem/record.h" or not f.endswith((".cu", ".cuh", ".cc", ".h", ".inc")):
                    continue
                for i, line in enumerate(open(path, encoding="utf-8"), 1):
                    code = line.split("//")[0]
                    if re.search(r"<<<|\bcudaLaunchKernelEx\s*\(|\bcudaMemsetAsync\s*\(|\bcudaLaunchKernel\s*\(", code):
                        bad.append(f"{rel}:{i}: {line.strip()}")
    if not os.path.isdir(os.path.join(ROOT, "cpp")):
        pytest.skip("no source checkout next to the tests")
    assert not bad, "launches outside jax_tmem/record.h:\n" + "\n".join(bad)
