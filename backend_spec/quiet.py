"""Keep torch's quantization deprecation warnings (and its warnings about bespec's own
synthesized models) out of bespec's output.

Every ``torch.ao.quantization`` entry point warns that it is deprecated in favour of torchao.
bespec is a tool for that very API, so the warnings are noise to its users. This module
imports nothing heavy, so the CLI can silence them before torch loads.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import warnings
from collections.abc import Iterator

_NOISE = (
    r".*deprecat.*",
    r".*torchao.*",
    r".*Failed to initialize NumPy.*",
    r".*must run observer before calling calculate_qparams.*",
    r".*TypedStorage.*",
    # torch.export of the one-op models bespec synthesizes (an RNN's _flat_weights): about
    # bespec's own throwaway model, never the user's.
    r".*were assigned during export.*",
)


def _install_filters() -> None:
    for pattern in _NOISE:
        warnings.filterwarnings("ignore", message=pattern)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)


# ``warnings.catch_warnings`` saves and restores the process-wide filter list, so two threads
# that overlap restore each other's copies and can leave ``ignore`` filters behind. Instead the
# first thread in adds bespec's filters (as distinct objects) and the last one out removes
# exactly those, under a lock; filters the caller adds meanwhile are kept.
_LOCK = threading.Lock()
_active: list[tuple] = []
#: The one noise torch logs instead of warning: torchao registers an Enum with pytree when it
#: loads, and torch 2.13 logs that this is deprecated (about a library, never the spec).
_PYTREE = logging.getLogger("torch.utils._pytree")
_saved_levels: list[int] = []
_depth = 0


def _quiet_filters() -> list[tuple]:
    items = [("ignore", re.compile(p, re.I), Warning, None, 0) for p in _NOISE]
    items += [("ignore", None, DeprecationWarning, None, 0)]
    return items + [("ignore", None, FutureWarning, None, 0)]


def _mutated() -> None:
    mutated = getattr(warnings, "_filters_mutated", None)
    if mutated is not None:
        mutated()


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence torch's quantization deprecation warnings inside the block (thread-safe; the
    caller's ``warnings.filters`` are as before once every thread has left)."""
    global _depth
    with _LOCK:
        if _depth == 0:
            _active[:] = _quiet_filters()
            warnings.filters[:0] = _active
            _mutated()
            _saved_levels[:] = [_PYTREE.level]
            _PYTREE.setLevel(max(_PYTREE.level, logging.ERROR))
        _depth += 1
    try:
        yield
    finally:
        with _LOCK:
            _depth -= 1
            if _depth == 0:
                ours = {id(item) for item in _active}
                warnings.filters[:] = [f for f in warnings.filters if id(f) not in ours]
                _active.clear()
                _mutated()
                _PYTREE.setLevel(_saved_levels.pop())


#: What torchao logs when it loads on a machine without its optional compiled kernels (CUDA
#: extensions, Triton): about the installation, never about a spec or a quantizer.
_TORCHAO_LOAD_NOISE = re.compile(r"Failed to load .*\.so\b|Detected no triton", re.I)


def _not_torchao_load_noise(record: logging.LogRecord) -> bool:
    return not _TORCHAO_LOAD_NOISE.search(record.getMessage())


def silence_globally() -> None:
    """For the CLI process: drop torch's deprecation noise for the whole run (the pytree log
    and torchao's load-time log too: a Quantizer that ``export`` imports may load torchao
    before bespec does)."""
    _install_filters()
    _PYTREE.setLevel(logging.ERROR)
    for name in ("torchao", "torchao.kernel.intmm"):
        logging.getLogger(name).addFilter(_not_torchao_load_noise)
