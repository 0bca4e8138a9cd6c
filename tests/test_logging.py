"""Path decisions: JAX_TMEM_LOG logging, decisions() records, use_path / JAX_TMEM_PATH / path= precedence."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_tmem
from jax_tmem._core import config as _config
from conftest import BF16, F32, assert_close, rand, ref_matmul

# bfloat16 with 16-byte row pitches: the GPU kernels take these GEMMs too (a forced kernel path runs there)
M, N, K = 8, 16, 24
ON_CPU = jax.default_backend() == "cpu"
cpu_only = pytest.mark.skipif(not ON_CPU, reason="checks the CPU decisions")


def _two_gemms(a, b, w):
    return jax_tmem.matmul(jax_tmem.matmul(a, b, activation="relu"), w)


@pytest.fixture
def abw(seed):
    return rand(seed, (M, K), BF16), rand(seed + 1, (K, N), BF16), rand(seed + 2, (N, 8), BF16)


def fresh(fn):
    """A jitted wrapper with its own trace cache (jax.jit(fn) for the same fn reuses old traces)."""
    return jax.jit(lambda *a: fn(*a))


def _hlo(fn, *args, path=None):
    if path is None:
        return fresh(fn).lower(*args).as_text()
    with jax_tmem.use_path(path):
        return fresh(fn).lower(*args).as_text()


def _n_custom_calls(hlo):
    return sum("jax_tmem_gemm" in line and "custom_call" in line for line in hlo.splitlines())


# ---- JAX_TMEM_LOG ---------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["kernel", "xla", "auto"])
def test_log_line_per_decision(monkeypatch, caplog, abw, path):
    monkeypatch.setenv("JAX_TMEM_LOG", "1")
    caplog.set_level(logging.INFO, logger="jax_tmem")
    with jax_tmem.use_path(path):
        fresh(_two_gemms)(*abw)
    ds = jax_tmem.decisions()
    records = [r for r in caplog.records if r.name == "jax_tmem"]
    assert len(ds) == 2
    assert [r.getMessage() for r in records] == [str(d) for d in ds]
    assert all(r.levelno == logging.INFO for r in records)
    msg = records[0].getMessage()
    assert msg.startswith("jax_tmem gemm bfloat16[8, 24] x bfloat16[24, 16] -> bfloat16")
    assert f" {ds[0].path} ({ds[0].target}) - {ds[0].reason}" in msg
    assert "8x16x24" in msg  # the canonical problem MxNxK


@pytest.mark.parametrize("value", ["0", "", "false", "no"])
def test_no_log_lines_when_disabled(monkeypatch, caplog, abw, value):
    monkeypatch.setenv("JAX_TMEM_LOG", value)
    caplog.set_level(logging.INFO, logger="jax_tmem")
    fresh(_two_gemms)(*abw)
    assert len(jax_tmem.decisions()) == 2  # still recorded
    assert not [r for r in caplog.records if r.name == "jax_tmem"]


def test_no_log_lines_when_unset(monkeypatch, caplog, abw):
    monkeypatch.delenv("JAX_TMEM_LOG", raising=False)
    caplog.set_level(logging.INFO, logger="jax_tmem")
    jax_tmem.matmul(*abw[:2])
    assert len(jax_tmem.decisions()) == 1
    assert not [r for r in caplog.records if r.name == "jax_tmem"]


def test_log_fallback_decision_names_reason(monkeypatch, caplog, seed):
    monkeypatch.setenv("JAX_TMEM_LOG", "yes")
    caplog.set_level(logging.INFO, logger="jax_tmem")
    lhs, rhs = rand(seed, (M, K, 2), F32), rand(seed + 1, (K, N, 2), F32)
    jax_tmem.dot_general(lhs, rhs, (((1,), (0,)), ((2,), (2,))))
    (rec,) = [r for r in caplog.records if r.name == "jax_tmem"]
    assert "xla (lax.dot_general)" in rec.getMessage()
    assert "transpose" in rec.getMessage()


_LOG_SCRIPT = textwrap.dedent("""
    import logging, sys
    if sys.argv[1] == "basicConfig":
        logging.basicConfig()
    import jax.numpy as jnp, jax_tmem
    jax_tmem.matmul(jnp.ones((2, 3)), jnp.ones((3, 4)), path="kernel")
    print("done")
