"""Stage 4: a validated :class:`SpecModel` -> a live torch ``BackendConfig``.

Every name is resolved here (so every resolution problem gets the position of its value) and
every setter of ``BackendPatternConfig`` in the field table (:mod:`backend_spec.spec.fields`)
is called, the underscore ones included. Problems are collected, not raised one at a time, so a
user sees all of them at once. ``extends`` and ``remove`` are applied by the loader.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from backend_spec import _torch, codes
from backend_spec.build.observed import ObservedDTypeWithConstraints, set_pt2e_keys
from backend_spec.diagnostics import Diagnostic
from backend_spec.names.dtypes import to_dtype
from backend_spec.names.fusers import sequential_fuser
from backend_spec.names.resolver import Kind, NameProblem, Resolver
from backend_spec.spec.fields import MODULE_KINDS, PATTERN_FIELDS, PATTERN_KINDS, FieldKind
from backend_spec.spec.models import (
    CONSTRAINT_FIELDS,
    OBSERVER_FIELDS,
    DTypeConfigModel,
    DTypeWithConstraintsModel,
    PatternModel,
    SequentialFuser,
    SpecModel,
)
from backend_spec.spec.source import KeyPath, SourceDoc


@dataclass
class Origin:
    """Where a pattern entry of the compiled config came from (for ``bespec show``)."""

    source: str  # a file path or "torch:<builtin>"
    line: int = 0


@dataclass
class Compiled:
    """The result of compiling one spec: the config and where each pattern came from (problems
    are raised as SpecError, never returned)."""

    backend_config: Any
    origins: dict[Any, Origin] = field(default_factory=dict)
    #: The source and validated model it came from (None for a built-in base).
    doc: SourceDoc | None = None
    spec: SpecModel | None = None


def pattern_key(config: Any) -> Any:
    """The key BackendConfig stores a pattern under (torch's reversed nested tuple format)."""
    utils = _torch.torch.ao.quantization.backend_config.utils
    return utils._get_pattern_in_reversed_nested_tuple_format(config)


class Compiler:
    """Compiles one validated spec; problems accumulate in ``self.diagnostics``."""

    def __init__(self, doc: SourceDoc, spec: SpecModel, resolver: Resolver):
        self.doc = doc
        self.spec = spec
        self.resolver = resolver
        self.diagnostics: list[Diagnostic] = []
        self._named_dtype_configs: dict[str, Any] = {}

    def problem(self, path: KeyPath, code: str, message: str, hint: str = "") -> None:
        self.diagnostics.append(self.doc.diagnostic(path, code, message, hint))

    def name(self, path: KeyPath, name: str, kind: Kind) -> Any:
        """Resolve ``name`` at ``path``; None (with a diagnostic) when it cannot be used."""
        try:
            return self.resolver.resolve(name, kind)
        except NameProblem as problem:
            self.problem(path, problem.code, problem.message, problem.hint)
            return None

    # -- dtype configs ----------------------------------------------------------------------

    def dtype_with_constraints(self, spec: str | DTypeWithConstraintsModel) -> Any:
        if isinstance(spec, str):
            return _torch.DTypeWithConstraints(dtype=to_dtype(spec))
        values = {name: getattr(spec, name) for name in CONSTRAINT_FIELDS}
        options = {name: getattr(spec, name) for name in OBSERVER_FIELDS}
        if any(value is not None for value in options.values()):
            return ObservedDTypeWithConstraints(dtype=to_dtype(spec.dtype), **values, **options)
        return _torch.DTypeWithConstraints(dtype=to_dtype(spec.dtype), **values)

    def dtype_config(self, model: DTypeConfigModel) -> Any:
        def constrained(value: Any) -> Any:
            return None if value is None else self.dtype_with_constraints(value)

        bias = model.bias_dtype
        bias_name = bias if isinstance(bias, str) or bias is None else bias.dtype
        return _torch.DTypeConfig(
            input_dtype=constrained(model.input_dtype),
            output_dtype=constrained(model.output_dtype),
            weight_dtype=constrained(model.weight_dtype),
            bias_dtype=None if bias_name is None else to_dtype(bias_name),
            is_dynamic=model.is_dynamic,
        )

    def named_dtype_config(self, path: KeyPath, name: str) -> Any:
        if name not in self._named_dtype_configs:
            model = self.spec.dtype_configs.get(name)
            if model is None and self.spec.set_aside(("dtype_configs", name)):
                return None  # it failed validation, which is reported already
            if model is None:
                known = list(self.spec.dtype_configs)
                match = difflib.get_close_matches(name, known, n=1)
                hint = (
                    f"did you mean '{match[0]}'?"
                    if match
                    else ("define it under the top-level dtype_configs")
                )
                self.problem(
                    path, codes.UNKNOWN_DTYPE_CONFIG, f"no dtype config named '{name}'", hint
                )
                return None
            self._named_dtype_configs[name] = self.dtype_config(model)
        return self._named_dtype_configs[name]

    # -- patterns ---------------------------------------------------------------------------

    def ops(self, path: KeyPath, value: Any, kind: Kind) -> Any:
        """A pattern op, or a (nested) tuple of them, from names or (nested) lists of names."""
        if isinstance(value, str):
            return self.name(path, value, kind)
        if isinstance(value, list) and value:
            return tuple(self.ops((*path, i), item, kind) for i, item in enumerate(value))
        self.problem(
            path, codes.BAD_PATTERN, "a pattern must be an op name or a non-empty list of them"
        )
        return None

    def fuser(self, path: KeyPath, value: str | SequentialFuser, arity: int) -> Callable | None:
        if isinstance(value, str):
            return self.name(path, value, Kind.FUNCTION)
        fused = self.name((*path, "sequential"), value.sequential, Kind.MODULE)
        return None if fused is None else sequential_fuser(fused, arity)

    def pattern_config(self, index: int, model: PatternModel) -> Any:
        """The BackendPatternConfig of one entry: every field of the table through its setter."""
        path: KeyPath = ("patterns", index)
        config = _torch.BackendPatternConfig()
        arity = _arity(model)
        for spec in PATTERN_FIELDS:
            value = getattr(model, spec.key)
            if value is None or (spec.kind not in PATTERN_KINDS and not value):
                continue  # unset: torch's default stays
            obj = self.field_value((*path, spec.key), spec.kind, value, arity)
            if obj is not None and not _has_none(obj):
                getattr(config, spec.setter)(obj)
        set_pt2e_keys(config, model.aten, model.quantize)
        return config

    def field_value(self, path: KeyPath, kind: FieldKind, value: Any, arity: int) -> Any:
        """The torch value of one spec field (None, with diagnostics, when unusable)."""
        if kind is FieldKind.PATTERN:
            return self.ops(path, value, Kind.OP)
        if kind is FieldKind.COMPLEX_PATTERN:
            return self.ops(path, value, Kind.COMPLEX_OP)
        if kind is FieldKind.OBSERVATION_TYPE:
            return _observation_type(value)
        if kind is FieldKind.DTYPE_CONFIGS:
            return self.pattern_dtype_configs(path, value)
        if kind in MODULE_KINDS:
            return self.name(path, value, Kind.MODULE)
        if kind is FieldKind.FUNCTION:
            return self.name(path, value, Kind.FUNCTION)
        if kind is FieldKind.FUSER:
            return self.fuser(path, value, arity)
        if kind is FieldKind.OBSERVATION_TYPE_MAP:
            return {n: _observation_type(t) for n, t in value.items()}
        if kind is FieldKind.INDEX_MAP:
            return dict(value)
        raise KeyError(f"the compiler does not know field kind {kind}")

    def pattern_dtype_configs(self, path: KeyPath, refs: list[Any]) -> list[Any]:
        configs = []
        for i, ref in enumerate(refs):
            if isinstance(ref, str):
                config = self.named_dtype_config((*path, i), ref)
            else:
                config = self.dtype_config(ref)
            if config is not None:
                configs.append(config)
        return configs

    def compile_patterns(self) -> list[tuple[int, Any]]:
        """Every pattern entry as ``(index, BackendPatternConfig)``, errors collected."""
        # Named configs are built even when unused so that their problems surface too.
        for name in self.spec.dtype_configs:
            self.named_dtype_config(("dtype_configs", name), name)
        return [(i, self.pattern_config(i, m)) for i, m in self.spec.numbered_patterns()]

    def removal_keys(self) -> list[tuple[KeyPath, Any]]:
        keys = []
        for i, ref in enumerate(self.spec.remove):
            path: KeyPath = ("remove", i)
            pattern = self.ops(path, ref, Kind.OP)
            if pattern is None or _has_none(pattern):
                continue
            keys.append((path, pattern_key(_torch.BackendPatternConfig(pattern))))
        return keys


def _has_none(pattern: Any) -> bool:
    if isinstance(pattern, tuple):
        return any(_has_none(p) for p in pattern)
    return pattern is None


def _arity(model: PatternModel) -> int:
    """The number of modules a fuser of the entry receives: the ops of a forward pattern, the
    top-level items of a complex one."""
    pattern = model.pattern if model.pattern is not None else model.pattern_complex_format
    return len(pattern) if isinstance(pattern, list) else 1


def _observation_type(name: str) -> Any:
    return _torch.ObservationType[name.upper()]
