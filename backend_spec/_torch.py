"""The one place bespec imports torch's quantization stack.

torch 2.13 needs ``torch.ao.quantization.backend_config.utils`` imported before a
BackendConfig can be built, and every ``torch.ao.quantization`` entry point warns that it is
deprecated in favour of torchao. bespec is a tool for that very API, so those warnings are
noise to its users: :func:`quiet` silences them around bespec's own calls into torch.
"""

from __future__ import annotations

from backend_spec.quiet import quiet, silence_globally

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
