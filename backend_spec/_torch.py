"""The one place bespec imports torch's quantization stack.

torch 2.13 needs ``torch.ao.quantization.backend_config.utils`` imported before a
BackendConfig can be built, and every ``torch.ao.quantization`` entry point warns that it is
deprecated in favour of torchao. bespec is a tool for that very API, so those warnings are
noise to its users: :func:`quiet` silences them around bespec's own calls into torch.
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


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence torch's quantization deprecation warnings inside the block."""
    with warnings.catch_warnings():
        for pattern in _NOISE:
            warnings.filterwarnings("ignore", message=pattern)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning)
        yield


def silence_globally() -> None:
    """For the CLI process: drop torch's deprecation noise for the whole run."""
    for pattern in _NOISE:
        warnings.filterwarnings("ignore", message=pattern)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)


with quiet():
    import torch
    import torch.ao.nn.intrinsic  # noqa: F401
    import torch.ao.nn.intrinsic.qat  # noqa: F401
    import torch.ao.nn.qat  # noqa: F401
    import torch.ao.nn.quantized  # noqa: F401
    import torch.ao.nn.quantized.dynamic  # noqa: F401
    import torch.ao.nn.quantized.reference  # noqa: F401
    import torch.ao.quantization.backend_config.utils  # noqa: F401  (needed before BackendConfig)
    import torch.ao.quantization.fuser_method_mappings  # noqa: F401
    import torch.ao.quantization.utils  # noqa: F401
    import torch.nn.functional  # noqa: F401
    from torch.ao.quantization import backend_config as backend_config_module
    from torch.ao.quantization.backend_config import (
        BackendConfig,
        BackendPatternConfig,
        DTypeConfig,
        DTypeWithConstraints,
        ObservationType,
    )

__all__ = [
    "BackendConfig",
    "BackendPatternConfig",
    "DTypeConfig",
    "DTypeWithConstraints",
    "ObservationType",
    "backend_config_module",
    "quiet",
    "silence_globally",
    "torch",
]
