"""``bespec compile -o``: a BackendConfig as a standalone, readable Python module.

The module's ``get_backend_config()`` rebuilds the same BackendConfig importing only torch
(and ``operator`` or allowed modules when the spec names them), so a backend can ship without
bespec at run time. It is generated from the export document, so it names objects exactly as
a spec file would, and keeps the spec's names for its dtype configs.

A BackendConfig has no field for the version 2 observer options of a dtype config
(``granularity: per_channel``, ``observer``, ``qscheme``, ``fake_quant``...): the module's
``get_qconfig_mapping()`` carries them, as the QConfigs ``backend_spec.qconfig_mapping`` builds.
The pt2e keys have no FX form at all; ``compile --target pt2e`` writes them.
:func:`module_warnings` names what the BackendConfig leaves out and where it went instead.
"""

from __future__ import annotations

import keyword
import sys
from typing import Any

from backend_spec import codes
from backend_spec.diagnostics import Diagnostic, SpecError
from backend_spec.names.vocabulary import (
    ALIASES,
    BARE_FUNCTION_MODULES,
    DEFAULT_ROOTS,
    METHOD_PREFIX,
    SPECIAL_NAMES,
)
from backend_spec.specfile.fields import (
    CONSTRAINT_FIELDS,
    DTYPE_CONFIG_MAPPINGS,
    MODULE_KINDS,
    PATTERN_FIELDS,
    PATTERN_KINDS,
    PT2E_PATTERN_FIELDS,
    FieldKind,
)

_INDENT = "    "