""")


def _run_log_script(mode):
    env = dict(os.environ, JAX_TMEM_LOG="1", JAX_PLATFORMS="cpu")
    r = subprocess.run([sys.executable, "-P", "-c", _LOG_SCRIPT, mode], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "done"
    return r.stderr


@cpu_only
def test_log_goes_to_stderr_without_logging_config():
    err = _run_log_script("plain")
    lines = [line for line in err.splitlines() if line.startswith("jax_tmem gemm")]
    assert len(lines) == 1, err
    assert "float32[2, 3] x float32[3, 4] -> float32" in lines[0]
    assert "kernel (cpu reference handler)" in lines[0]


@cpu_only
def test_log_still_shown_after_basic_config():
    err = _run_log_script("basicConfig")
    assert "jax_tmem gemm float32[2, 3] x float32[3, 4]" in err, err


# ---- decisions() ----------------------------------------------------------------------------------

def test_decisions_record_every_call_in_order(abw):
    a, b, w = abw
    with jax_tmem.use_path("kernel"):
        fresh(_two_gemms)(a, b, w)
    with jax_tmem.use_path("xla"):
        jax.jit(lambda a, b: jax_tmem.matmul(a, b))(a.astype(jnp.bfloat16), b.astype(jnp.bfloat16))
    ds = jax_tmem.decisions()
    assert [d.path for d in ds] == ["kernel", "kernel", "xla"]
    assert all(isinstance(d, jax_tmem.Decision) and d.op == "gemm" and d.reason for d in ds)
    assert "bfloat16[8, 24] x bfloat16[24, 16]" in ds[0].problem
    assert "bfloat16[8, 16] x bfloat16[16, 8]" in ds[1].problem
    assert "bfloat16[8, 24] x bfloat16[24, 16] -> bfloat16" in ds[2].problem
    assert ds[2].reason == 'path "xla" requested'
    assert ds[2].target == "lax.dot_general"
    jax_tmem.clear_decisions()
    assert jax_tmem.decisions() == []


@pytest.mark.parametrize("fp8", ["float8_e4m3fn", "float8_e5m2"])
def test_a_16_bit_x_fp8_pair_is_a_decision(seed, fp8):
    """bf16 activations x fp8 weights: where no kernel reads the mix (here: a weight stored (N, K)), XLA's dot
    gets the pair as it is (it widens the weight inside its GEMM); the log names that choice and why, and the
    values are the widened product's. A forced "kernel" path widens the weight in memory first, for the 16-bit
    kernels, where no kernel reads the mix (on a GPU; the CPU reference reads it). fp8 x fp8 mixes and same-type
    pairs record nothing of the kind."""
    x, w = rand(seed, (M, K), BF16), rand(seed + 1, (N, K), BF16).astype(fp8)
    dn = (((1,), (1,)), ((), ()))
    jax_tmem.clear_decisions()
    y = fresh(lambda x, w: jax_tmem.dot_general(x, w, dn))(x, w)
    mixed = [d for d in jax_tmem.decisions() if d.op == "dot_general mix"]
    assert len(mixed) == 1, jax_tmem.decisions()
    d = mixed[0]
    assert (d.problem, d.path, d.target) == (f"bfloat16 x {fp8}", "xla", "XLA's dot of the pair as it is"), d
    assert "no kernel reads this problem" in d.reason and "inside its GEMM" in d.reason, d.reason
    assert jax_tmem.decisions()[-1].op == "gemm" and jax_tmem.decisions()[-1].path == "xla"
    ref = np.asarray(x.astype(F32), np.float64) @ np.asarray(w.astype(F32), np.float64).T
    assert_close(y, ref, BF16, K)
    jax_tmem.clear_decisions()
    # matmul names its operands a and b. 16 rows: sm_90a's decode entries read a (K, N) fp8 weight at <= 8 (and at
    # 9-32 only where N / 64 fills the SMs), so no GPU kernel reads this one either.
    x16 = rand(seed + 2, (16, K), BF16)
    fresh(lambda a, b: jax_tmem.matmul(a, b))(x16, w.T)
    assert [d.target for d in jax_tmem.decisions() if d.op == "matmul mix"] == ["XLA's dot of the pair as it is"]
    if jax.default_backend() == "gpu":
        jax_tmem.clear_decisions()
        fresh(lambda x, w: jax_tmem.dot_general(x, w, dn, path="kernel"))(x, w)
        assert [d.target for d in jax_tmem.decisions() if d.op == "dot_general widen"] == ["rhs converted to bfloat16"]
    jax_tmem.clear_decisions()
    fresh(lambda x, w: jax_tmem.dot_general(x, w, dn))(x.astype("float8_e5m2"), w)  # fp8 x fp8: the kernels' mix
    fresh(lambda x, w: jax_tmem.dot_general(x, w, dn))(x, x[:N])
    assert not [d for d in jax_tmem.decisions() if d.op.endswith(("mix", "widen"))], jax_tmem.decisions()


def test_decisions_keep_the_last_256():
    for i in range(300):
        _config.record(_config.Decision("gemm", f"p{i}", "xla", "lax.dot_general", "test"))
    ds = jax_tmem.decisions()
    assert len(ds) == 256
    assert ds[0].problem == "p44" and ds[-1].problem == "p299"
    ds.clear()  # a copy: clearing it does not clear the record
    assert len(jax_tmem.decisions()) == 256


def test_decision_str():
    d = jax_tmem.Decision("gemm", "P", "kernel", "cpu reference handler", "why")
    assert str(d) == "jax_tmem gemm P: kernel (cpu reference handler) - why"


def test_grad_records_backward_decisions(abw):
    a, b, _ = abw
    with jax_tmem.use_path("kernel"):
        jax.grad(lambda a, b: jnp.sum(jax_tmem.matmul(a, b) ** 2), argnums=(0, 1))(a, b)
    ds = jax_tmem.decisions()
    assert len(ds) == 3 and all(d.path == "kernel" for d in ds)
    # dA = g(5x6) . B(7x6)^T and dB = A(5x7)^T . g
    assert any("bfloat16[8, 16] x bfloat16[24, 16]" in d.problem for d in ds)
    assert any("bfloat16[8, 24] x bfloat16[8, 16]" in d.problem for d in ds)


# ---- path selection -------------------------------------------------------------------------------

@cpu_only
def test_cpu_auto_decision_says_xla_and_why(abw):
    a, b, _ = abw
    with jax_tmem.use_path("auto"):
        hlo = _hlo(jax_tmem.matmul, a, b)
    (d,) = jax_tmem.decisions()
    assert (d.path, d.target) == ("xla", "lax.dot_general")
    assert 'on CPU "auto" uses XLA' in d.reason and 'path "kernel"' in d.reason
    assert _n_custom_calls(hlo) == 0 and "dot_general" in hlo


@cpu_only
def test_xla_forced_is_honored(abw, seed):
    a, b, w = abw
    hlo = _hlo(_two_gemms, a, b, w, path="xla")
    assert _n_custom_calls(hlo) == 0 and "dot_general" in hlo
    ds = jax_tmem.decisions()
    assert len(ds) == 2 and all(d.path == "xla" and d.reason == 'path "xla" requested' for d in ds)
    # and the kernel path really is different code
    hlo_k = _hlo(_two_gemms, a, b, w, path="kernel")
    assert _n_custom_calls(hlo_k) == 2 and "dot_general" not in hlo_k


@cpu_only
@pytest.mark.parametrize("env,expect", [("xla", "xla"), ("kernel", "kernel"), (" Kernel ", "kernel"), ("", "auto"),
                                        ("auto", "auto")])
def test_env_path_honored(monkeypatch, abw, env, expect):
    monkeypatch.setenv("JAX_TMEM_PATH", env)
    assert jax_tmem.current_path() == expect
    a, b, w = abw
    hlo = _hlo(_two_gemms, a, b, w)
    assert _n_custom_calls(hlo) == (2 if expect == "kernel" else 0)
    ds = jax_tmem.decisions()
    assert [d.path for d in ds] == ["kernel" if expect == "kernel" else "xla"] * 2
    if expect == "xla":
        assert ds[0].reason == 'path "xla" requested'
    out = fresh(_two_gemms)(a, b, w)
    ref = ref_matmul(np.maximum(ref_matmul(a, b), 0), w)
    assert_close(out, ref, BF16, K)


@cpu_only
def test_precedence_call_over_use_path_over_env(monkeypatch, abw):
    a, b, _ = abw
    monkeypatch.setenv("JAX_TMEM_PATH", "xla")
    with jax_tmem.use_path("kernel"):
        assert jax_tmem.current_path() == "kernel"
        assert _n_custom_calls(_hlo(jax_tmem.matmul, a, b)) == 1
        with jax_tmem.use_path("xla"):
            assert jax_tmem.current_path() == "xla"
            # path= on the call wins over use_path
            assert _n_custom_calls(_hlo(lambda a, b: jax_tmem.matmul(a, b, path="kernel"), a, b)) == 1
        assert jax_tmem.current_path() == "kernel"
    assert jax_tmem.current_path() == "xla"
    assert _n_custom_calls(_hlo(jax_tmem.matmul, a, b)) == 0
    assert [d.path for d in jax_tmem.decisions()] == ["kernel", "kernel", "xla"]


def test_use_path_restored_after_exception():
    before = jax_tmem.current_path()
    with pytest.raises(RuntimeError):
        with jax_tmem.use_path("xla" if before != "xla" else "kernel"):
            raise RuntimeError("boom")
    assert jax_tmem.current_path() == before


def test_use_path_is_thread_local():
    seen = {}
    with jax_tmem.use_path("kernel"):
        t = threading.Thread(target=lambda: seen.setdefault("path", jax_tmem.current_path()))
        t.start()
        t.join()
        assert jax_tmem.current_path() == "kernel"
    assert seen["path"] == _config._env_path()


def test_jit_cache_keeps_the_traced_path(abw):
    """Documented caveat: a function traced before use_path keeps its path (no new decision)."""
    a, b, _ = abw
    f = jax.jit(lambda a, b: jax_tmem.matmul(a, b))
    with jax_tmem.use_path("xla"):
        f(a, b)
    with jax_tmem.use_path("kernel"):
        out = f(a, b)
    assert [d.path for d in jax_tmem.decisions()] == ["xla"]
    assert_close(out, ref_matmul(a, b), BF16, K)


def test_handler_jaxlib_mismatch_is_explained():
    """Handlers compiled against a newer jaxlib than the running one are reported in plain words."""
    from jax_tmem._core import ext as _ext
    info = {"jaxlib_version": "0.11.2", "ffi_api_version": (0, 4)}
    why = _ext.version_mismatch(info, "0.10.2")
    assert "compiled against jaxlib 0.11.2" in why and "0.10.2 is running" in why and "--no-build-isolation" in why
    assert _ext.version_mismatch(info, "0.11.2") == ""
    assert _ext.version_mismatch({"jaxlib_version": "0.10.2", "ffi_api_version": (0, 3)}, "0.11.2") == ""


# ---- use_path as a plain call ---------------------------------------------------------------------

@pytest.fixture
def process_path():
    """Undoes any plain use_path(...) call of the test."""
    _config._clear_process_path()
    yield
    _config._clear_process_path()


@cpu_only
def test_use_path_plain_call_sets_the_path_for_the_process(monkeypatch, abw, process_path):
    a, b, _ = abw
    monkeypatch.setenv("JAX_TMEM_PATH", "xla")
    assert jax_tmem.current_path() == "xla"
    jax_tmem.use_path("kernel")  # a plain call, as in `jax_tmem.use_path("kernel")` on its own line
    assert jax_tmem.current_path() == "kernel"
    assert _n_custom_calls(_hlo(jax_tmem.matmul, a, b)) == 1
    seen = {}
    t = threading.Thread(target=lambda: seen.setdefault("path", jax_tmem.current_path()))
    t.start()
    t.join()
    assert seen["path"] == "kernel", "a plain call sets the path for every thread"
    with jax_tmem.use_path("xla"):  # a block wins over the plain call, then gives it back
        assert jax_tmem.current_path() == "xla"
        assert _n_custom_calls(_hlo(jax_tmem.matmul, a, b)) == 0
    assert jax_tmem.current_path() == "kernel"
    jax_tmem.use_path("auto")  # a later plain call replaces it
    assert jax_tmem.current_path() == "auto"


def test_use_path_block_does_not_leak_into_the_process_setting(process_path):
    before = jax_tmem.current_path()
    with jax_tmem.use_path("xla" if before != "xla" else "kernel") as p:
        assert jax_tmem.current_path() == p.path
    assert jax_tmem.current_path() == before
    seen = {}
    with jax_tmem.use_path("kernel"):
        t = threading.Thread(target=lambda: seen.setdefault("path", jax_tmem.current_path()))
        t.start()
        t.join()
    assert seen["path"] == before, "a with block is this thread's only"


@pytest.mark.parametrize("form", ["plain", "with"])
@pytest.mark.parametrize("bad", ["gpu", "XLA", "", None, 1])
def test_use_path_rejects_a_bad_path_at_once(form, bad, process_path):
    before = jax_tmem.current_path()
    with pytest.raises(ValueError, match=r"jax_tmem.use_path: path=.*expected one of \('auto', 'kernel', 'xla'\)"):
        if form == "plain":
            jax_tmem.use_path(bad)
        else:
            with jax_tmem.use_path(bad):
                pytest.fail("entered a block with a bad path")
    assert jax_tmem.current_path() == before


def test_use_path_object_cannot_be_entered_twice(process_path):
    p = jax_tmem.use_path("xla")
    with p:
        with pytest.raises(RuntimeError, match="already in a with block"):
            with p:
                pass
