"""Path selection and decision logging.

Every call decides, at trace time, whether it runs a jax_tmem kernel (``"kernel"``: the CUDA kernels on
a supported GPU, the C++ reference handler on CPU) or XLA's own dot (``"xla"``). ``"auto"`` picks the
kernel where one exists for the problem and XLA otherwise. Decisions are never silent to someone who
asks: ``JAX_TMEM_LOG=1`` logs each one with its reason, and :func:`decisions` keeps the last ones.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import threading
from dataclasses import dataclass

_PATHS = ("auto", "kernel", "xla")
_logger = logging.getLogger("jax_tmem")
_state = threading.local()
_recent: collections.deque = collections.deque(maxlen=256)


def _env_path() -> str:
    p = os.environ.get("JAX_TMEM_PATH", "auto").strip().lower() or "auto"
    if p not in _PATHS:
        raise ValueError(f"JAX_TMEM_PATH={p!r}: expected one of {_PATHS}")
    return p


def current_path() -> str:
    """The path in force: the innermost :func:`use_path`, else ``$JAX_TMEM_PATH``, else ``"auto"``."""
    stack = getattr(_state, "stack", None)
    return stack[-1] if stack else _env_path()


@contextlib.contextmanager
def use_path(path: str):
    """Force a path for calls traced inside the block: ``"auto"``, ``"kernel"`` or ``"xla"``.

    ``"kernel"`` raises ``ValueError`` at trace time for a problem no kernel can take (the message says
    why) instead of falling back. Note that jit caches traces: a function traced before entering the
    block keeps the path it was traced with.
    """
    if path not in _PATHS:
        raise ValueError(f"path={path!r}: expected one of {_PATHS}")
    stack = getattr(_state, "stack", None)
    if stack is None:
        stack = _state.stack = []
    stack.append(path)
    try:
        yield
    finally:
        stack.pop()


@dataclass(frozen=True)
class Decision:
    op: str
    problem: str
    path: str     # "kernel" or "xla"
    target: str   # e.g. "cuda sm_90a, 128x256 cooperative (config 1, heuristic, 132 SMs)", "lax.dot_general"
    reason: str

    def __str__(self) -> str:
        return f"jax_tmem {self.op} {self.problem}: {self.path} ({self.target}) - {self.reason}"


def _log_enabled() -> bool:
    return os.environ.get("JAX_TMEM_LOG", "0").strip().lower() not in ("", "0", "false", "no")


def record(decision: Decision) -> None:
    _recent.append(decision)
    if _log_enabled():
        # Records propagate to the root's handlers whatever the root's own level, so setting ours to
        # INFO is what makes them visible after logging.basicConfig(); add a stderr handler only when
        # nothing would print them.
        if _logger.level == logging.NOTSET or _logger.level > logging.INFO:
            _logger.setLevel(logging.INFO)
        if not _logger.handlers and not logging.getLogger().handlers:
            h = logging.StreamHandler()
            h.setFormatter(logging.Formatter("%(message)s"))
            _logger.addHandler(h)
        _logger.info(str(decision))


def decisions() -> list[Decision]:
    """The most recent path decisions (up to 256), oldest first."""
    return list(_recent)


def clear_decisions() -> None:
    _recent.clear()
