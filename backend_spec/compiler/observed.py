"""Version 2 options that torch's BackendConfig has no field for, carried on its objects.

Observer choices (``observer``, ``qscheme``, ``granularity``, ``ch_axis``, ``reduce_range``,
``fake_quant``) belong to a dtype mapping, so a dtype mapping that uses them compiles to
:class:`ObservedDTypeWithConstraints`, a ``DTypeWithConstraints`` with those fields; torch
reads the base fields as usual, and ``qconfig_mapping``, the pt2e quantizer and the exporter
read the rest. The pt2e keys of a pattern entry (``aten``, ``quantize``) are attributes of its
``BackendPatternConfig``. A version 1 file produces plain torch objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backend_spec._torch import DTypeWithConstraints
from backend_spec.specfile.fields import OBSERVER_FIELDS, PT2E_PATTERN_FIELDS

#: Attribute names on a BackendPatternConfig for the pattern-level version 2 keys.
_ATTRIBUTE = {key: f"bespec_{key}" for key in PT2E_PATTERN_FIELDS}
_ATEN, _QUANTIZE = _ATTRIBUTE["aten"], _ATTRIBUTE["quantize"]


@dataclass
class ObservedDTypeWithConstraints(DTypeWithConstraints):
    """``DTypeWithConstraints`` plus the version 2 observer options (``None``: the default)."""

    observer: str | None = None
    qscheme: str | None = None
    granularity: str | None = None
    ch_axis: int | None = None
    reduce_range: bool | None = None
    fake_quant: str | None = None


def observer_options(dwc: Any) -> dict[str, Any]:
    """The version 2 options set on a DTypeWithConstraints (empty for torch's own)."""
    return {f: getattr(dwc, f, None) for f in OBSERVER_FIELDS if getattr(dwc, f, None) is not None}


def set_pt2e_keys(config: Any, aten: list | None, quantize: str | None) -> None:
    if aten:
        setattr(config, _ATEN, [[_alternatives(op) for op in chain] for chain in aten])
    if quantize is not None:
        setattr(config, _QUANTIZE, quantize)


def pattern_aten(config: Any) -> list[list[list[str]]]:
    """Extra ATen chains of an entry: each op a list of alternative overload names."""
    return getattr(config, _ATEN, None) or []


def pattern_quantize(config: Any) -> str | None:
    return getattr(config, _QUANTIZE, None)


def pattern_options(config: Any) -> dict[str, Any]:
    """Every version 2 key of a pattern entry (:data:`PT2E_PATTERN_FIELDS`) as a spec writes
    it, None when unset (an ``aten`` op with one overload is its bare name)."""
    options = {key: getattr(config, attribute, None) for key, attribute in _ATTRIBUTE.items()}
    if options["aten"]:
        options["aten"] = [
            [op[0] if len(op) == 1 else op for op in chain] for chain in options["aten"]
        ]
    return options


def _alternatives(op: str | list[str]) -> list[str]:
    return [op] if isinstance(op, str) else list(op)
