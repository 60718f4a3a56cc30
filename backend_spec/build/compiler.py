"""Stage 4: a validated :class:`SpecModel` -> a live torch ``BackendConfig``.

Every name is resolved here (so every resolution problem gets the position of its value), every
setter of ``BackendPatternConfig`` is called, the underscore ones included, and ``extends`` /
``remove`` are applied. Problems are collected, not raised one at a time, so a user sees all of
them at once.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from backend_spec import _torch, codes
from backend_spec.diagnostics import Diagnostic
from backend_spec.names.dtypes import to_dtype
from backend_spec.names.fusers import sequential_fuser
from backend_spec.names.resolver import Kind, NameProblem, Resolver
from backend_spec.spec.models import (
    CONSTRAINT_FIELDS,
    DTypeConfigModel,
    DTypeWithConstraintsModel,
    PatternModel,
    SequentialFuser,
    SpecModel,
)
from backend_spec.spec.source import KeyPath, SourceDoc

_MODULE_FIELDS = ("root_module", "qat_module", "reference_quantized_module", "fused_module")
_SETTERS = {
    "root_module": "set_root_module",
    "qat_module": "set_qat_module",
    "reference_quantized_module": "set_reference_quantized_module",
    "fused_module": "set_fused_module",
    "root_node_getter": "_set_root_node_getter",
    "extra_inputs_getter": "_set_extra_inputs_getter",
}


@dataclass
class Origin:
    """Where a pattern entry of the compiled config came from (for ``bespec show``)."""

    source: str  # a file path or "torch:<builtin>"
    line: int = 0


@dataclass
class Compiled:
    """The result of compiling one spec: the config, per-pattern origins, and problems."""

    backend_config: Any
    origins: dict[Any, Origin] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)


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
        path: KeyPath = ("patterns", index)
        config = _torch.BackendPatternConfig()
        if model.pattern is not None:
            pattern = self.ops((*path, "pattern"), model.pattern, Kind.OP)
            if pattern is not None and not _has_none(pattern):
                config.set_pattern(pattern)
            arity = 1 if isinstance(model.pattern, str) else len(model.pattern)
        else:
            pattern = self.ops(
                (*path, "pattern_complex_format"), model.pattern_complex_format, Kind.COMPLEX_OP
            )
            if pattern is not None and not _has_none(pattern):
                config._set_pattern_complex_format(pattern)
            arity = _complex_arity(model.pattern_complex_format)
        if model.observation_type is not None:
            config.set_observation_type(_observation_type(model.observation_type))
        config.set_dtype_configs(self.pattern_dtype_configs(path, model))
        for field_name in _SETTERS:
            value = getattr(model, field_name)
            if value is not None:
                kind = Kind.MODULE if field_name in _MODULE_FIELDS else Kind.FUNCTION
                obj = self.name((*path, field_name), value, kind)
                if obj is not None:
                    getattr(config, _SETTERS[field_name])(obj)
        if model.fuser_method is not None:
            fuser = self.fuser((*path, "fuser_method"), model.fuser_method, arity)
            if fuser is not None:
                config.set_fuser_method(fuser)
        if model.num_tensor_args_to_observation_type:
            config._set_num_tensor_args_to_observation_type(
                {
                    n: _observation_type(t)
                    for n, t in model.num_tensor_args_to_observation_type.items()
                }
            )
        if model.input_type_to_index:
            config._set_input_type_to_index(dict(model.input_type_to_index))
        return config

    def pattern_dtype_configs(self, path: KeyPath, model: PatternModel) -> list[Any]:
        configs = []
        for i, ref in enumerate(model.dtype_configs):
            if isinstance(ref, str):
                config = self.named_dtype_config((*path, "dtype_configs", i), ref)
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
        return [(i, self.pattern_config(i, m)) for i, m in enumerate(self.spec.patterns)]

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


def _complex_arity(pattern: Any) -> int:
    """The number of modules a fuser of a complex pattern receives (top-level items)."""
    return len(pattern) if isinstance(pattern, list) else 1


def _observation_type(name: str) -> Any:
    return _torch.ObservationType[name.upper()]
