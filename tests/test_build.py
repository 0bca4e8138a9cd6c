"""Compile-only checks of the CUDA code (no GPU needed): the installed extension embeds real SASS for
every arch it was built for, the kernels use the tensor-core instructions they are meant to, and
ptxas kept every kernel free of spills and local memory.

Runs wherever the package was built with nvcc (CI builds sm_90a, sm_100a and sm_103a); skips with a
reason when it was built without CUDA. Needs ``cuobjdump`` and ``nvdisasm``: the ``test`` extra installs
them (nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm), or a CUDA toolkit has them; with a CUDA build and
no tools the tests fail and say which tool is missing, and a tool's failure shows its own stderr.
"""

from __future__ import annotations

import functools
import glob
import os
import re
import shutil
import subprocess

import pytest

from jax_tmem._core import ext as _ext

pytestmark = pytest.mark.cuda_build


def _cuda_info():
    info = _ext.build_info()
    if not info:
        pytest.skip("the extension is not built")
    if not info["cuda"]:
        pytest.skip(f"built without CUDA: {info['cuda_reason']}")
    return info


def _all_configs() -> bool:
    """The build has the sweep-only kernel configurations too (JAX_TMEM_CONFIGS=all, as the README's test
    command and CI build it); a default build has those the heuristic can choose."""
    return _ext.build_info().get("configs") == "all"


def _extension_path() -> str:
    from jax_tmem import _jax_tmem
    return _jax_tmem.__file__


def _find_tool(name: str) -> str:
    """`name` from PATH, the CUDA toolkit, or the NVIDIA wheels (`nvidia/cu*/bin`) that the `test` extra
    installs (nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm)."""
    cands = [shutil.which(name) or "", f"/usr/local/cuda/bin/{name}", *glob.glob(f"/usr/local/cuda-*/bin/{name}")]
    try:
        import nvidia  # a namespace package: every nvidia-* wheel adds to it
        for base in nvidia.__path__:
            cands += sorted(glob.glob(os.path.join(base, "cu*", "bin", name)), reverse=True)
    except ImportError:
        pass
    for cand in cands:
        if cand and os.path.exists(cand):
            return cand
    pytest.fail(f"{name} not found (PATH, /usr/local/cuda/bin, NVIDIA wheels): install the test extra "
                f"(pip install \".[test]\") or the CUDA toolkit")


