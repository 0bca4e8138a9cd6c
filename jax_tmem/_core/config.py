"""Path selection and decision logging.

Every call decides, at trace time, whether it runs a jax_tmem kernel (``"kernel"``: the CUDA kernels on
a supported GPU, the C++ reference handler on CPU) or XLA's own dot (``"xla"``). ``"auto"`` picks the
kernel where one exists for the problem and XLA otherwise. Decisions are never silent to someone who
asks: ``JAX_TMEM_LOG=1`` logs each one with its reason, and :func:`decisions` keeps the last ones.
"""

from __future__ import annotations

import collections
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


_default_lock = threading.Lock()
_default: list = [None]  # the path set by a plain use_path(...) call, for every thread (None: not set)


def current_path() -> str:
    """The path in force: the innermost ``with use_path(...)`` block of this thread, else the last plain
    ``use_path(...)`` call, else ``$JAX_TMEM_PATH``, else ``"auto"``."""
    stack = getattr(_state, "stack", None)
    if stack:
        return stack[-1]
    return _default[0] or _env_path()


class use_path:
    """Chooses the path for calls traced from now on: ``"auto"``, ``"kernel"`` or ``"xla"``.

    Two forms, and the argument is checked at once in both (``ValueError`` for anything else)::

        jax_tmem.use_path("kernel")        # a plain call: in force for the whole process from now on
        with jax_tmem.use_path("xla"):     # a block: in force inside it, in this thread, then restored
            ...

    A ``with`` block wins over a plain call, which wins over ``$JAX_TMEM_PATH``; a ``path=`` argument
    of a call wins over all of them. ``"kernel"`` raises ``ValueError`` at trace time for a problem no
    kernel can take (the message says why) instead of falling back. jit caches traces: a function
    traced before the path changed keeps the path it was traced with.
    """

    def __init__(self, path: str):
        if not isinstance(path, str) or path not in _PATHS:
            raise ValueError(f"jax_tmem.use_path: path={path!r}; expected one of {_PATHS}")
        self.path = path
        with _default_lock:  # the plain-call form takes effect now
            self._previous = _default[0]
            _default[0] = path
        self._entered = False

    def __enter__(self) -> "use_path":
        if self._entered:
            raise RuntimeError("jax_tmem.use_path: this object is already in a with block; create a new one")
        self._entered = True
        with _default_lock:  # the block form: undo the process-wide setting, scope it to this thread
            if _default[0] == self.path:
                _default[0] = self._previous
        stack = getattr(_state, "stack", None)
        if stack is None:
            stack = _state.stack = []
        stack.append(self.path)
        return self

    def __exit__(self, *exc) -> None:
        _state.stack.pop()

    def __repr__(self) -> str:
        return f"jax_tmem.use_path({self.path!r})"


def _clear_process_path() -> None:
    """Forgets the plain-call setting (tests)."""
    with _default_lock:
        _default[0] = None


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
