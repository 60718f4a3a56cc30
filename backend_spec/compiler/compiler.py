"""Stage 4: a validated :class:`SpecModel` -> the intermediate form (:mod:`backend_spec.ir`).

Every name is resolved here (so every resolution problem gets the position of its value) and
every field of the field table (:mod:`backend_spec.specfile.fields`) becomes a value of an
:class:`~backend_spec.ir.Entry`, the version 2 keys included. Problems are collected, not
raised one at a time, so a user sees all of them at once. ``extends`` and ``remove`` are
applied by the loader; the torch ``BackendConfig`` is lowered from the result
(:mod:`backend_spec.ir.lower`) when someone asks for it.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from backend_spec import _torch, codes
from backend_spec.compiler.fuser_check import fuser_problem
from backend_spec.diagnostics import Diagnostic
from backend_spec.ir import (
    POLICY_KEYS,
    Backend,
    DTypeConfig,
    DTypeMapping,
    Entry,
    FunctionRef,
    Origin,
    policy_value,
)
from backend_spec.ir.lift import key_of, pattern_key, torch_defaults
from backend_spec.ir.lower import LoweredBackendConfig, backend_of, keeping, lower
from backend_spec.ir.model import flat_ops
from backend_spec.names.dtypes import to_dtype
from backend_spec.names.fusers import (
    CLASS_FORMS,
    reverse_sequential_wrapper2,
    reverse_wrapper,
    sequential_fuser,
)
from backend_spec.names.resolver import Kind, NameProblem, Resolver, defining_module
from backend_spec.names.vocabulary import TORCH_FACTORY_MODULES, inside
from backend_spec.specfile.fields import (
    DTYPE_CONFIG_MAPPINGS,
    DTYPE_MAPPING_FIELDS,
    MODULE_KINDS,
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

__all__ = ["Compiled", "Compiler", "Origin", "Resolved", "pattern_key"]

#: A factory argument that could not be built (its problem is already reported).
_MISSING = object()


@dataclass
class Compiled:
    """The result of compiling one spec: its intermediate form, and the torch config lowered
    from it (problems are raised as SpecError, never returned)."""

    #: Every entry with its origin, fields, dtype configs (named ones by their spec name) and
    #: version 2 facts.
    backend: Backend
    #: The source and validated model it came from (None for a built-in base).
    doc: SourceDoc | None = None
    spec: SpecModel | None = None
    #: The torch config it was lifted from (a built-in, a ``module:attr``), None for a spec.
    lifted_from: _torch.BackendConfig | None = None

    @classmethod
    def of_config(cls, config: _torch.BackendConfig, origin: Origin) -> Compiled:
        """A torch config (its facts as :func:`backend_of` finds them), every entry from
        ``origin``; :attr:`backend_config` is ``config`` itself."""
        backend = backend_of(config)
        entries = tuple(replace(entry, origin=origin) for entry in backend)
        return cls(replace(backend, entries=entries), lifted_from=config)

    @cached_property
    def backend_config(self) -> LoweredBackendConfig:
        """The torch BackendConfig, made on first use: lowered from :attr:`backend`, or the
        pattern configs of the one it was lifted from. Either keeps :attr:`backend`, so a
        reader given it (:func:`backend_of`) does not lift it again."""
        if self.lifted_from is not None:
            return keeping(self.backend, self.lifted_from)
        return lower(self.backend)

    @property
    def origins(self) -> dict[Any, Origin]:
        """Pattern key -> where its entry came from."""
        return {entry.key: entry.origin for entry in self.backend}


@dataclass(frozen=True)
class Resolved:
    """One pattern entry's resolution, made once by the compiler and read by the checks
    (:class:`backend_spec.compiler.view.SpecView`), also for a spec that did not compile.

    ``ops`` is the forward-order tuple of a flat ``pattern`` (None for a complex-format or
    nested one, or when a name did not resolve); ``key`` the key torch stores the entry under
    (None when a name did not resolve); ``diagnostics`` the entry's own problems; ``names``
    every name of the entry the compiler resolved, by its key path inside the entry
    (``("root_module",)``, ``("fuser_method", "sequential")``, ``("pattern", 0)``): the object,
    or the :class:`NameProblem` it was reported as. A check reads a field's object here, so
    no name is resolved twice."""

    index: int
    ops: tuple[Any, ...] | None
    key: Any
    diagnostics: tuple[Diagnostic, ...] = ()
    names: Mapping[KeyPath, Any] = field(default_factory=dict, hash=False)

    def name(self, *path: str | int) -> Any:
        """The object the name at ``path`` (inside the entry) resolved to; None when it is
        not set or did not resolve (its problem is reported already)."""
        return usable(self.names.get(path))


def usable(resolution: Any) -> Any:
    """A recorded resolution's object, None for a problem."""
    return None if isinstance(resolution, NameProblem) else resolution


