"""Canonical, comparable descriptions of BackendConfigs, and field-level differences.

Two BackendConfigs built independently (torch's own, and one compiled from a spec) are never
``==``: torch's config classes compare by identity and fuser closures are fresh objects. What
matters is what quantization sees, so :func:`describe` reduces a config to plain data keyed the
way ``BackendConfig`` itself keys patterns (torch's reversed nested tuple format):

* classes, functions and getters compare by identity (:class:`Ref`), shown by spec name;
* a sequential fuser compares by the class it builds (``{"sequential": Ref}``), since that is
  its whole behaviour, however many closures implement it; the other wrapper shapes
  (``reverse_sequential``, ``reverse2``, ``reverse3``) likewise by what they wrap;
* any other closure compares by its code object and the contents of its cells (what a factory
  called again with the same arguments reproduces), a bound classmethod by its function and
  class (``Cls.fuse`` is a new object at every access);
* DTypeConfigs are listed in order with every constraint field, ``bias_dtype`` and
  ``is_dynamic``.

:func:`diff` walks two descriptions and reports each difference with its field path, for the
round-trip tests and ``bespec diff``.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from backend_spec._torch import BackendConfig, BackendPatternConfig
from backend_spec.ir import Backend, DTypeConfig, Entry
from backend_spec.ir.lift import lift_entry
from backend_spec.ir.lower import backend_of
from backend_spec.names.dtypes import dtype_config_list, dtype_name
from backend_spec.names.fusers import map_wrapper
from backend_spec.names.labels import object_label, pattern_label
from backend_spec.names.naming import observation_type_name
from backend_spec.specfile.fields import (
    DTYPE_CONFIG_MAPPINGS,
    DTYPE_MAPPING_FIELDS,
    MODULE_KINDS,
    PATTERN_FIELDS,
    PATTERN_KINDS,
    FieldKind,
)

__all__ = [
    "Difference",
    "Ref",
    "describe",
    "describe_backend",
    "describe_pattern",
    "diff",
    "dtype_config_list",
    "function_description",
]


@dataclass(frozen=True, eq=False)
class Ref:
    """An object that compares by identity and prints as its spec name."""

    obj: Any = field(repr=False)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ref) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __repr__(self) -> str:
        if isinstance(self.obj, types.CodeType):
            return f"<code of {self.obj.co_qualname}>"
        return object_label(self.obj)


def _ref(obj: Any) -> Ref | None:
    return None if obj is None else Ref(obj)


def function_description(fn: Callable[..., Any] | None) -> Any:
    """What a fuser or getter is, comparable across independently built configs."""
    if fn is None:
        return None
    wrapper = map_wrapper(fn, Ref, function_description)
    if wrapper is not None:
        return wrapper
    if isinstance(fn, types.MethodType):
        return {"method": Ref(fn.__func__), "self": _cell_value(fn.__self__)}
    if isinstance(fn, types.FunctionType) and fn.__closure__:
        return {"code": Ref(fn.__code__), "cells": [_cell(c) for c in fn.__closure__]}
    return Ref(fn)


def _cell(cell: Any) -> Any:
    try:
        return _cell_value(cell.cell_contents)
    except ValueError:  # an empty cell
        return "<empty>"


def _cell_value(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tuple):
        return tuple(_cell_value(v) for v in value)
    if callable(value) and not isinstance(value, type):
        return function_description(value)
    return Ref(value)


def _dtype(dtype: Any) -> str | None:
    return None if dtype is None else dtype_name(dtype)


def _dtype_config(dc: DTypeConfig) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in DTYPE_CONFIG_MAPPINGS:
        mapping = dc.mapping(key)
        out[key] = {
            "dtype": _dtype(mapping.dtype),
            # torch's constraints and the version 2 observer keys (None: unset)
            **{name: mapping.get(name) for name in DTYPE_MAPPING_FIELDS},
        }
    out["bias_dtype"] = _dtype(dc.bias_dtype)
    out["is_dynamic"] = dc.is_dynamic
    return out


def _described(entry: Entry, kind: FieldKind, value: Any) -> Any:
    """One field's value (None: unset) as comparable data."""
    if kind in PATTERN_KINDS:
        # How the pattern was given decides how torch reverses the fuser's arguments.
        return "complex" if entry.get("pattern_complex_format") is not None else "forward"
    if kind is FieldKind.OBSERVATION_TYPE:
        return observation_type_name(value)
    if kind is FieldKind.DTYPE_CONFIGS:
        return [_dtype_config(dc) for dc in value or ()]
    if kind in MODULE_KINDS:
        return _ref(value)
    if kind in (FieldKind.FUNCTION, FieldKind.FUSER):
        return function_description(value.function if value is not None else None)
    if kind is FieldKind.OBSERVATION_TYPE_MAP:
        return {int(n): observation_type_name(t) for n, t in value or ()}
    if kind is FieldKind.INDEX_MAP:
        return dict(value or ())
    raise KeyError(f"compare does not know field kind {kind}")


