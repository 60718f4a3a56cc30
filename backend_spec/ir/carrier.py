"""Where the version 2 facts sit on the torch objects a spec compiles to.

torch's BackendConfig has no field for them, yet ``load`` returns a BackendConfig that
``dump``, ``qconfig_mapping`` and ``quantizer`` accept, so they travel with it. Only
:mod:`backend_spec.ir.lift` reads them back; every other reader asks the intermediate form.

Observer choices (``observer``, ``qscheme``, ``granularity``, ``ch_axis``, ``reduce_range``,
``fake_quant``) belong to a dtype mapping, so a dtype mapping that uses them compiles to
:class:`ObservedDTypeWithConstraints`, a ``DTypeWithConstraints`` with those fields; torch
reads the base fields as usual, and ``qconfig_mapping``, the pt2e quantizer and the exporter
read the rest. The pt2e keys of a pattern entry (``aten`` and the policy keys of
:data:`backend_spec.ir.POLICY_KEYS`) are attributes of its ``BackendPatternConfig``. A
version 1 file produces plain torch objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backend_spec._torch import DTypeWithConstraints
from backend_spec.specfile.fields import OBSERVER_FIELDS

#: Attribute names on a BackendPatternConfig for the pattern-level pt2e keys.
_ATEN, _POLICY = "bespec_aten", "bespec_policy"
#: Attribute name on a BackendConfig for the version 5 ``graph_inputs`` DTypeConfig.
_GRAPH_INPUTS = "bespec_graph_inputs"


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


def set_pt2e_keys(config: Any, aten: list | None, policy: dict[str, str | None]) -> None:
    if aten:
        setattr(config, _ATEN, [[_alternatives(op) for op in chain] for chain in aten])
    chosen = {key: value for key, value in policy.items() if value is not None}
    if chosen:
        setattr(config, _POLICY, chosen)


def pattern_aten(config: Any) -> list[list[list[str]]]:
    """Extra ATen chains of an entry: each op a list of alternative overload names."""
    return getattr(config, _ATEN, None) or []


def pattern_policy(config: Any) -> dict[str, str]:
    """The policy keys the entry sets (unset keys keep the rule's FX-like default)."""
    return dict(getattr(config, _POLICY, None) or {})


def set_graph_inputs(backend_config: Any, dtype_config: Any) -> None:
    """``graph_inputs`` (version 5): the DTypeConfig whose activation observer graph inputs get."""
    setattr(backend_config, _GRAPH_INPUTS, dtype_config)


def graph_inputs(backend_config: Any) -> Any:
    """The ``graph_inputs`` DTypeConfig of a backend (None: graph inputs are not observed
    for their own sake)."""
    return getattr(backend_config, _GRAPH_INPUTS, None)


def _alternatives(op: str | list[str]) -> list[str]:
    return [op] if isinstance(op, str) else list(op)