class Compiler:
    """Compiles one validated spec; problems accumulate in ``self.diagnostics``, each
    pattern entry's resolution in ``self.resolved`` (by index), and the names resolved
    outside pattern entries (``remove``) in ``self.names`` (key path -> object, or its
    :class:`NameProblem`)."""

    def __init__(self, doc: SourceDoc, spec: SpecModel, resolver: Resolver):
        self.doc = doc
        self.spec = spec
        self.resolver = resolver
        self.diagnostics: list[Diagnostic] = []
        self.resolved: dict[int, Resolved] = {}
        self.names: dict[KeyPath, Any] = {}
        #: Where :meth:`name` records: :attr:`names`, or the entry being compiled's own.
        self._record = self.names
        self._named_dtype_configs: dict[str, DTypeConfig | None] = {}

    def problem(self, path: KeyPath, code: str, message: str, hint: str | None = None) -> None:
        self.diagnostics.append(self.doc.diagnostic(path, code, message, hint))

    def name(self, path: KeyPath, name: str, kind: Kind) -> Any:
        """Resolve ``name`` at ``path`` (recorded in :attr:`names`); None (with a diagnostic)
        when it cannot be used."""
        try:
            key = next((p for p in reversed(path) if isinstance(p, str)), "")
            obj = self.resolver.resolve(name, kind, f"'{key}'" if key else "this field")
        except NameProblem as problem:
            self._record[path] = problem
            self.problem(path, problem.code, problem.message, problem.hint)
            return None
        self._record[path] = obj
        return obj

    # -- dtype configs ----------------------------------------------------------------------

    def dtype_mapping(self, spec: str | DTypeWithConstraintsModel | None) -> DTypeMapping:
        """A dtype mapping: the dtype and every key of :data:`DTYPE_MAPPING_FIELDS` it sets."""
        if spec is None:
            return DTypeMapping()
        if isinstance(spec, str):
            return DTypeMapping(to_dtype(spec))
        options = tuple(
            (name, getattr(spec, name))
            for name in DTYPE_MAPPING_FIELDS
            if getattr(spec, name) is not None
        )
        return DTypeMapping(to_dtype(spec.dtype), options)

    def dtype_config(self, model: DTypeConfigModel, name: str | None = None) -> DTypeConfig:
        bias = model.bias_dtype
        bias_name = bias if isinstance(bias, str) or bias is None else bias.dtype
        mappings = tuple(
            (key, self.dtype_mapping(getattr(model, key))) for key in DTYPE_CONFIG_MAPPINGS
        )
        if model.is_dynamic and self.spec.spec_version < 9:
            mappings = tuple((key, _placeholder_activation(key, m)) for key, m in mappings)
        return DTypeConfig(
            mappings,
            None if bias_name is None else to_dtype(bias_name),
            model.is_dynamic,
            name,
        )

    def named_dtype_config(self, path: KeyPath, name: str) -> DTypeConfig | None:
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
            self._named_dtype_configs[name] = self.dtype_config(model, name)
        return self._named_dtype_configs[name]

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
                _call_hint(path, value, factory, arity),
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

    def factory_arg(self, path: KeyPath, value: Any, arity: int, in_list: bool = False) -> Any:
        """A factory argument: a name -> its object, a list -> a tuple, a form -> a function.
        A class inside a list is a lookup key (``get_fuser_method``'s ``(nn.Conv2d,
        nn.ReLU)``), not the fused module: only trusted here, then judged with every other
        fuser by what the built fuser makes (:meth:`prove_fuser`)."""
        if isinstance(value, str):
            try:
                obj = self.resolver.factory_argument(value, lookup_key=in_list)
            except NameProblem as problem:
                self._record[path] = problem
                self.problem(path, problem.code, problem.message, problem.hint)
                return _MISSING
            self._record[path] = obj
            return obj
        if isinstance(value, LiteralArg):
            return value.literal
        if isinstance(value, list):
            items = tuple(
                self.factory_arg((*path, i), v, arity, in_list=True) for i, v in enumerate(value)
            )
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

    def entry(self, index: int, model: PatternModel) -> Entry | None:
        """The entry of one pattern: every field of the table the spec sets (torch's default
        for the others), its ATen chains and policy; None when its pattern did not resolve."""
        path: KeyPath = ("patterns", index)
        arity = _arity(model)
        first = len(self.diagnostics)
        names: dict[KeyPath, Any] = {}
        self._record = names
        try:
            values = self.field_values(path, model, arity)
        finally:
            self._record = self.names
        self.prove_fuser(path, values, named=isinstance(model.fuser_method, str))
        self.aten_chains((*path, "aten"), model.aten or ())
        pattern, complex_format = values.get("pattern"), values.get("pattern_complex_format")
        unresolved = pattern is None and complex_format is None
        key = None if unresolved else key_of(pattern, complex_format)
        own = tuple(self.diagnostics[first:])
        own_names = {p[len(path) :]: v for p, v in names.items()}
        self.resolved[index] = Resolved(index, flat_ops(pattern), key, own, own_names)
        if key is None:
            return None  # its problem is reported already
        defaults = torch_defaults()
        fields = tuple(
            (spec.key, _ir_value(spec.kind, values[spec.key]))
            if spec.key in values
            else (spec.key, defaults[spec.key])
            for spec in PATTERN_FIELDS
            if spec.key in values or spec.key in defaults
        )
        fields = tuple((k, v) for k, v in fields if v or k in _PATTERN_KEYS)
        aten = tuple(
            tuple(tuple([op] if isinstance(op, str) else op) for op in chain)
            for chain in model.aten or ()
        )
        policy = tuple(
            (k, policy_value(getattr(model, k)))
            for k in POLICY_KEYS
            if getattr(model, k) is not None
        )
        origin = Origin(self.doc.file, self.doc.where(path)[0])
        return Entry(key, origin, fields, aten, policy)

    def aten_chains(self, path: KeyPath, chains: list[list[Any]]) -> None:
        """Every op of the entry's ``aten:`` chains names an overload torch registers, as a
        pattern op must: a misspelt one would silently never match (BS300, with the closest
        names). Only checked: the chains stay names (pt2e's rule table matches by name)."""
        for i, chain in enumerate(chains):
            for j, op in enumerate(chain):
                alternatives = (
                    [((*path, i, j), op)]
                    if isinstance(op, str)
                    else [((*path, i, j, k), name) for k, name in enumerate(op)]
                )
                for where, name in alternatives:
                    try:
                        self.resolver.lookup(name)
                    except NameProblem as problem:
                        self.problem(where, problem.code, problem.message, problem.hint)

    def field_values(self, path: KeyPath, model: PatternModel, arity: int) -> dict[str, Any]:
        """The torch value of each field the entry sets and that resolved."""
        values: dict[str, Any] = {}
        for spec in PATTERN_FIELDS:
            value = getattr(model, spec.key)
            if value is None or (spec.kind not in PATTERN_KINDS and not value):
                continue  # unset: torch's default stays
            obj = self.field_value((*path, spec.key), spec.kind, value, arity)
            if obj is not None and not _has_none(obj):
                values[spec.key] = obj
        return values

    def prove_fuser(self, path: KeyPath, values: dict[str, Any], named: bool) -> None:
        """Whatever form named it, the fuser must build the declared fused module from float
        modules of its (forward) pattern: an error at the fuser when it does not. A named
        fuser that cannot take one module per op is BS511's one finding, not this one's."""
        fuser, pattern = values.get("fuser_method"), values.get("pattern")
        if fuser is None or pattern is None:
            return
        ops = pattern if isinstance(pattern, tuple) else (pattern,)
        if named and not _takes(fuser, 1 + len(ops)):
            return
        problem = fuser_problem(fuser, ops, values.get("fused_module"))
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

    def pattern_dtype_configs(self, path: KeyPath, refs: list[Any]) -> tuple[DTypeConfig, ...]:
        configs = []
        for i, ref in enumerate(refs):
            if isinstance(ref, str):
                config = self.named_dtype_config((*path, i), ref)
            else:
                config = self.dtype_config(ref)
            if config is not None:
                configs.append(config)
        return tuple(configs)

    def compile_patterns(self) -> list[Entry]:
        """Every pattern entry that resolved, in order, errors collected."""
        # Named configs are built even when unused so that their problems surface too.
        for name in self.spec.dtype_configs:
            self.named_dtype_config(("dtype_configs", name), name)
        entries = (self.entry(i, m) for i, m in self.spec.numbered_patterns())
        return [entry for entry in entries if entry is not None]

    def graph_inputs(self) -> Any:
        """The DTypeConfig ``graph_inputs`` names (version 5), or None (unset, or reported)."""
        if self.spec.graph_inputs is None:
            return None
        return self.named_dtype_config(("graph_inputs",), self.spec.graph_inputs)

    def passes(self) -> tuple[FunctionRef, ...]:
        """The ``transform_for_annotation`` passes (version 8), each a function of an allowed
        module taking the GraphModule: named, or the result of ``{call: factory, ...}`` with a
        factory of an allowed module (torch's fuser factories build fusers, not passes)."""
        found = []
        for index, value in enumerate(self.spec.transform_for_annotation or ()):
            function = self.graph_pass(("transform_for_annotation", index), value)
            if function is not None:
                found.append(FunctionRef.of(function))
        return tuple(found)

    def graph_pass(self, path: KeyPath, value: str | FunctionForm) -> Any:
        """One pass of ``transform_for_annotation``, or None (reported)."""
        if not isinstance(value, str) and value.form != "call":
            self.problem(
                (*path, value.form),
                codes.WRONG_KIND,
                f"{{{value.form}: ...}} builds a fuser; a pass of transform_for_annotation is a "
                "function name or {call: factory, args: [...]}",
            )
            return None
        where = (*path, "call") if not isinstance(value, str) else path
        named = value if isinstance(value, str) else str(value.call)
        obj = self.name(where, named, Kind.FUNCTION)
        if obj is None:
            return None
        module = defining_module(getattr(obj, "__func__", obj))
        if not inside(module or "", self.resolver.allowed):
            self.problem(
                where,
                codes.UNTRUSTED,
                f"'{named}' is defined in '{module}'; transform_for_annotation runs only "
                "functions of allowed modules",
                "write the pipeline as a function of your own module and allow-list it "
                "(--allow-import / allow_imports)",
            )
            return None
        function = obj if isinstance(value, str) else self.factory_call(path, value, 1)
        if function is not None and not _takes(function, 1):
            self.problem(
                where,
                codes.WRONG_KIND,
                f"'{named}' {'is' if isinstance(value, str) else 'returned'} a function that "
                "cannot take the GraphModule alone; a pass is called as pass(graph_module)",
            )
            return None
        return function

    def removal_keys(self) -> list[tuple[KeyPath, Any]]:
        keys = []
        for i, ref in enumerate(self.spec.remove):
            path: KeyPath = ("remove", i)
            pattern = self.ops(path, ref, Kind.OP)
            if pattern is None or _has_none(pattern):
                continue
            keys.append((path, key_of(pattern)))
        return keys


