"""``bespec compile -o``: a BackendConfig as a standalone, readable Python module.

The module's ``get_backend_config()`` rebuilds the same BackendConfig importing only torch
(and ``operator`` or allowed modules when the spec names them), so a backend can ship without
bespec at run time. It is generated from the export document, so it names objects exactly as
a spec file would and recovers the same named dtype configs.
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
    MODULE_KINDS,
    PATTERN_FIELDS,
    PATTERN_KINDS,
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
    raise SpecError(
        [
            Diagnostic(
                "<export>",
                0,
                0,
                codes.UNNAMEABLE,
                f"{dotted!r} is not a dotted Python name; it cannot be written as code",
            )
        ]
    )


def generate_module(backend_config: Any, source: str = "a spec") -> str:
    """Python source whose ``get_backend_config()`` rebuilds ``backend_config``."""
    from backend_spec import __version__
    from backend_spec.export.document import build_document

    document = build_document(backend_config, source).to_dict()
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
    imports = "\n".join(f"import {m}" for m in sorted(writer.imports))
    name = document["name"]
    return _TEMPLATE.format(
        module_doc=_docstring(
            f"BackendConfig {name!r}, generated by bespec {__version__} from {source!r}.\n\n"
            "Do not edit: change the spec and run `bespec compile` again. "
            "Needs only torch at run time.\n"
        ),
        name=repr(name),
        function_doc=_docstring(f"The {name!r} BackendConfig."),
        imports=imports,
        dtype_configs="\n".join(dtype_lines),
        patterns="\n".join(body),
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
