"""torch objects -> the intermediate form (:mod:`backend_spec.ir.model`).

Lifting reads every field of the field table through torch's getters, so a torch
``BackendConfig`` of any origin (a built-in, an imported ``module:attr``, one a user built)
becomes a :class:`Backend`. torch's objects have no field for the version 2 facts, so a
lifted backend has none; a spec compiles to its :class:`Backend` directly, and the config
``load`` returns keeps it (:func:`backend_spec.ir.lower.backend_of`). This is the only module
that reads bespec's facts off torch objects.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from types import MappingProxyType
from typing import Any

from backend_spec import _torch
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
    return Backend(backend_config.name, entries)


def pattern_key(config: _torch.BackendPatternConfig) -> Any:
    """The key BackendConfig stores a pattern under (torch's reversed nested tuple format)."""
    utils = _torch.torch.ao.quantization.backend_config.utils
    return utils._get_pattern_in_reversed_nested_tuple_format(config)


def key_of(pattern: Any = None, complex_format: Any = None) -> Any:
    """The key of a forward ``pattern`` or of a ``complex_format`` one, as torch computes it."""
    config = _torch.BackendPatternConfig()
    if complex_format is not None:
        config._set_pattern_complex_format(complex_format)
    else:
        config.set_pattern(pattern)
    return pattern_key(config)


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
    return Entry(key, origin, tuple(fields))


@cache
def torch_defaults() -> Mapping[str, Any]:
    """The table fields torch sets on a fresh BackendPatternConfig, lifted: what an entry
    holds for a field its spec leaves out (``observation_type``), as a lifted entry does."""
    fresh = _torch.BackendPatternConfig()
    values = {spec.key: (spec.kind, getattr(fresh, spec.getter, None)) for spec in PATTERN_FIELDS}
    return MappingProxyType(
        {
            key: _lifted(kind, value, lift_dtype_config)
            for key, (kind, value) in values.items()
            if value is not None and (kind in PATTERN_KINDS or value)
        }
    )


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
    """A ``DTypeWithConstraints`` as a :class:`DTypeMapping` (torch's constraints)."""
    options = [(f, getattr(dwc, f)) for f in CONSTRAINT_FIELDS if getattr(dwc, f) is not None]
    return DTypeMapping(dwc.dtype, tuple(options))


def lift_dtype_config(dc: _torch.DTypeConfig, name: str | None = None) -> DTypeConfig:
    """A torch DTypeConfig as a :class:`DTypeConfig`."""
    mappings = tuple(
        (key, lift_mapping(getattr(dc, f"{key}_with_constraints"))) for key in DTYPE_CONFIG_MAPPINGS
    )
    return DTypeConfig(mappings, dc.bias_dtype, dc.is_dynamic, name)
