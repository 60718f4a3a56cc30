"""torch objects -> the intermediate form (:mod:`backend_spec.ir.model`).

Lifting reads every field of the field table through torch's getters, so a torch
``BackendConfig`` of any origin (a built-in, an imported ``module:attr``, one a spec compiled
to) becomes a :class:`Backend`. The version 2 facts a spec adds are read from their torch-side
carrier (:mod:`backend_spec.ir.carrier`) here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from backend_spec import _torch
from backend_spec.ir.carrier import graph_inputs, observer_options, pattern_aten, pattern_policy
from backend_spec.ir.model import (
    Backend,
    DTypeConfig,
    DTypeMapping,
    Entry,
    FunctionRef,
    Origin,
)
from backend_spec.names.dtypes import dtype_config_list
from backend_spec.specfile.fields import (
    CONSTRAINT_FIELDS,
    DTYPE_CONFIG_MAPPINGS,
    PATTERN_FIELDS,
    PATTERN_KINDS,
    FieldKind,
)

#: The spec's name of a torch DTypeConfig object (None: inline or not from a spec).
Namer = Callable[[Any], "str | None"]

_UNKNOWN = Origin("?")


def lift(
    backend_config: _torch.BackendConfig,
    origins: Mapping[Any, Origin] | None = None,
    name_of: Namer | None = None,
) -> Backend:
    """``backend_config`` as a :class:`Backend`; ``origins`` maps pattern keys to where each
    entry came from, ``name_of`` gives a DTypeConfig object's spec name."""
    origins = origins or {}
    memo: dict[int, DTypeConfig] = {}  # shared DTypeConfig objects lift once

    def dtype_config(dc: Any) -> DTypeConfig:
        if id(dc) not in memo:
            memo[id(dc)] = lift_dtype_config(dc, name_of(dc) if name_of else None)
        return memo[id(dc)]

    entries = tuple(
        lift_entry(config, origins.get(key, _UNKNOWN), key, dtype_config)
        for key, config in backend_config._pattern_complex_format_to_config.items()
    )
    inputs = graph_inputs(backend_config)
    return Backend(backend_config.name, entries, None if inputs is None else dtype_config(inputs))


def pattern_key(config: _torch.BackendPatternConfig) -> Any:
    """The key BackendConfig stores a pattern under (torch's reversed nested tuple format)."""
    utils = _torch.torch.ao.quantization.backend_config.utils
    return utils._get_pattern_in_reversed_nested_tuple_format(config)


def lift_entry(
    config: _torch.BackendPatternConfig,
    origin: Origin = _UNKNOWN,
    key: Any = None,
    dtype_config: Callable[[Any], DTypeConfig] | None = None,
) -> Entry:
    """One BackendPatternConfig as an :class:`Entry` (every table field that is set); ``key``
    defaults to the one torch stores it under."""
    dtype_config = dtype_config or lift_dtype_config
    key = pattern_key(config) if key is None else key
    fields = []
    for spec in PATTERN_FIELDS:
        value = getattr(config, spec.getter, None)
        if value is None or (spec.kind not in PATTERN_KINDS and not value):
            continue
        fields.append((spec.key, _lifted(spec.kind, value, dtype_config)))
    aten = tuple(tuple(tuple(alts) for alts in chain) for chain in pattern_aten(config))
    return Entry(key, origin, tuple(fields), aten, tuple(pattern_policy(config).items()))


def _lifted(kind: FieldKind, value: Any, dtype_config: Callable[[Any], DTypeConfig]) -> Any:
    if kind is FieldKind.DTYPE_CONFIGS:
        configs = dtype_config_list(value)
        return tuple(dtype_config(dc) for dc in configs if isinstance(dc, _torch.DTypeConfig))
    if kind in (FieldKind.FUNCTION, FieldKind.FUSER):
        return FunctionRef.of(value)
    if kind in (FieldKind.OBSERVATION_TYPE_MAP, FieldKind.INDEX_MAP):
        return tuple(value.items())
    return value


def lift_mapping(dwc: Any) -> DTypeMapping:
    """A ``DTypeWithConstraints`` as a :class:`DTypeMapping` (its version 2 options included)."""
    options = [(f, getattr(dwc, f)) for f in CONSTRAINT_FIELDS if getattr(dwc, f) is not None]
    options += observer_options(dwc).items()
    return DTypeMapping(dwc.dtype, tuple(options))


def lift_dtype_config(dc: _torch.DTypeConfig, name: str | None = None) -> DTypeConfig:
    """A torch DTypeConfig as a :class:`DTypeConfig`."""
    mappings = tuple(
        (key, lift_mapping(getattr(dc, f"{key}_with_constraints"))) for key in DTYPE_CONFIG_MAPPINGS
    )
    return DTypeConfig(mappings, dc.bias_dtype, dc.is_dynamic, name)
