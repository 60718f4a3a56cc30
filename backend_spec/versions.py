"""The torch versions bespec supports, and the one-line refusal of any other.

bespec drives torch's quantization internals (``torch.ao.quantization``, ``torch.fx.config``,
``torch.export``), which change between minor versions: under an untested torch a command
would fail deep inside torch with a traceback or an ``AttributeError`` per check case, which
reads as a broken spec. So the first import of torch checks its version against
:data:`TORCH_REQUIREMENT` (the same range as ``pyproject.toml``'s dependency; a test holds
them equal) and raises :class:`UnsupportedTorch`, whose message the CLI prints as one line.

This module imports nothing heavy at import time; :func:`running_torch` (``--version``) imports
torch, since the version that matters is the one that runs, not the package metadata's.
"""

from __future__ import annotations

import re

#: The oldest supported torch minor version, and the first minor version that is not.
TORCH_MIN = (2, 13)
TORCH_END = (2, 15)
#: pyproject's requirement on torch (the same range as :data:`TORCH_MIN` / :data:`TORCH_END`).
TORCH_REQUIREMENT = f">={TORCH_MIN[0]}.{TORCH_MIN[1]},<{TORCH_END[0]}.{TORCH_END[1]}"


class UnsupportedTorch(ImportError):
    """The installed torch is outside :data:`TORCH_REQUIREMENT`, or lacks the quantization API
    bespec drives. The message is one line that says which torch to install."""


def torch_minor(version: str) -> tuple[int, int] | None:
    """``(2, 14)`` for ``"2.14.1+cu130"`` (build tags and pre-releases ignored); None if the
    string is not a version."""
    found = re.match(r"(\d+)\.(\d+)", version)
    return (int(found.group(1)), int(found.group(2))) if found else None


def minor_text(version: str) -> str:
    """``"2.14"`` for ``"2.14.1+cu130"``: the key of version-dependent data."""
    minor = torch_minor(version)
    return f"{minor[0]}.{minor[1]}" if minor else version


def check_torch(version: str) -> None:
    """Raise :class:`UnsupportedTorch` unless torch ``version`` is in the supported range."""
    minor = torch_minor(version)
    if minor is None or not TORCH_MIN <= minor < TORCH_END:
        raise UnsupportedTorch(unsupported_message(version))


def unsupported_message(version: str, detail: str = "") -> str:
    """The one line bespec prints under a torch it does not support; ``detail`` says what is
    missing when the version is in range but its quantization stack does not import."""
    problem = f"cannot be used ({' '.join(detail.split())})" if detail else "is not supported"
    return (
        f"torch {version} {problem}: bespec needs torch{TORCH_REQUIREMENT}; "
        f"install a supported torch, e.g. pip install 'torch{TORCH_REQUIREMENT}'"
    )


#: Longest reason quoted from a failed ``import torch`` (a loader error can be paragraphs).
_MAX_REASON = 300


def cannot_import_message(exc: BaseException) -> str:
    """The one line bespec prints when ``import torch`` itself raises ``exc`` (a broken
    build: ``ImportError: libtorch_cuda.so: cannot open shared object file``, an ``OSError``
    from a missing DLL, a ``RuntimeError`` from an extension)."""
    reason = " ".join(f"{type(exc).__name__}: {exc}".split())
    if len(reason) > _MAX_REASON:
        reason = reason[:_MAX_REASON] + "..."
    return (
        f"torch cannot be imported ({reason}): bespec needs torch{TORCH_REQUIREMENT}; "
        f"install a supported torch, e.g. pip install 'torch{TORCH_REQUIREMENT}'"
    )


def running_torch() -> str:
    """The version of the torch that runs (``torch.__version__`` after importing it, which
    may differ from the installed package's metadata: a torch earlier on the path, a build
    replaced by hand). UnsupportedTorch when it cannot be imported."""
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - whatever a broken build raises: one line
        raise UnsupportedTorch(cannot_import_message(exc)) from None
    return str(torch.__version__)


def installed(package: str) -> str | None:
    """The installed version of ``package`` from its metadata (no import), or None."""
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None
