"""Stage 4: a validated :class:`SpecModel` -> a live torch ``BackendConfig``.

Every name is resolved here (so every resolution problem gets the position of its value) and
every setter of ``BackendPatternConfig`` in the field table (:mod:`backend_spec.specfile.fields`)
is called, the underscore ones included. Problems are collected, not raised one at a time, so a
user sees all of them at once. ``extends`` and ``remove`` are applied by the loader.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from backend_spec import _torch, codes
from backend_spec.compiler.fuser_check import fuser_problem
from backend_spec.diagnostics import Diagnostic
from backend_spec.ir import POLICY_KEYS, Backend, Origin
from backend_spec.ir.carrier import ObservedDTypeWithConstraints, set_pt2e_keys
from backend_spec.ir.lift import lift, pattern_key
from backend_spec.names.dtypes import to_dtype
from backend_spec.names.fusers import (
    CLASS_FORMS,
    reverse_sequential_wrapper2,
    reverse_wrapper,
    sequential_fuser,
)
from backend_spec.names.resolver import Kind, NameProblem, Resolver
from backend_spec.names.vocabulary import TORCH_FACTORY_MODULES, inside
from backend_spec.specfile.fields import (
    CONSTRAINT_FIELDS,
    MODULE_KINDS,
    OBSERVER_FIELDS,
    PATTERN_FIELDS,
    PATTERN_KINDS,
    FieldKind,
)
from backend_spec.specfile.models import (
    DTypeConfigModel,
    DTypeWithConstraintsModel,
    FunctionForm,
    LiteralArg,
    PatternModel,
    SpecModel,
    nested_forward_items,
)
from backend_spec.specfile.source import KeyPath, SourceDoc

__all__ = ["Compiled", "Compiler", "Origin", "pattern_key"]

#: A factory argument that could not be built (its problem is already reported).
_MISSING = object()


@dataclass
class Compiled:
    """The result of compiling one spec: the config and where each pattern came from (problems
    are raised as SpecError, never returned)."""

    backend_config: _torch.BackendConfig
    origins: dict[Any, Origin] = field(default_factory=dict)
    #: The source and validated model it came from (None for a built-in base).
    doc: SourceDoc | None = None
    spec: SpecModel | None = None
    #: The spec's named DTypeConfig objects with their names (for ``bespec show``), base
    #: first. Held as objects and found by identity: an ``id`` could be reused once freed.
    named_dtype_configs: list[tuple[str, Any]] = field(default_factory=list)

    def dtype_config_name(self, dtype_config: Any) -> str | None:
        """The spec's name of ``dtype_config`` (the object itself), or None."""
        return next((n for n, dc in reversed(self.named_dtype_configs) if dc is dtype_config), None)

    @cached_property
    def backend(self) -> Backend:
        """The intermediate form: every entry with its origin, fields, dtype configs (named
        ones by their spec name) and version 2 facts. Made on first use, once loading is done."""
        names = {id(dc): name for name, dc in self.named_dtype_configs}
        return lift(self.backend_config, self.origins, lambda dc: names.get(id(dc)))