#: The keys that hold an entry's pattern (kept whatever their value).
_PATTERN_KEYS = frozenset(f.key for f in PATTERN_FIELDS if f.kind in PATTERN_KINDS)


def _ir_value(kind: FieldKind, value: Any) -> Any:
    """A resolved field value as the intermediate form holds it."""
    if kind in (FieldKind.FUNCTION, FieldKind.FUSER):
        return FunctionRef.of(value)
    if kind in (FieldKind.OBSERVATION_TYPE_MAP, FieldKind.INDEX_MAP):
        return tuple(value.items())
    return value


def _call_hint(path: KeyPath, value: FunctionForm, factory: Any, arity: int) -> str:
    """The fix for a factory call that failed: when it was called with no arguments and takes
    what the field's function takes (a fuser: ``is_qat`` and one module per op), it is most
    likely that function itself, named in the wrong form."""
    if value.args or value.kwargs or not _takes(factory, 1 + arity):
        return "check the arguments against the factory's signature"
    try:
        signature = f"{value.call}{inspect.signature(factory)}"
    except (TypeError, ValueError):
        signature = str(value.call)
    return (
        f"{signature} looks like the function itself, not a factory of one: write "
        f"'{path[-1]}: {value.call}' without call (a factory gets its arguments from args:)"
    )


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


def _placeholder_activation(key: str, mapping: DTypeMapping) -> DTypeMapping:
    """Before version 9 a dynamic config's activations observe with a placeholder whatever
    ``observer`` says (version 9 gives a calibrating observer its meaning: what a dynamic QAT
    fake-quantize wraps), so an older file's ``observer`` there is dropped."""
    if key == "weight_dtype" or "observer" not in dict(mapping.options):
        return mapping
    options = tuple((name, value) for name, value in mapping.options if name != "observer")
    return DTypeMapping(mapping.dtype, options)
