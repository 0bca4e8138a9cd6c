"""examples/train.py trains with every recipe: on the kernel path (the C++ CPU handler here, the CUDA
kernels on a GPU) each recipe's loss falls like plain Flax's and ends within a stated tolerance of it."""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

import numpy as np
import pytest

pytest.importorskip("flax")
pytest.importorskip("optax")

import jax_tmem  # noqa: E402
from conftest import recipe_kernel_path  # noqa: E402

_PATH = os.path.join(os.path.dirname(__file__), os.pardir, "examples", "train.py")
# final loss (mean of the last 5 steps) / plain Flax's, at most
TOL = {"bf16": 1.01, "fp8": 1.05, "mxfp8": 1.05, "nvfp4": 1.12, "nvfp4_sr": 1.15}


def _example():
    spec = importlib.util.spec_from_file_location("jax_tmem_train_example", _PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses (linen modules) look their module up
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("model", ["mlp", "transformer"])
def test_every_recipe_trains_like_flax(model):
    ex = _example()
    args = argparse.Namespace(model=model, d=64, hidden=128, blocks=2, heads=4, seq=32, tokens=128,
                              dtype="bfloat16", lr=2e-3)
    steps = 40
    final = {}
    for c in ["flax"] + sorted(TOL):
        with jax_tmem.use_path("auto" if c == "flax" else recipe_kernel_path(c)):
            step, _ = ex.TASKS[model](args, None if c == "flax" else c, ex.jax.random.key(0))
            losses = [float(step(i)) for i in range(steps)]
        assert np.all(np.isfinite(losses)), c
        assert np.mean(losses[-5:]) < 0.7 * np.mean(losses[:3]), (c, losses)
        final[c] = np.mean(losses[-5:])
    for c, tol in TOL.items():
        assert final[c] <= tol * final["flax"], (c, final)