class _Writer:
    """Turns spec names into Python expressions, remembering which modules to import."""

    def __init__(self) -> None:
        self.imports: set[str] = {"torch", "torch.ao.quantization.backend_config.utils"}
        self.helpers: set[str] = set()

    def name(self, name: str) -> str:
        if name.startswith(METHOD_PREFIX):
            return repr(name[len(METHOD_PREFIX) :])
        dotted = SPECIAL_NAMES.get(name, name)
        parts = dotted.split(".")
        if len(parts) == 1:
            module = next(m for m in BARE_FUNCTION_MODULES if parts[0] in vars(sys.modules[m]))
            dotted = f"{module}.{parts[0]}"
        elif parts[0] in ALIASES:
            dotted = ".".join([ALIASES[parts[0]], *parts[1:]])
        module = self._import_for(_dotted_code(dotted))
        if module is not None and module.split(".")[0] not in DEFAULT_ROOTS:
            # Through the module itself: a package attribute may be rebound (star-imports).
            self.helpers.add(_LOOKUP)
            return f"_lookup({module!r}, {dotted[len(module) + 1 :]!r})"
        return dotted

    def _import_for(self, dotted: str) -> str | None:
        parts = dotted.split(".")
        for end in range(len(parts) - 1, 0, -1):
            module = ".".join(parts[:end])
            if module in sys.modules:
                self.imports.add(module)
                return module
        return None

    def dtype(self, value: Any) -> str:
        if isinstance(value, str):
            return _dotted_code(f"torch.{value}")
        fields = [f"dtype={_dotted_code('torch.' + value['dtype'])}"]
        # Version 2 observer keys are no BackendConfig field: qconfig_mapping and the pt2e
        # quantizer read them from the spec, the BackendConfig module leaves them out.
        fields += [f"{k}={v!r}" for k, v in value.items() if k in CONSTRAINT_FIELDS]
        return f"DTypeWithConstraints({', '.join(fields)})"

    def dtype_config(self, doc: dict[str, Any]) -> str:
        args = []
        for key in ("input_dtype", "output_dtype", "weight_dtype"):
            if key in doc:
                args.append(f"{key}={self.dtype(doc[key])}")
        if "bias_dtype" in doc:
            bias = doc["bias_dtype"]
            bias_name = bias if isinstance(bias, str) else bias["dtype"]
            args.append(f"bias_dtype={_dotted_code('torch.' + bias_name)}")
        if "is_dynamic" in doc:
            args.append(f"is_dynamic={doc['is_dynamic']!r}")
        inner = "".join(f"\n{_INDENT * 2}{arg}," for arg in args)
        return f"DTypeConfig({inner}\n{_INDENT})"

    def pattern(self, value: Any) -> str:
        if isinstance(value, list):
            inner = ", ".join(self.pattern(v) for v in value)
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        return self.name(value)

    def function(self, value: Any, arity: int) -> str:
        """A fuser or getter: a name or one of the spec's function forms."""
        if isinstance(value, str):
            return self.name(value)
        if "sequential" in value:
            fused = self.name(value["sequential"])
            if arity == 2:
                self.imports.add("torch.ao.quantization.fuser_method_mappings")
                return f"torch.ao.quantization.fuser_method_mappings._sequential_wrapper2({fused})"
            self.helpers.add(_SEQUENTIAL)
            return f"_sequential({fused})"
        if "reverse_sequential" in value:
            self.helpers.add(_REVERSE_SEQUENTIAL)
            return f"_reverse_sequential({self.name(value['reverse_sequential'])})"
        for form in ("reverse2", "reverse3"):
            if form in value:
                self.imports.add("torch.ao.quantization.fuser_method_mappings")
                inner = self.function(value[form], arity)
                return f"torch.ao.quantization.fuser_method_mappings._{form}({inner})"
        args = [self.argument(a, arity) for a in value.get("args", [])]
        args += [f"{k}={self.argument(a, arity)}" for k, a in value.get("kwargs", {}).items()]
        return f"{self.name(value['call'])}({', '.join(args)})"

    def argument(self, value: Any, arity: int) -> str:
        """A factory argument as a Python expression (literals with repr)."""
        if isinstance(value, str):
            return self.name(value)
        if isinstance(value, list):
            items = [self.argument(v, arity) for v in value]
            return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
        if isinstance(value, dict) and "literal" in value:
            return repr(value["literal"])
        if isinstance(value, dict):
            return self.function(value, arity)
        return repr(value)

    def op(self, op: Any) -> str:
        """An op of a QConfigMapping (a class, a function or a method name) as code."""
        from backend_spec.names.naming import op_name

        name = op_name(op)
        if name is None:
            raise _unnameable(repr(op))
        return self.name(name)

    def constructor(self, value: Any) -> str:
        """An observer or fake-quantize constructor (``Cls.with_args(...)``) as code; its
        arguments are dtypes, qschemes, numbers and nested constructors."""
        partial = getattr(value, "p", None)
        if partial is None or getattr(value, "callable_args", None):
            raise _unnameable(repr(value))
        cls = partial.func
        self.imports.add(cls.__module__)
        dotted = _dotted_code(f"{cls.__module__}.{cls.__qualname__}")
        args = ", ".join(f"{k}={self.constant(v)}" for k, v in partial.keywords.items())
        return f"{dotted}.with_args({args})"

    def constant(self, value: Any) -> str:
        """An observer argument as code: literals with repr, torch's dtypes and qschemes by
        their dotted names, constructors through :meth:`constructor`."""
        import torch

        if isinstance(value, (torch.dtype, torch.qscheme)):
            return _dotted_code(str(value))
        if value is None or isinstance(value, (bool, int, float, str)):
            return repr(value)
        return self.constructor(value)

    def qconfig(self, qconfig: Any) -> str:
        weight = "None" if qconfig.weight is None else self.constructor(qconfig.weight)
        return (
            f"QConfig(\n{_INDENT * 2}activation={self.constructor(qconfig.activation)},"
            f"\n{_INDENT * 2}weight={weight},\n{_INDENT})"
        )

    def qconfig_pairs(self, backend_config: Any, *, qat: bool) -> str:
        """The body of a function returning ``[(op, QConfig), ...]``: the QConfigs of
        ``backend_spec.qconfig_mapping`` (each distinct one bound once, so fused ops share)."""
        from backend_spec.analysis.qconfigs import op_qconfigs

        names: dict[str, str] = {}
        lines: list[str] = []
        pairs: list[str] = []
        for op, qconfig in op_qconfigs(backend_config, None, qat=qat).items():
            code = self.qconfig(qconfig)
            if code not in names:
                names[code] = f"q{len(names)}"
                lines.append(f"{_INDENT}{names[code]} = {code}")
            pairs.append(f"{_INDENT * 2}({self.op(op)}, {names[code]}),")
        return "\n".join([*lines, f"{_INDENT}return [", *pairs, f"{_INDENT}]"])

    def entry(self, doc: dict[str, Any], dtype_refs: dict[str, str]) -> list[str]:
        """The constructor and setter calls of one exported entry, in the table's order."""
        head, calls = "BackendPatternConfig()", []
        pattern = doc.get("pattern", doc.get("pattern_complex_format"))
        arity = len(pattern) if isinstance(pattern, list) else 1
        for spec in PATTERN_FIELDS:
            if spec.key not in doc:
                continue
            expr = self.value(spec.kind, doc[spec.key], dtype_refs, arity)
            if spec.kind is FieldKind.PATTERN:
                head = f"BackendPatternConfig({expr})"
            else:
                calls.append(f".{spec.setter}({expr})")
        return [head, *calls]

    def value(self, kind: FieldKind, value: Any, dtype_refs: dict[str, str], arity: int) -> str:
        """The Python expression of one field's exported value."""
        if kind in PATTERN_KINDS:
            return self.pattern(value)
        if kind is FieldKind.OBSERVATION_TYPE:
            return _observation(value)
        if kind is FieldKind.DTYPE_CONFIGS:
            refs = [dtype_refs[r] if isinstance(r, str) else self.dtype_config(r) for r in value]
            return f"[{', '.join(refs)}]"
        if kind in MODULE_KINDS:
            return self.name(value)
        if kind in (FieldKind.FUNCTION, FieldKind.FUSER):
            return self.function(value, arity)
        if kind is FieldKind.OBSERVATION_TYPE_MAP:
            mapping = ", ".join(f"{int(n)}: {_observation(t)}" for n, t in value.items())
            return f"{{{mapping}}}"
        if kind is FieldKind.INDEX_MAP:
            return repr(dict(value))
        raise KeyError(f"the Python emitter does not know field kind {kind}")