def _run(*args) -> str:
    # cuobjdump --dump-sass runs nvdisasm, which it looks up on PATH: put the one we found there.
    cuobjdump, nvdisasm = _find_tool("cuobjdump"), _find_tool("nvdisasm")
    env = dict(os.environ, PATH=os.pathsep.join([os.path.dirname(nvdisasm), os.environ.get("PATH", "")]))
    r = subprocess.run([cuobjdump, *args, _extension_path()], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        pytest.fail(f"{cuobjdump} {' '.join(args)} failed with exit code {r.returncode}:\n{r.stderr.strip()}")
    return r.stdout


@pytest.fixture(scope="module")
def sass():
    _cuda_info()
    return _run("--dump-sass")


@pytest.fixture(scope="module")
def resources():
    _cuda_info()
    return _run("--dump-resource-usage")


def _split(text: str, header: str) -> dict[str, str]:
    """Splits cuobjdump output into chunks that start at lines matching `header` (its group 1 names
    the chunk); lines before the first header are dropped."""
    chunks, cur = {}, None
    for line in text.splitlines():
        m = re.search(header, line)
        if m:
            cur = m.group(1)
        if cur:
            chunks.setdefault(cur, []).append(line)
    return {k: "\n".join(v) for k, v in chunks.items()}


# Both parsers are cached (by the text, which the module's fixtures produce once): a CI build's SASS is hundreds of MB,
# and each test splitting it again took 40-70 s on CI's two cores (2026-12-01). Callers only read the dicts.
@functools.lru_cache(maxsize=None)
def _kernels_by_arch(text: str) -> dict[str, str]:
    """Per-arch chunks ('sm_90a' -> text)."""
    return _split(text, r"arch = (sm_\d+a?)")


@functools.lru_cache(maxsize=None)
def _functions(text: str) -> dict[str, str]:
    """One arch's SASS per kernel (mangled name -> text)."""
    return _split(text, r"Function : (\S+)")


def test_every_built_arch_has_sass(sass):
    built = [a for a in _ext.build_info()["cuda_archs"].split(",") if a]
    assert built, "a CUDA build with no archs"
    by_arch = _kernels_by_arch(sass)
    for arch in built:
        assert arch in by_arch, f"no {arch} SASS in the extension (PTX-only build?)"


def test_no_ptx_embedded():
    _cuda_info()
    out = _run("--list-ptx")
    assert ".ptx" not in out, f"PTX embedded (only real SASS should be): {out[:500]}"


@pytest.mark.parametrize("arch", ["sm_100a", "sm_103a"])
def test_sm100_uses_tcgen05(sass, arch):
    if arch not in _ext.build_info()["cuda_archs"]:
        pytest.skip(f"{arch} not built")
    code = _kernels_by_arch(sass)[arch]
    for op in ("UTCHMMA", "UTCQMMA", "UTCBAR", "UTMALDG", "LDTM",
               # the CTA-pair kernel: 2-SM MMA, multicast commit, pair TMA
               "UTCHMMA.2CTA", "UTCQMMA.2CTA", "UTCBAR.2CTA.MULTICAST", "UTMALDG.3D.2CTA"):
        assert op in code, f"{op} missing from the {arch} SASS"
    assert "HGMMA" not in code and "QGMMA" not in code, "wgmma in a Blackwell cubin"
    if _all_configs():
        # the TMA-store epilogue (config 8), and the CTA pair with it (config 9): one kernel with both
        assert "UTMASTG.3D" in code, f"UTMASTG.3D missing from the {arch} SASS"
        pair_tma = [f for f, t in _functions(code).items() if "UTCHMMA.2CTA" in t and "UTMASTG.3D" in t]
        assert pair_tma, f"no {arch} CTA-pair kernel with a TMA-store epilogue"
    # split-K / swap-AB (configs 11-14): tcgen05 kernels that trigger the reduce pass, which waits
    funcs = _functions(code)
    assert any("PREEXIT" in t and ("UTCHMMA" in t or "UTCQMMA" in t) for t in funcs.values()), \
        f"no {arch} split-K kernel (griddepcontrol.launch_dependents)"
    reduce = [t for f, t in funcs.items() if "splitk_reduce" in f]
    assert reduce and all("ACQBULK" in t for t in reduce), f"the {arch} reduce pass must wait on the GEMM grid"
    # kind::i8 exists on sm_100a only (ptxas rejects it for sm_103a, where the kernel traps instead)
    assert ("UTCIMMA" in code) == (arch == "sm_100a"), f"UTCIMMA presence wrong for {arch}"


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a", "sm_103a"])
def test_block_scaled_kernels(sass, arch):
    """The block-scaled GEMM kernels are in the cubin with their instructions. sm_100a/sm_103a: the 4 MXFP8
    mixes on kind::mxf8f6f4 (UTCQMMA), MXFP4 on kind::mxf4 (UTCOMMA) and NVFP4 on kind::mxf4nvf4 with
    block16 (UTCOMMA.4X / .BLOCK16), each with the two scale-factor TMEM operands and 4 MMAs per 128-byte k-block; the
    scales copied SMEM -> TMEM by tcgen05.cp 32x128b.warpx4 (UTCCP ... 4x32dp128bit), one per 512-byte
    block per operand: 1, 2, 4 blocks per k-block for MXFP8, MXFP4, NVFP4 (2, 4, 8 copies), after a bulk
    copy of the blocks (UBLKCP). sm_90a: the fp8 wgmma per 32-K block (QGMMA ... K32 with scale-d off) and
    f32 promotion, or (the widened schedule) the data widened to bf16 and bf16 wgmma."""
    if arch not in _ext.build_info()["cuda_archs"]:
        pytest.skip(f"{arch} not built")
    funcs = {f: t for f, t in _functions(_kernels_by_arch(sass)[arch]).items()
             if "block_scaled" in f or "Li32EEE" in f or "Li16EEE" in f}
    if arch == "sm_90a":
        funcs = {f: t for f, t in funcs.items() if "sm90_block_scaled_kernel" in f}
        assert len(funcs) >= 4, f"sm_90a block-scaled kernels missing: {sorted(funcs)}"
        for f, t in funcs.items():
            if "BsScheduleE3E" in f:  # BsSchedule::kWidened: fp8 -> f16x2 -> f32 x scale -> bf16x2, bf16 wgmma
                assert "QGMMA" not in t and re.search(r"HGMMA\.64x(128|256)x16\.F32\.BF16 R\d+, gdesc", t), \
                    f"{f}: the widened schedule runs bf16 wgmma from shared memory"
                assert re.search(r"F2FP\.F16\.E[45]M[23]\.UNPACK_B", t) and "F2FP.BF16.F32.PACK_AB" in t, \
                    f"{f}: no fp8 -> bf16 widening"
                continue
            assert re.search(r"QGMMA\.64x(64|128)x32\.F32\.E[45]M[23]\.E[45]M[23] R\d+, gdesc\[UR\d+\], RZ, !UPT", t), \
                f"{f}: no zero-initialised fp8 wgmma per 32-K block"
            assert "FFMA" in t and "LDS" in t, f"{f}: no promotion from shared-memory scales"
            if "BsScheduleE2E" in f:  # BsSchedule::kPipelined (sm90_block_scaled_configs.def)
                # two column halves per 32-K block (8 wgmma per ring slot), the next issued before the
                # previous is waited for; where ptxas serialises the wgmmas (C7514) each one is
                # followed by its own wait instead
                seq = re.findall(r"QGMMA\.64x64x32|WARPGROUP\.DEPBAR\.LE gsb0, 0x[01]", t)
                assert seq.count("QGMMA.64x64x32") == 8, f"{f}: expected 8 half-width wgmma per ring slot"
                assert any(a == b == "QGMMA.64x64x32" for a, b in zip(seq, seq[1:])), \
                    f"{f}: no two wgmma in flight (ptxas serialised them?): {seq}"
        return
    # the sm_100 Config with kSfVec = 32 or 16 (last template argument); DType 9 = float4_e2m1fn (dtypes.def)
    funcs = {f: t for f, t in funcs.items() if "sm100_gemm_kernel" in f}
    fp4 = {f: t for f, t in funcs.items() if "ConfigILNS_5DTypeE9ELS3_9E" in f}
    assert len(funcs) == 6 and len(fp4) == 2, \
        f"{arch}: expected the 4 fp8 mixes + MXFP4 + NVFP4 block-scaled tcgen05 kernels, got {sorted(funcs)}"
    for f, t in funcs.items():
        nv, mx4 = f in fp4 and "Li16EEE" in f, f in fp4 and "Li32EEE" in f
        # (nvdisasm spells kind::mxf4nvf4 block16 "UTCOMMA.4X" for sm_100a and "UTCOMMA.BLOCK16" for sm_103a)
        op = r"UTCOMMA\.(?:4X|BLOCK16)" if nv else "UTCOMMA" if mx4 else "UTCQMMA"
        # MMA gdesc[A], gdesc[B], tmem[D], tmem[SFA], idesc, tmem[SFB], p: the block-scaled form
        forms = re.findall(rf"\b{op} gdesc\[UR\d+\], gdesc\[UR\d+\], tmem\[UR\d+\], tmem\[UR\d+\], "
                           r"idesc\[UR\d+\], tmem\[UR\d+\]", t)
        assert len(forms) == 4, f"{f}: expected 4 block-scaled {op} per k-block, found {len(forms)}"
        copies = re.findall(r"UTCCP\.T\.S\.4x32dp128bit tmem\[UR\d+", t)
        assert len(copies) == (8 if nv else 4 if mx4 else 2), f"{f}: {len(copies)} tcgen05.cp 32x128b.warpx4"
        assert "UBLKCP.S.G" in t and "UTMALDG.3D" in t, f"{f}: scale blocks (bulk copy) or tiles (TMA) not loaded"


@pytest.mark.parametrize("arch", ["sm_100a", "sm_103a"])
def test_block_scaled_pair_kernels(sass, arch):
    """The CTA-pair block-scaled kernels (kernels/sm100_gemm_2cta.cuh with kSfVec 32 / 16; large problems,
    cpp/src/sm100_block_scaled.cu block_scaled_pair): the same 6 type mixes as the 1-CTA kernels, each with the
    cta_group::2 forms: 4 block-scaled MMAs (.2CTA) per 128-byte k-block with the two scale-factor TMEM operands,
    the scale copies tcgen05.cp.cta_group::2 (UTCCP ... 2CTA: one A and one B block per scale group: 2, 4, 8 per
    k-block for MXFP8, MXFP4, NVFP4), each CTA's bulk copies of its scale blocks (UBLKCP) and the pair's TMA
    (UTMALDG.3D.2CTA). Compiled and SASS-checked only: never executed on a Blackwell GPU."""
    if arch not in _ext.build_info()["cuda_archs"]:
        pytest.skip(f"{arch} not built")
    funcs = {f: t for f, t in _functions(_kernels_by_arch(sass)[arch]).items()
             if "sm100_gemm_2cta_kernel" in f and ("Li32EEE" in f or "Li16EEE" in f)}
    fp4 = {f: t for f, t in funcs.items() if "Config2CtaILNS_5DTypeE9ELS3_9E" in f}
    assert len(funcs) == 6 and len(fp4) == 2, \
        f"{arch}: expected the 4 fp8 mixes + MXFP4 + NVFP4 block-scaled CTA-pair kernels, got {sorted(funcs)}"
    for f, t in funcs.items():
        nv, mx4 = f in fp4 and "Li16EEE" in f, f in fp4 and "Li32EEE" in f
        op = r"UTCOMMA\.2CTA\.(?:4X|BLOCK16)" if nv else r"UTCOMMA\.2CTA" if mx4 else r"UTCQMMA\.2CTA"
        forms = re.findall(rf"\b{op} gdesc\[UR\d+\], gdesc\[UR\d+\], tmem\[UR\d+\], tmem\[UR\d+\], "
                           r"idesc\[UR\d+\], tmem\[UR\d+\]", t)
        assert len(forms) == 4, f"{f}: expected 4 block-scaled {op} per k-block, found {len(forms)}"
        assert not re.search(r"\bUTC[QO]MMA(?!\.2CTA)", t), f"{f}: a cta_group::1 MMA in the pair kernel"
        copies = re.findall(r"UTCCP\.T\.S\.2CTA\.4x32dp128bit tmem\[UR\d+", t)
        assert len(copies) == (8 if nv else 4 if mx4 else 2), f"{f}: {len(copies)} tcgen05.cp.cta_group::2 32x128b.warpx4"
        assert "UBLKCP.S.G" in t and "UTMALDG.3D.2CTA" in t, f"{f}: scale blocks (bulk copy) or pair tiles (TMA) not loaded"


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a", "sm_103a"])
def test_fused_quantize_kernel_built(sass, arch):
    """The fused quantize kernel (kernels/mx_quantize.cuh) is in every built arch: bf16 / f16 / f32 in,
    MXFP8 (e4m3, e5m2), MXFP4 and NVFP4 out (QFmt 0-3), 16-byte vector loads, 16-byte stores of a 32-block
    (32 fp8 or 32 packed e2m1 codes: 16 bytes) and 8-byte stores of NVFP4's 16-block; NVFP4 divides with
    div.full.f32 (MUFU.RCP, no IEEE division subroutine) as XLA does. And MXFP8's quantize-dequantize."""
    if arch not in _ext.build_info()["cuda_archs"]:
        pytest.skip(f"{arch} not built")
    all_funcs = _functions(_kernels_by_arch(sass)[arch])
    funcs = {f: t for f, t in all_funcs.items() if "mx_quantize_kernel" in f}
    # the quantize-dequantize (template argument kDq = true: "Lb1E"): MXFP8 codes decoded again and written
    # as bf16 (fp8 -> f16 unpack, f32 product, bf16 pack, 16-byte stores)
    dq = {f: t for f, t in funcs.items() if "Lb1E" in f}
    funcs = {f: t for f, t in funcs.items() if f not in dq}
    assert len(dq) == 6, f"{arch}: expected 6 quantize-dequantize kernels (3 input types x 2 MXFP8), got {sorted(dq)}"
    for f, t in dq.items():
        assert re.search(r"F2FP\.F16\.E[45]M[23]\.UNPACK_B", t) and "F2FP.BF16.F32.PACK_AB" in t, f"{f}: no decode to bf16"
        assert "LDG.E.128" in t and "STG.E.128" in t, f"{f}: no 16-byte loads / stores"
    assert len(funcs) == 12, f"{arch}: expected 12 quantize kernels (3 input types x 4 formats), got {sorted(funcs)}"
    for f, t in funcs.items():
        nv = "QFmtE3E" in f
        assert "LDG.E.128" in t and ("STG.E.64" if nv else "STG.E.128") in t, f"{f}: no 16-byte loads / block stores"
        if nv:
            assert "MUFU.RCP" in t, f"{f}: no div.full.f32 (MUFU.RCP)"
    # along the second-to-last axis: the CTA-tile kernel for float32 x (4 formats) and 16-bit x to MXFP8 (2 x 2),
    # the column-pair kernel for 16-bit x to MXFP4 / NVFP4 (2 x 2): 4-byte row loads, one byte of two codes per row
    colwise = {f: t for f, t in all_funcs.items() if "mx_quantize_colwise_kernel" in f}
    assert len(colwise) == 8, f"{arch}: expected 8 CTA-tile colwise quantize kernels, got {sorted(colwise)}"
    for f, t in colwise.items():
        assert "LDG.E.128" in t, f"{f}: no 16-byte row loads"
    # (x 2 dtypes, + NVFP4's prefetching form: "Lb1"), each with the pair encoder (e2m1_pair_byte: the signs
    # by one mad.hi with 2^8 + 2^20); the rowwise 4-bit kernels of 16-bit x use it too
    pairs = {f: t for f, t in all_funcs.items() if "mx_quantize_colwise_pair_kernel" in f}
    assert len(pairs) == 6 and all("QFmtE2E" in f or "QFmtE3E" in f for f in pairs), sorted(pairs)
    assert sorted(f for f in pairs if "ELb1E" in f) == sorted(f for f in pairs if "QFmtE3ELb1E" in f), sorted(pairs)
    assert len([f for f in pairs if "ELb1E" in f]) == 2, sorted(pairs)
    for f, t in pairs.items():
        assert re.search(r"LDG\.E\.CONSTANT R", t) and "STG.E.U8" in t and "BAR" not in t, f"{f}: not 4-byte row loads and byte stores"
        assert re.search(r"IMAD\.HI\.U32 R\d+, R\d+, 0x100100", t), f"{f}: no pair encoder"
    for f, t in funcs.items():
        if ("QFmtE2E" in f or "QFmtE3E" in f) and "IfL" not in f:  # 16-bit x to MXFP4 / NVFP4, rowwise
            assert re.search(r"IMAD\.HI\.U32 R\d+, R\d+, 0x100100", t), f"{f}: no pair encoder"


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a", "sm_103a"])
def test_weight_only_4bit_kernel_built(sass, arch):
    """The weight-only 4-bit GEMM (kernels/w4_gemm.cuh) is in every built arch: 10 distinct (token tiles,
    rows per warp, chunks per step) instances (cpp/src/w4_gemm.cu) x MXFP4 / NVFP4 x 3 output types, each streaming the packed weights with 16-byte loads,
    widening them with byte permutes and multiplying with bf16 mma.sync (HMMA.16816.F32.BF16)."""
    if arch not in _ext.build_info()["cuda_archs"]:
        pytest.skip(f"{arch} not built")
    funcs = {f: t for f, t in _functions(_kernels_by_arch(sass)[arch]).items() if "w4_gemm_kernel" in f}
    assert len(funcs) == 60, f"{arch}: expected 60 weight-only kernels, got {len(funcs)}"
    for f, t in funcs.items():
        assert "HMMA.16816.F32.BF16" in t, f"{f}: no bf16 mma.sync"
        assert "PRMT" in t and "LDG.E.NA.128" in t, f"{f}: no byte-permute widening or streaming 16-byte loads"


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a", "sm_103a"])
def test_weight_only_many_token_kernels_built(sass, arch):
    """The many-token 4-bit GEMMs (cpp/src/w4_gemm.cu) in every built arch: kernels/w4_wide.cuh, 48 instances
    (32- / 64-token tiles x clusters of 1, 2, 3, 4 x MXFP4 / NVFP4 x 3 output types) fed by TMA, widening with
    byte permutes into bf16 mma.sync; kernels/w4_wgmma.cuh, 72 instances (16-, 32-, 64-token tiles), whose
    sm_90a code issues wgmma with A from registers (HGMMA.64xNx16 R, R, gdesc) and is empty elsewhere."""
    if arch not in _ext.build_info()["cuda_archs"]:
        pytest.skip(f"{arch} not built")
    funcs = _functions(_kernels_by_arch(sass)[arch])
    wide = {f: t for f, t in funcs.items() if "w4_wide_kernel" in f}
    assert len(wide) == 48, f"{arch}: expected 48 mma.sync many-token kernels, got {len(wide)}"
    for f, t in wide.items():
        assert "HMMA.16816.F32.BF16" in t and "UTMALDG" in t and "PRMT" in t, f"{f}: no TMA / widening / mma.sync"
    wg = {f: t for f, t in funcs.items() if "w4_wgmma_kernel" in f}
    assert len(wg) == 72, f"{arch}: expected 72 wgmma many-token kernels, got {len(wg)}"
    for f, t in wg.items():
        if arch == "sm_90a":
            assert re.search(r"HGMMA\.64x(16|32|64)x16\.F32\.BF16 R\d+, R\d+, gdesc", t), f"{f}: no register-A wgmma"
            assert "UTMALDG" in t and "PRMT" in t, f"{f}: no TMA loads or byte-permute widening"
        else:
            assert "HGMMA" not in t and "UTMALDG" not in t, f"{f}: the wgmma kernel is sm_90a code"


def test_sm90_mixed_decode_kernels(sass):
    """16-bit activations x an e4m3 weight (kernels/dense_decode.cuh kMix): the decode kernels of the bf16 and f16
    x e4m3 families read the weight by TMA, widen it on chip (e4m3 -> f16 conversions) and multiply with 16-bit
    mma.sync, and (a weight stored (K, N)) with wgmma whose A, the widened weight, comes from registers."""
    if "sm_90a" not in _ext.build_info()["cuda_archs"]:
        pytest.skip("sm_90a not built")
    funcs = _functions(_kernels_by_arch(sass)["sm_90a"])
    for x, mma, wg in (("1", r"HMMA\.16816\.F32\.BF16", r"HGMMA\.64x(16|32|64)x16\.F32\.BF16 R\d+"),
                       ("2", r"HMMA\.16816\.F32 ", r"HGMMA\.64x(16|32|64)x16\.F32 R\d+")):
        mixed = {f: t for f, t in funcs.items() if re.search(rf"dense_decode_kernelILNS_5DTypeE3ELS2_{x}E", f)}
        forms = {_decode_wg(f) for f in mixed}
        assert forms == {"0", "1"}, f"activation type {x} x e4m3: decode kernels of forms {forms} (want mma.sync, wgmma)"
        for f, t in mixed.items():
            assert "F2FP.F16.E4M3.UNPACK_B" in t and "UTMALDG" in t, f"{f}: no TMA loads or on-chip widening"
            assert re.search(wg if _decode_wg(f) == "1" else mma, t), f"{f}: no 16-bit mma of the widened weight"


def _decode_wg(name: str) -> str:
    """kWG ('0' / '1') of a mangled dense_decode_kernel: its last bool template argument (CK, an int, follows)."""
    return re.findall(r"Lb([01])E", name.split("EEEv")[0])[-1]


def test_sm90_decode_k_split_in_clusters(sass):
    """Entries 51-54 (kernels/dense_decode.cuh CK = 2: the K range over a 2-CTA cluster): their kernels meet in two
    cluster barriers per thread (producer and consumers: UCGABAR_ARV / UCGABAR_WAIT) before and after reading the
    peer's sums; the CK = 1 kernels hold no cluster barrier."""
    if "sm_90a" not in _ext.build_info()["cuda_archs"]:
        pytest.skip("sm_90a not built")
    decode = {f: t for f, t in _functions(_kernels_by_arch(sass)["sm_90a"]).items() if "dense_decode_kernel" in f}
    ck = {f: re.findall(r"ELi(\d+)$", f.split("EEEv")[0])[-1] for f in decode}
    assert set(ck.values()) == {"1", "2"}, set(ck.values())
    for f, t in decode.items():
        assert ("UCGABAR_ARV" in t and "UCGABAR_WAIT" in t) == (ck[f] == "2"), f
    wg = {_decode_wg(f) for f in decode if ck[f] == "2"}
    assert wg == {"0", "1"}, wg  # 54 (mma.sync) and 51-53 (wgmma)


def test_sm90_uses_wgmma(sass):
    if "sm_90a" not in _ext.build_info()["cuda_archs"]:
        pytest.skip("sm_90a not built")
    sm90 = _kernels_by_arch(sass)["sm_90a"]
    for op in ("HGMMA.64x256x16.F32.BF16", "HGMMA.64x128x16.F32 ", "HGMMA.64x256x8.F32.TF32",
               "QGMMA.64x256x32.F32.E4M3.E4M3", "QGMMA.64x128x32.F32.E5M2.E4M3"):
        assert op.strip() in sm90, f"{op.strip()} missing from the sm_90a SASS"
    assert "UTMALDG" in sm90, "TMA loads (UTMALDG) missing from the sm_90a SASS"
    if _all_configs():  # the 2x1-cluster entries are sweep-only
        assert "UTMALDG.3D.MULTICAST" in sm90, "the 2x1-cluster kernels' B multicast is missing from the sm_90a SASS"
    assert "UTMASTG.3D" in sm90, "the TMA-store epilogue (configs 8, 9, 20) is missing from the sm_90a SASS"
    assert "SYNCS.PHASECHK" in sm90, "mbarrier waits missing from the sm_90a SASS"
    # swap-AB decode kernels: the narrow wgmma N; split-K: the programmatic dependent launch of the
    # reduce pass (griddepcontrol.launch_dependents -> PREEXIT, griddepcontrol.wait -> ACQBULK)
    for op in ("HGMMA.64x16x16.F32.BF16", "HGMMA.64x32x16.F32.BF16", "QGMMA.64x16x32.F32.E4M3.E4M3",
               "PREEXIT", "ACQBULK"):
        assert op in sm90, f"{op} missing from the sm_90a SASS"
    funcs = _functions(sm90)
    reduce = [t for f, t in funcs.items() if "splitk_reduce" in f]
    assert reduce and all("ACQBULK" in t for t in reduce), "the reduce pass must wait on its prerequisite grid"
    assert any("PREEXIT" in t and "HGMMA.64x16x16" in t for t in funcs.values()), "swap-AB kernel without PDL trigger"
    # the TMA-store epilogue packs 16-bit outputs into its shared-memory box with stmatrix
    tma_store = [t for t in funcs.values() if "UTMASTG.3D" in t and "HGMMA" in t]
    assert tma_store and all("STSM.16.M88.4" in t for t in tma_store), "TMA-store kernels without stmatrix"


def test_sm90_partial_entries_have_a_compact_twin(sass):
    """The split-K / swap-AB kernels come in twins (Config::kFusedFinish): one finishes a fused epilogue per
    element itself, the other (which the launcher runs for plain casts and wherever the reduce pass finishes)
    has none of that code: at most 60 % of the instructions, since a decode GEMM fetches its code cold. Both
    sum K splits in a thread-block cluster (barrier.cluster: UCGABAR) where the tile is at most
    kMaxClusterSplitBlockN (192) wide, or 256 wide with 16-bit / tf32 operands (menu::cluster_splits_fit,
    Config::kSplitsInKernel; the 8-bit 256-wide entry has none)."""
    if "sm_90a" not in _ext.build_info()["cuda_archs"]:
        pytest.skip("sm_90a not built")
    funcs = _functions(_kernels_by_arch(sass)["sm_90a"])
    pat = re.compile(r"sm90_gemm_kernel.*ELi([12])ELi(\d+)ELb[01]ELb([01])ELb0EEEE")  # (the last: kActGrad)
    twins = {}
    for f, t in funcs.items():
        m = pat.search(f)
        if m:
            twins.setdefault(f[:m.start(3)] + f[m.end(3):], {})[m.group(3)] = t
    assert twins, "no sm_90a split-K / swap-AB kernels found"
    size = lambda t: len(re.findall(r"/\*[0-9a-f]{4,}\*/", t))  # noqa: E731
    for name, pair in twins.items():
        assert set(pair) == {"0", "1"}, f"{name}: only the kFusedFinish={set(pair)} kernel was built"
        assert size(pair["0"]) <= 0.6 * size(pair["1"]), \
            f"{name}: the plain twin has {size(pair['0'])} instructions, the fused one {size(pair['1'])}"
        dtype, block_n = (int(g) for g in re.search(r"ConfigILNS_5DTypeE(\d+)ELS\d+_\d+ELi(\d+)E", name).groups())
        fits = block_n <= 192 or dtype in (0, 1, 2)  # DType codes (dtypes.def order): f32, bf16, f16
        clustered = ["UCGABAR_ARV" in t and "UCGABAR_WAIT" in t for t in pair.values()]
        assert all(clustered) if fits else not any(clustered), f"{name} ({block_n} wide): {clustered}"


def test_no_spills_or_local_memory(resources):
    entries = re.findall(r"Function (\S+):\s*\n\s*REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", resources)
    assert entries, "no kernels found in the resource report"
    for name, reg, stack, shared, local in entries:
        assert int(stack) == 0 and int(local) == 0, f"{name}: STACK={stack} LOCAL={local} (spills or local arrays)"
        assert int(reg) <= 255, f"{name}: {reg} registers"
        assert int(shared) <= 232448, f"{name}: {shared} bytes of static shared memory"


def _compile_cuda(tmp_path, source: str, flags: list, arch: str = "sm_90a") -> tuple:
    """`source` compiled for `arch` (sm_90a unless named) with nvcc (-O3, the headers of cpp/include, `flags`): ptxas's
    resource report (stderr) and the SASS. Skips where the extension has no CUDA build or no source checkout is next
    to the tests."""
    _cuda_info()
    include = os.path.join(os.path.dirname(__file__), "..", "cpp", "include")
    if not os.path.isdir(include):
        pytest.skip("no source checkout next to the tests")
    src, cubin = tmp_path / "k.cu", tmp_path / "k.cubin"
    src.write_text(source)
    r = subprocess.run([shutil.which("nvcc") or _find_tool("nvcc"), "-std=c++17", "-O3", f"-arch={arch}", "-cubin",
                        "--expt-relaxed-constexpr", "-I", include, "-Xptxas", "-v", *flags, "-o", str(cubin), str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    env = dict(os.environ, PATH=os.pathsep.join([os.path.dirname(_find_tool("nvdisasm")), os.environ.get("PATH", "")]))
    sass = subprocess.run([_find_tool("cuobjdump"), "-sass", str(cubin)], capture_output=True, text=True, env=env).stdout
    return r.stderr, sass


_NO_SPILLS = "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"
# The 128x256 cooperative entry with its TMA-store epilogue under the next tile's MMAs (entry 20; 22 with
# CLUSTER = 2), bf16, B stored (K, N) if BMN.
_ENTRY_128x256 = ("sm90::Config<DType::kBF16, DType::kBF16, 256, 4, false, {bmn}, false, false, {cluster}, true, 0, 128, "
                  "true, true>")
_GEMM_HEADER = '#include "jax_tmem/kernels/sm90_gemm.cuh"\nusing namespace jax_tmem;\n'


def test_mbarrier_wait_sleeps_only_with_the_suspend_option(tmp_path):
    """cpp/include/jax_tmem/ptx/mbarrier.cuh's wait: a TRYWAIT + BRA spin by default; with
    -DJAX_TMEM_MBARRIER_SUSPEND=ON (the CMake option, off: no gain measured on an H200) the retry path
    sleeps in NANOSLEEP.SYNCS (the suspend-time hint). A small kernel compiled both ways for sm_90a."""
    source = ('#include "jax_tmem/ptx/mbarrier.cuh"\n'
              "__global__ void k(int* out) {\n  __shared__ uint64_t bar;\n"
              "  if (threadIdx.x == 0) jax_tmem::ptx::mbarrier_init(&bar, 1);\n  __syncthreads();\n"
              "  jax_tmem::ptx::mbarrier_arrive(&bar);\n  jax_tmem::ptx::mbarrier_wait(&bar, 0);\n"
              "  out[threadIdx.x] = 1;\n}\n")
    found = {}
    for flag in ("", "-DJAX_TMEM_MBARRIER_SUSPEND=1"):
        _, out = _compile_cuda(tmp_path, source, [flag] if flag else [])
        assert "SYNCS.PHASECHK.TRANS64.TRYWAIT" in out, out
        found[flag] = "NANOSLEEP.SYNCS" in out
    assert found == {"": False, "-DJAX_TMEM_MBARRIER_SUSPEND=1": True}, found


def test_pinned_descriptors_leave_one_shared_base_computation(tmp_path):
    """The JAX_TMEM_PIN_DESCRIPTORS option (off: no gain measured on an H200): the sm_90a 128x256 entry (bf16, TMA-store
    epilogue overlapped, last wave shared) compiled for one instantiation both ways. By default ptxas rebuilds the
    shared-memory base (S2UR SR_SWINHI) in several places, the consumer's k-block loop among them; pinned, once, and
    the kernel's generic stores to shared memory become STS."""
    source = (_GEMM_HEADER + f"using C = {_ENTRY_128x256.format(bmn='true', cluster=1)};\n"
              "void* kernel_ptr() { return (void*)sm90::sm90_gemm_kernel<C>; }\n")
    counts = {}
    for flag in ("", "-DJAX_TMEM_PIN_DESCRIPTORS=1"):
        _, out = _compile_cuda(tmp_path, source, [flag] if flag else [])
        assert out.count("HGMMA.64x256x16.F32.BF16") >= 4, out[:2000]
        counts[flag] = (len(re.findall(r"S2UR \w+, SR_SWINHI", out)), len(re.findall(r"\bST\.E\b", out)))
    (base_default, st_default), (base_pinned, st_pinned) = counts[""], counts["-DJAX_TMEM_PIN_DESCRIPTORS=1"]
    assert base_pinned == 1 < base_default, counts
    assert st_pinned < st_default, counts


def test_release_per_warpgroup_only_for_cooperative_dense_entries(tmp_path):
    """The cooperative dense entries release a ring slot once per consumer warpgroup instead of once per warp
    (measured faster on an H200, 2026-11-29); ping-pong and split-K / swap-AB entries never (their transposing entries
    read the ring with generic loads in every warp). The 2x1-cluster 128x256 entry (empty barriers count 4 arrives,
    not 16) compiled for sm_90a: which entries take it, and no spills."""
    source = (_GEMM_HEADER + f"using Coop = {_ENTRY_128x256.format(bmn='false', cluster=2)};\n"
              "using Ping = sm90::Config<DType::kBF16, DType::kBF16, 128, 6, false, false, true>;\n"
              "using Part = sm90::Config<DType::kBF16, DType::kBF16, 128, 6, false, false, false, false, 1, false, 2>;\n"
              "static_assert(Coop::kReleasePerWarpgroup, \"cooperative\");\n"
              "static_assert(!Ping::kReleasePerWarpgroup && !Part::kReleasePerWarpgroup, \"ping-pong, split-K\");\n"
              "void* kernel_ptr() { return (void*)sm90::sm90_gemm_kernel<Coop>; }\n")
    report, _ = _compile_cuda(tmp_path, source, [])
    assert _NO_SPILLS in report, report


@pytest.mark.parametrize("bmn", ["false", "true"])
@pytest.mark.parametrize("cluster", [1, 2])
def test_act_grad_twin(tmp_path, bmn, cluster):
    """The derivative epilogue's twin of entries 20 / 22 (Config::kActGrad, kernels/sm90_act_grad.cuh), B stored (N, K)
    and (K, N): no spills (ptxas spilled 120-300 bytes while one kernel held it beside every other epilogue); c comes
    by TMA into the output boxes (TMA loads from the consumer warps besides the ring's), is read with ldmatrix and
    stored back with stmatrix, act' from MUFU.TANH."""
    entry = _ENTRY_128x256.format(bmn=bmn, cluster=cluster)
    source = (_GEMM_HEADER + f"using Twin = {entry}::WithActGrad;\n"
              "static_assert(Twin::kActGrad && !" + entry + "::kActGrad, \"the twin\");\n"
              "void* kernel_ptr() { return (void*)sm90::sm90_gemm_kernel<Twin>; }\n")
    report, sass = _compile_cuda(tmp_path, source, [])
    assert _NO_SPILLS in report, report
    for op in ("MUFU.TANH", "LDSM.16.M88.4", "STSM.16.M88.4", "UTMASTG.3D", "HGMMA.64x256x16.F32.BF16"):
        assert op in sass, f"{op} missing from the act_grad twin"


def test_tail_boxes_only_for_k_major_operands(tmp_path):
    """A K-major operand's last row block (M or N past a multiple of the tile) is loaded through a second tensor map
    whose box holds just its rows, rounded up to 8 (jax_tmem/tail_boxes.h; mostly out-of-bounds boxes made the 8B
    layer's GEMMs at 72-96 tokens 1.2-1.6x slower than at 128 on an H200, 2026-11-29). Which operands take one:
    K-major A and B; never an MN-major operand, an A transposed in shared memory, a B multicast to a cluster, or a
    block that rounds up to the whole tile. Compiled for sm_90a with the kernels that take it: no spills (the
    256-token transposing entry's producer runs in 24 registers)."""
    source = (_GEMM_HEADER +
              "using Dense = sm90::Config<DType::kBF16, DType::kBF16, 64, 8, false, false>;\n"
              "using KN = sm90::Config<DType::kBF16, DType::kBF16, 64, 8, false, true>;\n"
              "using MN = sm90::Config<DType::kBF16, DType::kBF16, 64, 8, true, false>;\n"
              f"using Cluster = {_ENTRY_128x256.format(bmn='false', cluster=2)};\n"
              "using Swap = sm90::Config<DType::kE4M3, DType::kE4M3, 16, 5, false, false, false, false, 1, false, 2, 64>;\n"
              "using Trans = sm90::Config<DType::kE4M3, DType::kE4M3, 256, 4, true, false, false, false, 1, false, 2>;\n"
              "static_assert(TailBoxes<Dense>(80, 6144).a_rows == 80 && TailBoxes<Dense>(80, 6144).b_rows == 0, \"\");\n"
              "static_assert(TailBoxes<Dense>(77, 100).a_rows == 80 && TailBoxes<Dense>(77, 100).b_rows == 40, \"\");\n"
              "static_assert(TailBoxes<Dense>(128, 64).a_rows == 0 && TailBoxes<Dense>(121, 64).a_rows == 0, \"whole\");\n"
              "static_assert(TailBoxes<KN>(80, 100).a_rows == 80 && TailBoxes<KN>(80, 100).b_rows == 0, \"MN-major B\");\n"
              "static_assert(TailBoxes<MN>(80, 100).a_rows == 0 && TailBoxes<MN>(80, 100).b_rows == 40, \"MN-major A\");\n"
              "static_assert(TailBoxes<Cluster>(300, 1000).a_rows == 48 && TailBoxes<Cluster>(300, 1000).b_rows == 0, \"\");\n"
              "static_assert(TailBoxes<Swap>(4104, 5).a_rows == 8 && TailBoxes<Swap>(4104, 5).b_rows == 8, \"swap-AB\");\n"
              "static_assert(Trans::kATrans && TailBoxes<Trans>(4100, 200).a_rows == 0 && "
              "TailBoxes<Trans>(4100, 200).b_rows == 200, \"transposed A\");\n"
              "void* k1() { return (void*)sm90::sm90_gemm_kernel<Dense>; }\n"
              "void* k2() { return (void*)sm90::sm90_gemm_kernel<Swap>; }\n"
              "void* k3() { return (void*)sm90::sm90_gemm_kernel<Trans>; }\n")
    report, _ = _compile_cuda(tmp_path, source, [])
    assert report.count(_NO_SPILLS) == 3, report


def test_swap_ab_weight_multicast_along_the_tokens(tmp_path):
    """sm_90a entry 39 (the .def cluster field -2): a swap-AB tile's two token tiles in one (2,1,1) cluster, each CTA
    loading half of the weight tile (64 rows) into both by TMA multicast and its own 96 tokens (a tail box where the
    tokens end; the weight none: multicast boxes are whole). Config geometry, tail boxes, and the compiled kernel for a
    K-major and an MN-major 16-bit weight and an fp8 one: multicast loads, cluster barriers, no spills."""
    source = (_GEMM_HEADER +
              "using K = sm90::Config<DType::kBF16, DType::kBF16, 96, 7, false, false, false, false, -2, false, 2>;\n"
              "using MN = sm90::Config<DType::kBF16, DType::kBF16, 96, 7, true, false, false, false, -2, false, 2>;\n"
              "using F8 = sm90::Config<DType::kE4M3, DType::kE4M3, 96, 7, false, false, false, false, -2, false, 2>;\n"
              "static_assert(K::CLUSTER_N == 2 && K::CLUSTER_M == 1 && K::CTAS_PER_TILE == 2, \"cluster\");\n"
              "static_assert(K::TILE_N == 192 && K::TILE_M == 128 && K::BOX_M == 64 && K::BOX_N == 96, \"boxes\");\n"
              "static_assert(!K::kSplitsInKernel && !K::kTailSplit, \"no splits in the kernel\");\n"
              "static_assert(TailBoxes<K>(4104, 150).a_rows == 0 && TailBoxes<K>(4104, 150).b_rows == 56, \"tails\");\n"
              "void* k1() { return (void*)sm90::sm90_gemm_kernel<K>; }\n"
              "void* k2() { return (void*)sm90::sm90_gemm_kernel<MN>; }\n"
              "void* k3() { return (void*)sm90::sm90_gemm_kernel<F8>; }\n")
    report, sass = _compile_cuda(tmp_path, source, [])
    assert report.count(_NO_SPILLS) == 3, report
    funcs = _functions(sass)
    assert len(funcs) == 3, list(funcs)
    for f, t in funcs.items():
        assert "UTMALDG.3D.MULTICAST" in t and "UCGABAR_ARV" in t and "UCGABAR_WAIT" in t, f
        assert re.search(r"[HQ]GMMA\.64x96x(16|32)\.F32", t), f


def test_sm100_tail_boxes_in_the_one_cta_kernel(tmp_path):
    """The 1-CTA sm_100a kernel takes the same tail maps (its producer picks the map and the stage's byte count as the
    sm_90a one does; TailBoxes with CLUSTER_M 1 and no transposed A): K-major A / B get a tail box, MN-major ones
    and whole blocks none; compiled for sm_100a with two tensor maps more, no spills. (Never run: no Blackwell GPU
    here; tests/test_tail_boxes.py checks the values on a user's B200.)"""
    source = ('#include "jax_tmem/kernels/sm100_gemm.cuh"\nusing namespace jax_tmem;\n'
              "using Dense = sm100::Config<DType::kBF16, DType::kBF16, 256, 4, false, false>;\n"
              "using MN = sm100::Config<DType::kE4M3, DType::kE4M3, 128, 6, true, true>;\n"
              "using Swap = sm100::Config<DType::kBF16, DType::kBF16, 64, 9, false, false, false, 2>;\n"
              "static_assert(TailBoxes<Dense>(80, 6144).a_rows == 80, \"\");\n"
              "static_assert(TailBoxes<Dense>(77, 100).b_rows == 104, \"\");\n"
              "static_assert(TailBoxes<Dense>(256, 512).a_rows == 0 && TailBoxes<Dense>(250, 250).b_rows == 0, \"\");\n"
              "static_assert(TailBoxes<MN>(80, 100).a_rows == 0 && TailBoxes<MN>(80, 100).b_rows == 0, \"MN\");\n"
              "static_assert(TailBoxes<Swap>(4104, 40).a_rows == 8 && TailBoxes<Swap>(4104, 40).b_rows == 40, \"\");\n"
              "void* k1() { return (void*)sm100::sm100_gemm_kernel<Dense>; }\n"
              "void* k2() { return (void*)sm100::sm100_gemm_kernel<Swap>; }\n")
    report, sass = _compile_cuda(tmp_path, source, [], arch="sm_100a")
    assert report.count(_NO_SPILLS) == 2, report
    assert sass.count("UTCHMMA") > 0 and "UTMALDG.3D" in sass, sass[:2000]


def test_build_info_names_the_kernel_options_a_build_turned_on():
    """build_info()["dev_options"] lists the kernel options for measuring (CMakeLists.txt) this extension was built
    with, and the report prints them, so a benchmark of a variant build says what it ran. A build as the README
    makes it (these tests' build) has none on unless $JAX_TMEM_EXPECT_DEV_OPTIONS names them (comma-separated)."""
    info = _ext.build_info()
    if not info:
        pytest.skip("the extension is not built")
    want = sorted(o for o in os.environ.get("JAX_TMEM_EXPECT_DEV_OPTIONS", "").split(",") if o)
    assert sorted(info["dev_options"]) == want, info