def describe_pattern(config: BackendPatternConfig | Entry) -> dict[str, Any]:
    """Everything about one pattern entry that quantization reads: every field of the table,
    the pattern itself reduced to ``pattern_format`` (it is the key already), and the pt2e
    keys (``aten``, ``quantize``, the policy) of the intermediate form."""
    entry = config if isinstance(config, Entry) else lift_entry(config)
    out: dict[str, Any] = {}
    for spec in PATTERN_FIELDS:
        key = "pattern_format" if spec.kind in PATTERN_KINDS else spec.key
        out[key] = _described(entry, spec.kind, entry.get(spec.key))
    out.update(entry.pt2e_options())
    return out


def describe(backend: BackendConfig | Backend) -> dict[str, dict[str, Any]]:
    """Pattern key (as text) -> description of its entry, in the backend's order."""
    if isinstance(backend, BackendConfig):
        backend = backend_of(backend)
    out: dict[str, dict[str, Any]] = {}
    for entry in backend:
        text = base = pattern_label(entry.key)
        n = 1
        while text in out:  # distinct unnameable objects may share a module.qualname
            n += 1
            text = f"{base} #{n}"
        out[text] = describe_pattern(entry)
    return out


def describe_backend(backend: BackendConfig | Backend) -> dict[str, Any]:
    """:func:`describe` plus the backend's name, pattern order and the backend-level pt2e keys
    (``graph_inputs``, ``input_sharing``, ``transform_for_annotation``)."""
    if isinstance(backend, BackendConfig):
        backend = backend_of(backend)
    patterns = describe(backend)
    inputs = None if backend.graph_inputs is None else _dtype_config(backend.graph_inputs)
    return {
        "name": backend.name,
        "order": list(patterns),
        "patterns": patterns,
        "graph_inputs": inputs,
        "input_sharing": backend.input_sharing or "dtype",
        "transform_for_annotation": [
            function_description(ref.function) for ref in backend.transform_for_annotation
        ],
    }


@dataclass(frozen=True)
class Difference:
    """One difference between configs ``a`` (old) and ``b`` (new).

    ``kind`` is ``added``/``removed`` (a whole pattern), ``changed`` (a field, whose path is
    ``field``, e.g. ``dtype_configs[0].input_dtype.scale_min_lower_bound``), or ``reordered``.
    """

    kind: str
    pattern: str
    field: str = ""
    old: Any = None
    new: Any = None

    def __str__(self) -> str:
        if self.kind == "added":
            return f"+ {self.pattern}"
        if self.kind == "removed":
            return f"- {self.pattern}"
        if self.kind == "reordered":
            return "~ pattern order differs"
        where = f"{self.pattern}: {self.field}" if self.pattern else self.field
        return f"~ {where}: {self.old!r} -> {self.new!r}"


def _join(path: str, part: str | int) -> str:
    if isinstance(part, int):
        return f"{path}[{part}]"
    return f"{path}.{part}" if path else str(part)


def _value_diffs(old: Any, new: Any, path: str) -> list[tuple[str, Any, Any]]:
    """(path, old, new) for each differing leaf; lists of unequal length differ as a whole."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[tuple[str, Any, Any]] = []
        for key in [*old, *(k for k in new if k not in old)]:
            out += _value_diffs(old.get(key), new.get(key), _join(path, key))
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        pairs = enumerate(zip(old, new, strict=True))
        return [d for i, (o, n) in pairs for d in _value_diffs(o, n, _join(path, i))]
    return [] if _same(old, new) else [(path, old, new)]


def _same(old: Any, new: Any) -> bool:
    """Equal, and of the same type for numbers (``0`` and ``0.0`` are spelled differently)."""
    return old == new and (type(old) is type(new) or not isinstance(old, (int, float)))


def diff(a: BackendConfig | Backend, b: BackendConfig | Backend) -> list[Difference]:
    """Every difference between ``a`` and ``b``: name, patterns added/removed, fields changed
    (one entry per differing leaf), and pattern order among the patterns both have."""
    da, db = describe_backend(a), describe_backend(b)
    out = (
        [Difference("changed", "", "name", da["name"], db["name"])]
        if da["name"] != db["name"]
        else []
    )
    out += [
        Difference("changed", "", p, o, n)
        for key in ("graph_inputs", "input_sharing", "transform_for_annotation")
        for p, o, n in _value_diffs(da[key], db[key], key)
    ]
    pa, pb = da["patterns"], db["patterns"]
    out += [Difference("removed", key) for key in pa if key not in pb]
    out += [Difference("added", key) for key in pb if key not in pa]
    for key in (k for k in pa if k in pb):
        out += [
            Difference("changed", key, p, o, n) for p, o, n in _value_diffs(pa[key], pb[key], "")
        ]
    common_a = [k for k in pa if k in pb]
    common_b = [k for k in pb if k in pa]
    if common_a != common_b:
        out.append(Difference("reordered", "", "order", common_a, common_b))
    return out
