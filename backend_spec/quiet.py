"""Keep torch's quantization deprecation warnings out of bespec's output.

Every ``torch.ao.quantization`` entry point warns that it is deprecated in favour of torchao.
bespec is a tool for that very API, so the warnings are noise to its users. This module
imports nothing heavy, so the CLI can silence them before torch loads.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

_NOISE = (
    r".*deprecat.*",
    r".*torchao.*",
    r".*Failed to initialize NumPy.*",
    r".*must run observer before calling calculate_qparams.*",
    r".*TypedStorage.*",
)


def _install_filters() -> None:
    for pattern in _NOISE:
        warnings.filterwarnings("ignore", message=pattern)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence torch's quantization deprecation warnings inside the block."""
    with warnings.catch_warnings():
        _install_filters()
        yield


def silence_globally() -> None:
    """For the CLI process: drop torch's deprecation noise for the whole run."""
    _install_filters()