def _observation(name: str) -> str:
    return _dotted_code(f"ObservationType.{name.upper()}")


def _dotted_code(dotted: str) -> str:
    """``dotted`` if it is a plain dotted Python name, safe to paste as code; else SpecError.

    Names reach this module from the export document, so they are identifiers for anything the
    resolver accepts; the check keeps a crafted ``__qualname__`` from ever becoming code.
    """
    if all(part.isidentifier() and not keyword.iskeyword(part) for part in dotted.split(".")):
        return dotted
    raise _unnameable(dotted)


def _unnameable(text: str) -> SpecError:
    return SpecError(
        [
            Diagnostic(
                "<export>",
                0,
                0,
                codes.UNNAMEABLE,
                f"{text!r} is not a dotted Python name; it cannot be written as code",
            )
        ]
    )


def module_warnings(
    backend_config: Any, source: str = "a spec", doc: Any = None
) -> list[Diagnostic]:
    """What the module's ``get_backend_config()`` cannot carry, each with where it went:
    a dtype config's version 2 observer options (kept by ``get_qconfig_mapping()``), and
    the pt2e keys (only ``compile --target pt2e`` writes them). A named dtype config is placed
    at its key in ``doc`` (the spec's source) when it is defined there, else at the first
    entry that uses it."""
    from backend_spec.ir.lower import backend_of

    backend = backend_of(backend_config)
    found: list[Diagnostic] = []
    seen: set[Any] = set()
    for entry in backend:
        for dc in entry.dtype_configs:
            if dc in seen:
                continue
            seen.add(dc)
            options = _observer_options(dc)
            if options:
                line, column = _defined_at(doc, dc.name) or (entry.origin.line, 0)
                found.append(_observer_warning(source, line, column, dc.name, options))
    pt2e = sorted(
        {key for e in backend for key, value in e.pt2e_options().items() if value is not None},
        key=PT2E_PATTERN_FIELDS.index,
    )
    pt2e += [key for key in ("graph_inputs", "input_sharing") if _sets(backend, key)]
    if pt2e:
        found.append(
            Diagnostic(
                source,
                0,
                0,
                codes.FX_MODULE_LEAVES_OUT,
                f"the FX module leaves out the pt2e keys {', '.join(pt2e)}: "
                "a BackendConfig has no field for them",
                f"bespec compile {source} --target pt2e -o quantizer.py writes a module whose "
                "get_quantizer() keeps them",
            )
        )
    return found


def _observer_options(dc: Any) -> list[str]:
    """``weight_dtype.granularity: per_channel``... for each observer option ``dc`` sets."""
    return [
        f"{key}.{option}: {str(value).lower() if isinstance(value, bool) else value}"
        for key in DTYPE_CONFIG_MAPPINGS
        for option, value in dc.mapping(key).observer.items()
    ]


def _defined_at(doc: Any, name: str | None) -> tuple[int, int] | None:
    """The position of ``dtype_configs.NAME``'s key in ``doc``, if it is defined there."""
    if doc is None or name is None:
        return None
    return doc.key_positions.get(doc.canonical(("dtype_configs", name)))


def _observer_warning(
    source: str, line: int, column: int, name: str | None, options: list[str]
) -> Diagnostic:
    label = f"dtype config {name!r}" if name else "an inline dtype config"
    return Diagnostic(
        source,
        line,
        column,
        codes.FX_MODULE_LEAVES_OUT,
        f"{label} sets {', '.join(options)}; the module's get_backend_config() leaves "
        f"{'it' if len(options) == 1 else 'them'} out (a BackendConfig has no field for "
        "observer options)",
        "the module's get_qconfig_mapping() keeps them; quantize with prepare_fx(model, "
        "get_qconfig_mapping(), example_inputs, backend_config=get_backend_config()) "
        "(get_qconfig_mapping(qat=True) for prepare_qat_fx)",
    )


