"""The intermediate form: a resolved backend as frozen data of bespec's own.

A spec (through the loader) and a torch ``BackendConfig`` (through :func:`backend_spec.ir.lift`)
both end here; every consumer that needs a fact torch's classes have no field for (the version
2 observer options of a dtype mapping, the pt2e ``aten`` chains and policy of an entry, where an
entry came from) reads it from these types. The fields are the field table's
(:mod:`backend_spec.specfile.fields`): an entry holds one value per table key it sets, a dtype
mapping one per :data:`DTYPE_MAPPING_FIELDS` key, so a row added to the table needs no edit here.

Values are resolved torch objects (classes, functions, dtypes, ``ObservationType``); fusers and
getters are :class:`FunctionRef` (the function and, for a wrapper shape, the form and what it
captures, as data). Equality of the pt2e and observer facts is plain value equality; comparing
whole backends built independently is :mod:`backend_spec.analysis.compare`'s job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from backend_spec.names.fusers import wrapper_form
from backend_spec.specfile.fields import (
    CONSTRAINT_FIELDS,
    DTYPE_CONFIG_MAPPINGS,
    DTYPE_MAPPING_FIELDS,
    OBSERVER_FIELDS,
    PATTERN_FIELDS,
    PT2E_PATTERN_FIELDS,
)

#: The table keys an entry may set (``pattern`` or ``pattern_complex_format`` among them).
_ENTRY_KEYS = frozenset(f.key for f in PATTERN_FIELDS)


def policy_value(value: Any) -> Any:
    """A policy value as the frozen form keeps it: a mapping (version 7 ``when``) becomes its
    ``(key, value)`` pairs in written order, so an entry stays hashable."""
    return tuple(value.items()) if isinstance(value, dict) else value


def spec_value(value: Any) -> Any:
    """A policy value as a spec writes it (the inverse of :func:`policy_value`)."""
    return dict(value) if isinstance(value, tuple) else value


#: The pt2e policy keys of an entry (``quantize`` and the version 3 keys): every pt2e key of
#: the table but ``aten``.
POLICY_KEYS: tuple[str, ...] = PT2E_PATTERN_FIELDS[1:]

#: An ATen chain: each op a tuple of alternative overload names.
AtenChain = tuple[tuple[str, ...], ...]


def flat_ops(pattern: Any) -> tuple[Any, ...] | None:
    """The forward-order ops of a forward ``pattern`` (an op or a tuple); None for no pattern,
    or one that nests a tuple."""
    if pattern is None:
        return None
    ops = pattern if isinstance(pattern, tuple) else (pattern,)
    return None if any(isinstance(op, tuple) for op in ops) else ops


def _checked(pairs: tuple[tuple[str, Any], ...], allowed: Any, what: str) -> None:
    unknown = [key for key, _ in pairs if key not in allowed]
    if unknown:
        raise ValueError(f"{what} has no field {unknown[0]!r} (see specfile/fields.py)")


@dataclass(frozen=True)
class Origin:
    """Where an entry came from: a spec file and line, or ``torch:<builtin>`` (line 0)."""

    source: str
    line: int = 0


@dataclass(frozen=True)
class DTypeMapping:
    """One dtype mapping of a DTypeConfig: the dtype and each field of
    :data:`DTYPE_MAPPING_FIELDS` that is set (torch's constraints, then the version 2 observer
    options), in table order."""

    dtype: Any = None
    options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        _checked(self.options, DTYPE_MAPPING_FIELDS, "a dtype mapping")

    @classmethod
    def of(cls, dtype: Any, options: dict[str, Any]) -> DTypeMapping:
        """The mapping of ``dtype`` with ``options`` put in table order (None ones left out)."""
        _checked(tuple(options.items()), DTYPE_MAPPING_FIELDS, "a dtype mapping")
        return cls(
            dtype,
            tuple((k, options[k]) for k in DTYPE_MAPPING_FIELDS if options.get(k) is not None),
        )

    def get(self, key: str) -> Any:
        """The value of a :data:`DTYPE_MAPPING_FIELDS` key (None when unset)."""
        return dict(self.options).get(key)

    @property
    def constraints(self) -> dict[str, Any]:
        """torch's ``DTypeWithConstraints`` fields that are set."""
        return {k: v for k, v in self.options if k in CONSTRAINT_FIELDS}

    @property
    def observer(self) -> dict[str, Any]:
        """The version 2 observer options that are set (empty: what version 1 builds)."""
        return {k: v for k, v in self.options if k in OBSERVER_FIELDS}


@dataclass(frozen=True)
class DTypeConfig:
    """A DTypeConfig: its three dtype mappings (:data:`DTYPE_CONFIG_MAPPINGS`), ``bias_dtype``,
    ``is_dynamic``, and the spec's name for it (None: inline, or not from a spec)."""

    mappings: tuple[tuple[str, DTypeMapping], ...] = ()
    bias_dtype: Any = None
    is_dynamic: bool | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        _checked(self.mappings, DTYPE_CONFIG_MAPPINGS, "a dtype config")

    def mapping(self, key: str) -> DTypeMapping:
        """The mapping of ``input_dtype``/``output_dtype``/``weight_dtype`` (empty if unset)."""
        return dict(self.mappings).get(key, DTypeMapping())


