"""The intermediate form -> a plain torch ``BackendConfig`` (:class:`LoweredBackendConfig`).

Lowering calls every setter of the field table with the entry's resolved values; the torch
objects it makes carry nothing of bespec's (a ``DTypeWithConstraints`` has torch's fields
only). The version 2 facts stay in the :class:`~backend_spec.ir.Backend` the lowered config
holds, which is why ``load`` returns a :class:`LoweredBackendConfig`: ``dump``,
``qconfig_mapping`` and ``quantizer`` accept a BackendConfig and ask :func:`backend_of` for
its intermediate form, so a spec's version 2 facts survive the round trip through the public
API.

A lowered config stays a BackendConfig users may edit with torch's own methods
(``set_backend_pattern_config(s)``, ``set_name``): :func:`backend_of` notices, keeps the
entries it lowered that are still in place, and lifts the others (version 1 facts only, as
for any torch config). A pattern config edited in place is not noticed: replace it instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from backend_spec import _torch
from backend_spec.ir.lift import lift, lift_entry, pattern_key
from backend_spec.ir.model import Backend, DTypeConfig, DTypeMapping, Entry
from backend_spec.specfile.fields import PATTERN_FIELDS, FieldKind

__all__ = ["LoweredBackendConfig", "backend_of", "entries_of", "keeping", "lower"]


class LoweredBackendConfig(_torch.BackendConfig):
    """A torch ``BackendConfig`` that keeps its :class:`Backend` (see :func:`backend_of`);
    torch reads it as any other BackendConfig. Its pattern configs are lowered from the
    entries, or, for a config lifted from torch's (:func:`keeping`), that config's own."""

    def __init__(
        self, backend: Backend, configs: dict[Any, _torch.BackendPatternConfig] | None = None
    ) -> None:
        super().__init__(backend.name)
        memo: dict[int, _torch.DTypeConfig] = {}  # a shared DTypeConfig lowers once
        table = self._pattern_complex_format_to_config
        for entry in backend:
            table[entry.key] = configs[entry.key] if configs else lower_entry(entry, memo)
        self._backend = backend
        #: What each lowered entry became: an entry whose config is no longer this one was
        #: replaced through torch's API.
        self._lowered = dict(table)

    def __repr__(self) -> str:
        """torch's repr, of torch's fields only."""
        fields = {k: v for k, v in vars(self).items() if k not in ("_backend", "_lowered")}
        return f"BackendConfig({fields})"

    @property
    def backend(self) -> Backend:
        """The intermediate form of the config as it is now (see the module docstring)."""
        table = self._pattern_complex_format_to_config
        if (
            self.name != self._backend.name
            or len(table) != len(self._backend)
            or any(
                key != entry.key or config is not self._lowered.get(key)
                for (key, config), entry in zip(table.items(), self._backend, strict=False)
            )
        ):
            self._backend = self._synced()
            self._lowered = dict(table)
        return self._backend

    def _synced(self) -> Backend:
        kept = {entry.key: entry for entry in self._backend}
        entries = tuple(
            kept[key] if config is self._lowered.get(key) else lift_entry(config, key=key)
            for key, config in self._pattern_complex_format_to_config.items()
        )
        return Backend(self.name, entries, self._backend.graph_inputs)


def lower(backend: Backend) -> LoweredBackendConfig:
    """``backend`` as a torch BackendConfig that keeps it."""
    return LoweredBackendConfig(backend)


def keeping(backend: Backend, backend_config: _torch.BackendConfig) -> LoweredBackendConfig:
    """``backend_config``'s own pattern configs (the very objects, malformed values included)
    in a config that keeps ``backend``, lifted from them: readers given it do not lift again."""
    return LoweredBackendConfig(backend, dict(backend_config._pattern_complex_format_to_config))


def backend_of(backend_config: _torch.BackendConfig) -> Backend:
    """The intermediate form of any BackendConfig: the one a lowered config keeps (version 2
    facts included), else torch's fields lifted (:func:`backend_spec.ir.lift.lift`)."""
    if isinstance(backend_config, LoweredBackendConfig):
        return backend_config.backend
    return lift(backend_config)


def entries_of(
    backend_config: _torch.BackendConfig,
) -> Callable[[_torch.BackendPatternConfig], Entry]:
    """For a reader that walks ``backend_config``'s pattern configs: a function giving each
    one's intermediate form, the entry a lowered config keeps for it (looked up in one
    :func:`backend_of` for the whole pass), else the config lifted on its own."""
    if not isinstance(backend_config, LoweredBackendConfig):
        return lift_entry
    backend = backend_config.backend

    def entry_of(config: _torch.BackendPatternConfig) -> Entry:
        return backend.entry(pattern_key(config)) or lift_entry(config)

    return entry_of


def lower_entry(
    entry: Entry, memo: dict[int, _torch.DTypeConfig] | None = None
) -> _torch.BackendPatternConfig:
    """One entry as a BackendPatternConfig: every table field it sets, through its setter."""
    memo = {} if memo is None else memo
    config = _torch.BackendPatternConfig()
    for spec in PATTERN_FIELDS:
        value = entry.get(spec.key)
        if value is not None:
            getattr(config, spec.setter)(_lowered(spec.kind, value, memo))
    return config


def _lowered(kind: FieldKind, value: Any, memo: dict[int, _torch.DTypeConfig]) -> Any:
    if kind is FieldKind.DTYPE_CONFIGS:
        return [lower_dtype_config(dc, memo) for dc in value]
    if kind in (FieldKind.FUNCTION, FieldKind.FUSER):
        return value.function
    if kind in (FieldKind.OBSERVATION_TYPE_MAP, FieldKind.INDEX_MAP):
        return dict(value)
    return value


def lower_dtype_config(
    dtype_config: DTypeConfig, memo: dict[int, _torch.DTypeConfig] | None = None
) -> _torch.DTypeConfig:
    """A :class:`DTypeConfig` as torch's (its version 2 observer options left out)."""
    memo = {} if memo is None else memo
    if id(dtype_config) not in memo:
        memo[id(dtype_config)] = _torch.DTypeConfig(
            input_dtype=_constraints(dtype_config.mapping("input_dtype")),
            output_dtype=_constraints(dtype_config.mapping("output_dtype")),
            weight_dtype=_constraints(dtype_config.mapping("weight_dtype")),
            bias_dtype=dtype_config.bias_dtype,
            is_dynamic=dtype_config.is_dynamic,
        )
    return memo[id(dtype_config)]


def _constraints(mapping: DTypeMapping) -> _torch.DTypeWithConstraints:
    return _torch.DTypeWithConstraints(dtype=mapping.dtype, **mapping.constraints)
