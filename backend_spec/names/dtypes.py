"""dtype names as a spec writes them (one spelling for export, docs, diff and messages), and
the value range of each integer dtype."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Any

_QUANTIZED_RANGES: dict[str, tuple[int, int]] = {
    "quint8": (0, 255),
    "qint8": (-128, 127),
    "qint32": (-(2**31), 2**31 - 1),
    "quint4x2": (0, 15),
    "quint2x4": (0, 3),
}


@cache
def dtype_names() -> frozenset[str]:
    """Every ``torch`` attribute that is a ``torch.dtype`` (``quint8``, ``float``, ``half``...)."""
    from backend_spec._torch import torch

    return frozenset(name for name, value in vars(torch).items() if isinstance(value, torch.dtype))


#: The one dtype whose preferred spelling is not ``str(dtype)``: torch's own sources write
#: ``torch.float`` for float32 (``bias_dtype=torch.float``), and so do spec files.
_PREFERRED_NAMES: dict[str, str] = {"float32": "float"}


def dtype_name(dtype: Any) -> str:
    """A ``torch.dtype`` as a spec writes it: ``quint8``, ``qint8``, ``float16``, ... and
    ``float`` for float32. ValueError for a dtype the loader could not read back."""
    plain = str(dtype).removeprefix("torch.")
    name = _PREFERRED_NAMES.get(plain, plain)
    if name not in dtype_names() or to_dtype(name) is not dtype:  # what the loader accepts
        raise ValueError(f"{dtype!r} has no torch attribute name")
    return name


def to_dtype(name: str):
    """The ``torch.dtype`` a spec name stands for (the name must be in :func:`dtype_names`)."""
    from backend_spec._torch import torch

    return vars(torch)[name]


@cache
def dtype_range(name: str) -> tuple[int, int] | None:
    """The representable integer range of a dtype, or None for floating and unknown ones."""
    if name in _QUANTIZED_RANGES:
        return _QUANTIZED_RANGES[name]
    if name not in dtype_names():
        return None
    from backend_spec._torch import torch

    dtype = to_dtype(name)
    if dtype.is_floating_point or dtype.is_complex or dtype == torch.bool:
        return None
    try:
        info = torch.iinfo(dtype)
    except TypeError:
        return None
    return int(info.min), int(info.max)


def dtype_config_list(value: Any) -> list[Any]:
    """The DTypeConfigs of a pattern as a list: torch stores what the setter was given, and
    some configs pass a bare DTypeConfig (or a tuple) where a list belongs."""
    from backend_spec._torch import DTypeConfig

    if isinstance(value, DTypeConfig):
        return [value]
    return list(value) if isinstance(value, Iterable) and not isinstance(value, str) else []


#: FX's convert quantizes an observed tensor only with torch's quantized dtypes
#: (``convert_fx``: a static activation observer of ``uint8`` is removed and the op stays
#: float; a ``int8`` weight raises "Unsupported dtype and qscheme"), while pt2e's
#: ``quantize_per_tensor`` ops take the plain integer dtypes and bespec's pt2e flow reads each
#: quantized dtype as its plain twin. So the quantized name is the one that works in both.
FX_QUANTIZED_TWINS: dict[str, str] = {"uint8": "quint8", "int8": "qint8", "int32": "qint32"}


def fx_quantized_twin(name: str) -> str | None:
    """The quantized dtype FX needs where a spec wrote the plain integer ``name`` (``uint8``
    -> ``quint8``), or None when FX quantizes with ``name`` as written (or it is no integer
    dtype FX converts). Aliases count: ``int`` is ``int32``."""
    if name in FX_QUANTIZED_TWINS:
        return FX_QUANTIZED_TWINS[name]
    if name not in dtype_names():
        return None
    plain = str(to_dtype(name)).removeprefix("torch.")
    return FX_QUANTIZED_TWINS.get(plain)