@dataclass(frozen=True, eq=False)
class FunctionRef:
    """A fuser or getter: the function, and, when it is one of the wrapper shapes a spec can
    write (``sequential``, ``reverse_sequential``, ``reverse2``, ``reverse3``), that form and
    what it captures (a class, or the wrapped function's own reference).

    Two references are equal when they name the same wrapper shape over the same capture
    (fresh closures of one shape behave alike), else when they are the same function."""

    function: Callable[..., Any]
    form: str | None = None
    captured: Any = None

    def _identity(self) -> tuple[Any, ...]:
        return (self.form, self.captured) if self.form else (None, id(self.function))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FunctionRef):
            return NotImplemented
        if self.form is None and other.form is None:
            return self.function is other.function
        return self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

    @classmethod
    def of(cls, function: Callable[..., Any]) -> FunctionRef:
        """The reference to ``function``, its wrapper shape read off its code."""
        shape = wrapper_form(function)
        if shape is None:
            return cls(function)
        form, captured = shape
        if not isinstance(captured, type):
            captured = cls.of(captured)
        return cls(function, form, captured)


@dataclass(frozen=True)
class Entry:
    """One pattern entry: where it came from, the key torch stores it under, the table fields
    it sets (by spec key, resolved; ``dtype_configs`` a tuple of :class:`DTypeConfig`, fusers
    and getters :class:`FunctionRef`), its extra ATen chains and its pt2e policy."""

    key: Any
    origin: Origin
    fields: tuple[tuple[str, Any], ...]
    aten: tuple[AtenChain, ...] = ()
    policy: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        _checked(self.fields, _ENTRY_KEYS, "a pattern entry")
        _checked(self.policy, POLICY_KEYS, "a pattern entry's policy")

    @staticmethod
    def ordered(values: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
        """``values`` (table key -> value) as :attr:`fields`: in table order, None left out."""
        _checked(tuple(values.items()), _ENTRY_KEYS, "a pattern entry")
        return tuple(
            (f.key, values[f.key]) for f in PATTERN_FIELDS if values.get(f.key) is not None
        )

    def get(self, key: str) -> Any:
        """The value of a field-table key (None when the entry leaves torch's default)."""
        return dict(self.fields).get(key)

    @property
    def dtype_configs(self) -> tuple[DTypeConfig, ...]:
        return self.get("dtype_configs") or ()

    @property
    def pattern(self) -> Any:
        """The forward pattern (an op or a tuple), or None for a complex-format entry."""
        return self.get("pattern")

    @property
    def ops(self) -> tuple[Any, ...] | None:
        """The forward-order ops of a flat ``pattern``; None for complex or nested ones."""
        return flat_ops(self.pattern)

    def pt2e_options(self) -> dict[str, Any]:
        """Every pt2e key of the table as a spec writes it, None when unset (an ``aten`` op
        with one overload is its bare name)."""
        options: dict[str, Any] = dict.fromkeys(PT2E_PATTERN_FIELDS)
        if self.aten:
            options["aten"] = [
                [alts[0] if len(alts) == 1 else list(alts) for alts in chain] for chain in self.aten
            ]
        options.update((key, spec_value(value)) for key, value in self.policy)
        return options


@dataclass(frozen=True)
class Backend:
    """A resolved backend: its name, its entries in order (one per pattern key), the
    version 5 ``graph_inputs`` DTypeConfig (None when graph inputs are not observed),
    ``input_sharing`` (None: FX's ``dtype``), the version 8 ``transform_for_annotation``
    passes (the pt2e quantizer runs them, in order, before it annotates) and the format
    version of the spec it was written in (1 for a torch config), for the meanings a version
    gives to values older files could hold (version 8's dynamic configs with a quantized
    output)."""

    name: str
    entries: tuple[Entry, ...] = ()
    graph_inputs: DTypeConfig | None = None
    input_sharing: str | None = None
    version: int = 1
    transform_for_annotation: tuple[FunctionRef, ...] = ()

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def entry(self, key: Any) -> Entry | None:
        """The entry stored under pattern key ``key``, or None."""
        return self._by_key.get(key)

    @cached_property
    def _by_key(self) -> dict[Any, Entry]:
        return {e.key: e for e in self.entries}

    @cached_property
    def uses_pt2e(self) -> bool:
        """Whether any pt2e key is set (an entry's ``aten`` chain or policy, ``graph_inputs``,
        ``input_sharing`` other than FX's): a spec written for the pt2e flow too."""
        return (
            self.graph_inputs is not None
            or self.input_sharing not in (None, "dtype")
            or bool(self.transform_for_annotation)
            or any(entry.aten or entry.policy for entry in self.entries)
        )

    @cached_property
    def quantized_ops(self) -> frozenset[Any]:
        """Ops of single-op patterns that have dtype configs: the ops the backend quantizes."""
        return frozenset(
            e.pattern
            for e in self.entries
            if e.dtype_configs and e.pattern is not None and not isinstance(e.pattern, tuple)
        )

    @cached_property
    def reference_roots(self) -> frozenset[Any]:
        """Root modules some entry maps to a reference quantized module: the float modules
        ``convert`` swaps (torch merges this mapping over all entries)."""
        return frozenset(
            e.get("root_module")
            for e in self.entries
            if e.get("root_module") is not None and e.get("reference_quantized_module") is not None
        )
