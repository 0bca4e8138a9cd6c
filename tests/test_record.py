"""XLA FFI's record stage (opt-in, JAX_TMEM_FFI_RECORD=1; jax_tmem/record.h): the CUDA custom calls' launches
recorded as kernel nodes of XLA's command buffers, created from the extension's own cubins.

- Compile-only (CI): every kernel of every built arch is found in the extension's fatbinaries as a cubin
  that defines it (what the record stage hands XLA), checked against cuobjdump; the lookup's errors.
- CPU: the registration passes {"execute", "record"} only when asked for and built with the record stage.
- GPU: a program of our calls (every launch form: TMA-store and register epilogues, the split-K reduce with
  its programmatic edge, the tail split's cleared flags, the decode kernels, the quantize's cleared scales,
  the 1-byte transpose) run with and without the record stage in fresh processes: the same bits, recorded
  (not traced), updated as the buffers move, nothing failed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile

import jax
import numpy as np
import pytest

from jax_tmem._core import ext as _ext

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "record_worker.py")


def _entries_by_arch(symbols: str) -> dict[int, list[str]]:
    """cuobjdump -symbols output -> {sm: [kernel (entry) names]}."""
    out, sm = {}, None
    for line in symbols.splitlines():
        m = re.search(r"arch = sm_(\d+)a?", line)
        if m:
            sm = int(m.group(1))
            continue
        # "FUNC GLOBAL DEFAULT ENTRY name" (CUDA 13's cuobjdump), "STT_FUNC STB_GLOBAL [STV_DEFAULT] STO_ENTRY name"
        m = re.match(r"\s*(?:STT_)?FUNC\s+(?:STB_)?GLOBAL\b.*?\b(?:STO_)?ENTRY\s+(\S+)", line)
        if m and sm is not None:
            out.setdefault(sm, []).append(m.group(1))
    return out


@pytest.mark.cuda_build
def test_every_kernel_has_its_cubin():
    from test_build import _cuda_info, _find_tool, _run
    _cuda_info()
    mod, _ = _ext.load()
    listing = _run("-symbols")
    by_arch = _entries_by_arch(listing)
    assert by_arch, f"no kernel found in cuobjdump -symbols' listing:\n{listing[:3000]}"
    cuobjdump = _find_tool("cuobjdump")
    for sm, names in by_arch.items():
        zero = [n for n in names if "zero_bytes_kernel" in n]
        assert zero, f"sm_{sm}: no zeroing kernel (record_kernels.cu), which the record stage's memsets need"
        rng = np.random.default_rng(sm)
        picks = sorted(set(zero + list(rng.choice(names, size=min(24, len(names)), replace=False))))
        for name in picks:
            image = mod.kernel_image(name, sm)
            assert image[:4] == b"\x7fELF" and name.encode() in image, (sm, name)
        # the image is a cubin that cuobjdump reads and that defines the kernel as an entry
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(mod.kernel_image(picks[0], sm))
            f.flush()
            r = subprocess.run([cuobjdump, "-symbols", f.name], capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            # (a bare cubin's listing has no "arch =" header: its kernels are the ENTRY lines)
            assert re.findall(r"\b(?:STO_)?ENTRY\s+(\S+)", r.stdout).count(picks[0]) == 1, r.stdout[:2000]


@pytest.mark.cuda_build
def test_kernel_image_errors():
    from test_build import _cuda_info
    _cuda_info()
    mod, _ = _ext.load()
    with pytest.raises(ValueError, match="defines no_such_kernel"):
        mod.kernel_image("no_such_kernel", 90)


class _FakeModule:
    def __init__(self, built, registers):
        self._built, self._registers = built, registers

    def registrations(self):
        return {"cuda": {"jax_tmem_gemm": "exec-capsule", "jax_tmem_quantize": "quantize-capsule"}}

    def record_bootstrap(self):
        return "boot-capsule" if self._built else None

    def record_stats(self):
        return {"registered": ["jax_tmem_gemm"] if self._registers else [],
                "register_error": "" if self._registers else "jax_tmem_gemm: refused"}

    def build_info(self):
        return {"cuda_reason": ""}


@pytest.mark.parametrize("wanted,built,boot", [(False, True, "ok"), (True, True, "ok"), (True, False, "ok"),
                                               (True, True, "raises"), (True, True, "refused")])
def test_registration_gives_xla_the_record_stage_only_when_wanted(monkeypatch, wanted, built, boot):
    """Wanted and built: the bootstrap target through JAX, one call of it, and the targets it gave XLA (with
    their record handlers) are not registered again through JAX; every other case registers every target
    through JAX (execute only) and says why in record_status()."""
    calls, boots = [], []
    monkeypatch.setattr(_ext, "load", lambda: (_FakeModule(built, boot != "refused"), ""))
    monkeypatch.setattr(_ext, "_registered", set())
    monkeypatch.setattr(_ext, "_bootstrap_error", "")
    monkeypatch.setattr(jax.ffi, "register_ffi_target", lambda name, fn, platform: calls.append((name, fn, platform)))

    def call_bootstrap():
        boots.append(1)
        if boot == "raises":
            raise RuntimeError("no GPU")
    monkeypatch.setattr(_ext, "_call_bootstrap", call_bootstrap)
    monkeypatch.setenv("JAX_TMEM_FFI_RECORD", "1" if wanted else "0")
    assert _ext.ensure_registered("cuda") == (True, "")
    through_jax = [c for c in calls if c[0] != "jax_tmem_record_bootstrap"]
    if wanted and built:
        assert calls[0] == ("jax_tmem_record_bootstrap", "boot-capsule", "CUDA") and boots == [1]
    else:
        assert boots == [] and all(c[0] != "jax_tmem_record_bootstrap" for c in calls)
    if wanted and built and boot == "ok":
        assert through_jax == [("jax_tmem_quantize", "quantize-capsule", "CUDA")]
    else:
        assert through_jax == [("jax_tmem_gemm", "exec-capsule", "CUDA"),
                               ("jax_tmem_quantize", "quantize-capsule", "CUDA")]
    why = {"raises": "the bootstrap call failed: RuntimeError: no GPU", "refused": "jax_tmem_gemm: refused"}
    if wanted and not built:
        assert _ext._bootstrap_error == "the extension was built without the record stage"
    elif wanted:
        assert _ext._bootstrap_error == why.get(boot, "")


def test_record_status_says_what_it_did():
    st = _ext.record_status()
    assert st["wanted"] == (os.environ.get("JAX_TMEM_FFI_RECORD") == "1")
    assert isinstance(st["available"], bool) and isinstance(st["last_reason"], str)
    if st["available"]:
        assert all(st[k] >= 0 for k in ("created", "updated", "captured", "failed", "update_us", "update_xla_us"))
        assert st["update_us"] >= st["update_xla_us"]  # XLA's update_launch runs inside our record handler


def _worker(record: bool) -> dict:
    env = dict(os.environ, JAX_TMEM_FFI_RECORD="1" if record else "0")
    p = subprocess.run([sys.executable, WORKER], capture_output=True, text=True, env=env, timeout=600)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert p.returncode == 0 and line, f"worker failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return json.loads(line[7:])


@pytest.mark.gpu
def test_recorded_program_matches_the_traced_one():
    if jax.default_backend() != "gpu":
        pytest.skip("needs a GPU")
    if not _ext.record_status().get("available"):
        pytest.skip(f"built without the record stage: {_ext.record_status().get('last_reason')}")
    traced, recorded = _worker(False), _worker(True)
    assert traced["record"]["created"] == 0 and traced["record"]["updated"] == 0, traced["record"]
    st = recorded["record"]
    assert traced["record"]["registered"] == [], traced["record"]  # no bootstrap without JAX_TMEM_FFI_RECORD=1
    assert sorted(st["registered"]) == ["jax_tmem_gemm", "jax_tmem_quantize", "jax_tmem_transpose8"], st
    assert st["failed"] == 0 and st["captured"] == 0, st
    assert st["created"] >= recorded["calls"], st          # every call of the program became kernel nodes
    assert st["updated"] >= recorded["calls"], st          # and was updated as its buffers moved
    assert st["update_us"] > st["update_xla_us"] > 0, st     # the updates' host time, ours around XLA's
    assert recorded["digests"] == traced["digests"]        # bit for bit, every execution
    assert recorded["exact"] and traced["exact"], (recorded["errors"], traced["errors"])
