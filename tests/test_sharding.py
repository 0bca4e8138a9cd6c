"""Issue 17: jax_tmem GEMMs under jit with sharded operands partition like lax.dot_general. On 8 host CPU
devices (a fresh process: tests/sharding_worker.py), for data-parallel, column-, row- and FSDP-like
(K sharded on both operands) layouts, with and without a fused epilogue, and for the gradient of a
sharded loss: the same collectives (kind and count) in the compiled HLO as the lax.dot_general program,
the same output sharding, and the unsharded result. Also shard_map (per-device GEMMs) and vmap over a
sharded batch. Each device's GEMM runs the C++ CPU handler (path "kernel")."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from jax_tmem._core import ext as _ext

WORKER = os.path.join(os.path.dirname(__file__), "sharding_worker.py")


@pytest.fixture(scope="module")
def results():
    ok, why = _ext.ensure_registered("cpu")
    if not ok:
        pytest.skip(f"no jax_tmem extension: {why}")
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-P", WORKER, "17"], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {r["case"]: r for r in (json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{"))}


LAYOUTS = ["data", "column", "row", "fsdp"]


@pytest.mark.parametrize("case", [f"{l}/{e}" for l in LAYOUTS for e in ("None", "relu", "grad")])
def test_partitions_like_lax_dot_general(results, case):
    r = results[case]
    assert r["err"] < 1e-4, r
    assert r["ours"] == r["xla"], f"collectives differ from lax.dot_general's: {r}"
    assert r["ours"]["all-gather"] == 0, r
    if "spec" in r:
        assert r["spec"] == r["spec_xla"], r


@pytest.mark.parametrize("case", ["shard_map", "vmap", "same_axis"])
def test_shard_map_vmap_and_a_shared_mesh_axis(results, case):
    assert results[case]["err"] < 1e-4, results[case]
