"""The one place bespec imports torch's quantization stack.

torch 2.13 needs ``torch.ao.quantization.backend_config.utils`` imported before a
BackendConfig can be built, and every ``torch.ao.quantization`` entry point warns that it is
deprecated in favour of torchao. bespec is a tool for that very API, so those warnings are
noise to its users: :func:`quiet` silences them around bespec's own calls into torch.

Importing torch allocates millions of long-lived objects, and every garbage collection
during and after it would traverse them all again: that was a fifth of a ``bespec lint``
run. So the import runs with collection off, and what it built is then frozen
(:func:`gc.freeze`) out of later collections, when this import is the one that loaded torch.

It is also where bespec checks torch's version (:mod:`backend_spec.versions`): a torch that
cannot be imported at all (whatever it raises: an ``ImportError`` for a missing
``libtorch_cuda.so``, an ``OSError``, a ``RuntimeError``), one outside the supported range, or
one whose quantization stack does not import, raises
:class:`~backend_spec.versions.UnsupportedTorch` with a one-line message instead of failing
later inside torch.
"""

from __future__ import annotations

import gc
import sys

from backend_spec.quiet import quiet, silence_globally
from backend_spec.versions import (
    UnsupportedTorch,
    cannot_import_message,
    check_torch,
    unsupported_message,
)

_first_import = "torch" not in sys.modules
_collecting = gc.isenabled()
gc.disable()
try:
    with quiet():
        try:
            import torch
        except Exception as exc:  # a broken build (libtorch_cuda.so missing...): one line
            raise UnsupportedTorch(cannot_import_message(exc)) from None

        check_torch(torch.__version__)
        try:
            import torch.ao.nn.intrinsic  # noqa: F401
            import torch.ao.nn.intrinsic.qat  # noqa: F401
            import torch.ao.nn.qat  # noqa: F401
            import torch.ao.nn.quantized  # noqa: F401
            import torch.ao.nn.quantized.dynamic  # noqa: F401
            import torch.ao.nn.quantized.reference  # noqa: F401
            import torch.ao.quantization.backend_config.utils  # noqa: F401  (before BackendConfig)
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
        except Exception as exc:  # noqa: BLE001 - torch's quantization API moved, went or broke
            detail = f"{type(exc).__name__}: {exc}"
            raise UnsupportedTorch(unsupported_message(torch.__version__, detail)) from None
finally:
    if _first_import:  # never a caller's objects: they may hold garbage still to collect
        gc.freeze()
    if _collecting:
        gc.enable()

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