def _sets(backend: Any, key: str) -> bool:
    value = getattr(backend, key)
    return value is not None and not (key == "input_sharing" and value == "dtype")


def generate_module(backend_config: Any, source: str = "a spec") -> str:
    """Python source whose ``get_backend_config()`` rebuilds ``backend_config``."""
    from backend_spec import __version__
    from backend_spec.export.document import build_document

    document = build_document(backend_config, source, spec_names=True).to_dict()
    writer = _Writer()
    dtype_refs = {name: f"DTYPE_CONFIGS[{name!r}]" for name in document.get("dtype_configs", {})}
    dtype_lines = [
        f"{_INDENT}{name!r}: {writer.dtype_config(doc)},"
        for name, doc in document.get("dtype_configs", {}).items()
    ]
    body: list[str] = []
    for entry in document["patterns"]:
        head, *calls = writer.entry(entry, dtype_refs)
        body.append(f"{_INDENT * 3}{head}")
        body.extend(f"{_INDENT * 4}{call}" for call in calls)
        body[-1] += ","
    qconfigs = writer.qconfig_pairs(backend_config, qat=False)
    qat_qconfigs = writer.qconfig_pairs(backend_config, qat=True)
    imports = "\n".join(f"import {m}" for m in sorted(writer.imports))
    name = document["name"]
    return _TEMPLATE.format(
        module_doc=_docstring(
            f"BackendConfig {name!r}, generated by bespec {__version__} from {source!r}.\n\n"
            "Do not edit: change the spec and run `bespec compile` again. "
            "Needs only torch at run time.\n\n"
            "prepare_fx(model, get_qconfig_mapping(), example_inputs, "
            "backend_config=get_backend_config()) quantizes as the spec says; the QConfigs "
            "carry what a BackendConfig has no field for (per-channel weights, observers).\n"
        ),
        name=repr(name),
        function_doc=_docstring(f"The {name!r} BackendConfig."),
        imports=imports,
        dtype_configs="\n".join(dtype_lines),
        patterns="\n".join(body),
        qconfigs=qconfigs,
        qat_qconfigs=qat_qconfigs,
        helpers="".join(sorted(writer.helpers)),
    )


def _docstring(text: str) -> str:
    """A docstring holding user text, as a string literal (``repr``), never pasted raw:
    a name containing triple quotes or a backslash must stay text."""
    return repr(text)


_TEMPLATE = """\
{module_doc}

{imports}
from torch.ao.quantization.backend_config import (
    BackendConfig,
    BackendPatternConfig,
    DTypeConfig,
    DTypeWithConstraints,
    ObservationType,
)
from torch.ao.quantization.qconfig import QConfig
from torch.ao.quantization.qconfig_mapping import QConfigMapping

{helpers}

DTYPE_CONFIGS = {{
{dtype_configs}
}}


def get_backend_config() -> BackendConfig:
    {function_doc}
    return BackendConfig({name}).set_backend_pattern_configs(
        [
{patterns}
        ]
    )


def get_qconfig_mapping(qat: bool = False) -> QConfigMapping:
    '''QConfigs that satisfy the backend's dtype configs, its observer options included
    (``qat=True``: their fake-quantize twins, for prepare_qat_fx).'''
    mapping = QConfigMapping()
    for op, qconfig in _qat_qconfigs() if qat else _qconfigs():
        mapping.set_object_type(op, qconfig)
    return mapping


def _qconfigs():
{qconfigs}


def _qat_qconfigs():
{qat_qconfigs}
"""

_LOOKUP = '''

def _lookup(module, path):
    """``path`` inside ``module``, reached through the module itself (not package attributes,
    which a star-import may rebind)."""
    import importlib

    obj = importlib.import_module(module)
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj
'''

_REVERSE_SEQUENTIAL = '''

def _reverse_sequential(sequential):
    """torch 1.13's reverse_sequential_wrapper2: a fuser returning ``sequential(y, x)``."""

    def fuser_method(is_qat, x, y):
        return sequential(y, x)

    return fuser_method
'''

_SEQUENTIAL = '''

def _sequential(fused_module):
    """A fuser returning ``fused_module(*modules)`` (the spec's ``{sequential: ...}``)."""

    def fuser_method(is_qat, *modules):
        return fused_module(*modules)

    fuser_method.sequential = fused_module
    return fuser_method
'''