class Compiler:
    """Compiles one validated spec; problems accumulate in ``self.diagnostics``."""

    def __init__(self, doc: SourceDoc, spec: SpecModel, resolver: Resolver):
        self.doc = doc
        self.spec = spec
        self.resolver = resolver
        self.diagnostics: list[Diagnostic] = []
        self._named_dtype_configs: dict[str, Any] = {}

    def problem(self, path: KeyPath, code: str, message: str, hint: str | None = None) -> None:
        self.diagnostics.append(self.doc.diagnostic(path, code, message, hint))

    def name(self, path: KeyPath, name: str, kind: Kind) -> Any:
        """Resolve ``name`` at ``path``; None (with a diagnostic) when it cannot be used."""
        try:
            field = next((p for p in reversed(path) if isinstance(p, str)), "")
            return self.resolver.resolve(name, kind, f"'{field}'" if field else "this field")
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
                match = self.resolver.suggest_names(name, self.spec.dtype_configs)
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

    def named_dtype_configs(self) -> list[tuple[str, Any]]:
        """Each named DTypeConfig built so far, with its name."""
        return [(name, dc) for name, dc in self._named_dtype_configs.items() if dc is not None]

    # -- patterns ---------------------------------------------------------------------------

    def ops(self, path: KeyPath, value: Any, kind: Kind) -> Any:
        """A pattern op, or a (nested) tuple of them, from names or (nested) lists of names."""
        if isinstance(value, str):
            return self.name(path, value, kind)
        argument = isinstance(path[-1], int) and path[-1] > 0  # not the op, not the whole
        if kind is Kind.COMPLEX_OP and _is_literal(value) and argument:
            return value  # an argument literal (version 3): (operator.getitem, op, 0)
        if isinstance(value, list) and value:
            return tuple(self.ops((*path, i), item, kind) for i, item in enumerate(value))
        self.problem(
            path, codes.BAD_PATTERN, "a pattern must be an op name or a non-empty list of them"
        )
        return None

    def function(self, path: KeyPath, value: str | FunctionForm, arity: int) -> Any:
        """A fuser or getter: a name, a torch wrapper form, or a factory call."""
        if isinstance(value, str):
            return self.name(path, value, Kind.FUNCTION)
        form = value.form
        if form in CLASS_FORMS:
            cls = self.name((*path, form), getattr(value, form), Kind.FUSED_MODULE)
            if cls is None:
                return None
            if form == "sequential":
                return sequential_fuser(cls, arity)
            return reverse_sequential_wrapper2(cls)
        if form in ("reverse2", "reverse3"):
            inner = self.function((*path, form), getattr(value, form), arity)
            return None if inner is None else reverse_wrapper(form)(inner)
        return self.factory_call(path, value, arity)

    def factory_call(self, path: KeyPath, value: FunctionForm, arity: int) -> Any:
        """Call a factory, after checking it may be called, with named objects and literals."""
        factory = self.name((*path, "call"), str(value.call), Kind.FUNCTION)
        if factory is None:
            return None
        if not self._may_call(factory):
            self.problem(
                (*path, "call"),
                codes.FACTORY_REFUSED,
                f"'{value.call}' is not a factory bespec calls: only Python functions of "
                f"{' or '.join(TORCH_FACTORY_MODULES)} or of allowed modules are called",
                "add its module to allow_imports if you trust it",
            )
            return None
        args = [
            self.factory_arg((*path, "args", i), a, arity) for i, a in enumerate(value.args or [])
        ]
        kwargs = {
            k: self.factory_arg((*path, "kwargs", k), a, arity)
            for k, a in (value.kwargs or {}).items()
        }
        if any(a is _MISSING for a in [*args, *kwargs.values()]):
            return None
        try:
            result = factory(*args, **kwargs)
        except Exception as exc:  # the factory's own error: reported, never a traceback
            self.problem(
                (*path, "call"),
                codes.FACTORY_REFUSED,
                f"calling '{value.call}' failed: {type(exc).__name__}: {exc}",
                "check the arguments against the factory's signature",
            )
            return None
        if not callable(result):
            self.problem(
                (*path, "call"),
                codes.FACTORY_REFUSED,
                f"'{value.call}' returned {type(result).__name__}, not a function",
            )
            return None
        return result

    def _may_call(self, factory: Any) -> bool:
        """A Python function (or class-level method) of torch's factory modules or of an
        allowed module: never a class, a builtin, or any other torch function."""
        if not (inspect.isfunction(factory) or inspect.ismethod(factory)):
            return False
        module = getattr(getattr(factory, "__func__", factory), "__module__", None) or ""
        return inside(module, TORCH_FACTORY_MODULES) or inside(module, self.resolver.allowed)

    def factory_arg(self, path: KeyPath, value: Any, arity: int) -> Any:
        """A factory argument: a name -> its object, a list -> a tuple, a form -> a function."""
        if isinstance(value, str):
            try:
                return self.resolver.factory_argument(value)
            except NameProblem as problem:
                self.problem(path, problem.code, problem.message, problem.hint)
                return _MISSING
        if isinstance(value, LiteralArg):
            return value.literal
        if isinstance(value, list):
            items = tuple(self.factory_arg((*path, i), v, arity) for i, v in enumerate(value))
            return _MISSING if any(i is _MISSING for i in items) else items
        if isinstance(value, FunctionForm) and value.call is not None:
            self.problem(
                (*path, "call"),
                codes.FACTORY_REFUSED,
                "a {call: ...} inside the arguments of another {call: ...} is not called",
                "name the function itself, or use {sequential: X} / {reverse2: ...}",
            )
            return _MISSING
        if isinstance(value, FunctionForm):
            built = self.function(path, value, arity)
            return _MISSING if built is None else built
        return value

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
        set_pt2e_keys(config, model.aten, {key: getattr(model, key) for key in POLICY_KEYS})
        self.prove_fuser(path, config, named=isinstance(model.fuser_method, str))
        return config

    def prove_fuser(self, path: KeyPath, config: Any, named: bool) -> None:
        """Whatever form named it, the fuser must build the declared fused module from float
        modules of its (forward) pattern: an error at the fuser when it does not. A named
        fuser that cannot take one module per op is BS511's one finding, not this one's."""
        if config.fuser_method is None or config.pattern is None:
            return
        ops = config.pattern if isinstance(config.pattern, tuple) else (config.pattern,)
        if named and not _takes(config.fuser_method, 1 + len(ops)):
            return
        problem = fuser_problem(config.fuser_method, ops, config.fused_module)
        if problem:
            self.problem(
                (*path, "fuser_method"),
                codes.FUSER_BUILDS_WRONG_MODULE,
                problem,
                "use a fuser that builds the fused_module of this entry, such as "
                "{sequential: FusedModuleClass} with the class fused_module names",
            )

    def field_value(self, path: KeyPath, kind: FieldKind, value: Any, arity: int) -> Any:
        """The torch value of one spec field (None, with diagnostics, when unusable)."""
        if kind is FieldKind.PATTERN:
            nested = nested_forward_items(value)  # version 2: nested items match like complex
            return self.ops(path, value, Kind.COMPLEX_OP if nested else Kind.OP)
        if kind is FieldKind.COMPLEX_PATTERN:
            return self.ops(path, value, Kind.COMPLEX_OP)
        if kind is FieldKind.OBSERVATION_TYPE:
            return _observation_type(value)
        if kind is FieldKind.DTYPE_CONFIGS:
            return self.pattern_dtype_configs(path, value)
        if kind in MODULE_KINDS:
            return self.name(path, value, Kind.MODULE)
        if kind in (FieldKind.FUNCTION, FieldKind.FUSER):
            return self.function(path, value, arity)
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

    def graph_inputs(self) -> Any:
        """The DTypeConfig ``graph_inputs`` names (version 5), or None (unset, or reported)."""
        if self.spec.graph_inputs is None:
            return None
        return self.named_dtype_config(("graph_inputs",), self.spec.graph_inputs)

    def removal_keys(self) -> list[tuple[KeyPath, Any]]:
        keys = []
        for i, ref in enumerate(self.spec.remove):
            path: KeyPath = ("remove", i)
            pattern = self.ops(path, ref, Kind.OP)
            if pattern is None or _has_none(pattern):
                continue
            keys.append((path, pattern_key(_torch.BackendPatternConfig(pattern))))
        return keys


def _takes(fn: Any, count: int) -> bool:
    """Whether ``fn`` can be called with ``count`` positional arguments (True if unknown)."""
    try:
        inspect.signature(fn).bind(*([None] * count))
    except TypeError:
        return False
    except ValueError:  # no signature to read
        return True
    return True


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


def _is_literal(value: Any) -> bool:
    """An integer argument literal of a complex-format pattern (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool)
