"""Stage 2 runner: plain data -> :class:`SpecModel`, or diagnostics at the right line and column.

pydantic reports errors by location tuple; this module maps each to the source position kept
by :mod:`backend_spec.spec.source`, gives it a stable code, and adds a "did you mean" hint.
"""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel, ValidationError

from backend_spec import codes
from backend_spec.diagnostics import Diagnostic, format_key_path
from backend_spec.spec.models import (
    OBSERVATION_TYPES,
    DTypeConfigModel,
    DTypeWithConstraintsModel,
    PatternModel,
    SequentialFuser,
    SpecModel,
)
from backend_spec.spec.source import KeyPath, SourceDoc

_DTYPE_KEYS = ("input_dtype", "output_dtype", "weight_dtype", "bias_dtype")
_TYPE_NAMES = {
    "string_type": "a string",
    "int_type": "an integer",
    "bool_type": "true or false",
    "float_type": "a number",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "int_parsing": "an integer",
    "union_tag_invalid": "a supported value",
}


def validate(doc: SourceDoc) -> tuple[SpecModel | None, list[Diagnostic]]:
    """Validate parsed data; ``x-`` top-level keys are set aside first (homes for anchors)."""
    data = doc.data
    if not isinstance(data, dict):
        what = "empty" if data is None else f"a {type(data).__name__}"
        return None, [
            doc.diagnostic(
                (),
                codes.NOT_A_MAPPING,
                f"a spec must be a mapping, this one is {what}",
                "start with 'name: my_backend'",
            )
        ]
    data = {k: v for k, v in data.items() if not (isinstance(k, str) and k.startswith("x-"))}
    bad_keys = [k for k in data if not isinstance(k, str)]
    if bad_keys:
        return None, [
            doc.diagnostic((k,), codes.UNKNOWN_KEY, f"unknown key {k!r}", at_key=True)
            for k in bad_keys
        ]
    try:
        return SpecModel.model_validate(data), []
    except ValidationError as exc:
        return None, _dedupe([_diagnostic(doc, data, err) for err in exc.errors()])
    except RecursionError:
        return None, [doc.diagnostic((), codes.TOO_DEEP, "nesting too deep")]


def _dedupe(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    seen: set[tuple[int, int, str, str]] = set()
    out = []
    for d in diagnostics:
        key = (d.line, d.column, d.code, d.message)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def data_path(data: Any, loc: tuple[Any, ...]) -> KeyPath:
    """Drop the union tags pydantic puts in locations, keeping real keys and indices."""
    path: list[str | int] = []
    node = data
    for i, part in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(node, dict) and str(part) in node and part not in node:
            part = str(part)  # TOML table keys are strings where the model wants ints
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        elif part in _TAGS and (not isinstance(node, dict) or not last):
            continue  # a union tag, not a key of the data
        else:
            node = None
        path.append(part)
    return tuple(path)


_TAGS = {"name", "constrained", "inline", "sequential", "sequence", "[key]"}


def _value_at(data: Any, path: KeyPath) -> Any:
    node = data
    for part in path:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return None
    return node


def model_at(path: KeyPath) -> type[BaseModel]:
    """The model that validates the mapping at ``path`` (for listing its allowed keys)."""
    if not path:
        return SpecModel
    last = path[-1]
    if last in _DTYPE_KEYS:
        return DTypeWithConstraintsModel
    if last == "fuser_method":
        return SequentialFuser
    if len(path) >= 2 and path[-2] == "patterns" and isinstance(last, int):
        return PatternModel
    if len(path) >= 2 and path[-2] == "dtype_configs":
        return DTypeConfigModel
    return SpecModel


def _diagnostic(doc: SourceDoc, data: Any, err: Any) -> Diagnostic:
    kind = err["type"]
    path = data_path(data, err["loc"])
    where = format_key_path(path) or "the spec"
    ctx = err.get("ctx") or {}
    if kind == "extra_forbidden":
        key = path[-1]
        allowed = list(model_at(path[:-1]).model_fields)
        match = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.5)
        hint = f"did you mean '{match[0]}'?" if match else "allowed keys: " + ", ".join(allowed)
        return doc.diagnostic(path, codes.UNKNOWN_KEY, f"unknown key '{key}'", hint, at_key=True)
    if kind == "missing":
        return doc.diagnostic(
            path[:-1],
            codes.MISSING_KEY,
            f"missing required key '{path[-1]}'",
            "add it",
            at_key=True,
        )
    if kind.startswith("BS"):
        return doc.diagnostic(path, kind, err["msg"], _custom_hint(kind, ctx))
    value = _value_at(data, path)
    if kind == "literal_error" and path == ("spec_version",):
        return doc.diagnostic(
            path,
            codes.SPEC_VERSION,
            f"unsupported spec_version {value!r}",
            "this bespec reads version 1",
        )
    if kind in ("too_short", "too_long"):
        return doc.diagnostic(
            path,
            codes.PATTERN_LENGTH,
            f"{where} has {ctx.get('actual_length')} items; a pattern list has 2 or 3 ops",
            "write a single op as a plain name; longer chains need pattern_complex_format",
        )
    if kind in _TYPE_NAMES:
        expected = _TYPE_NAMES[kind]
        return doc.diagnostic(
            path,
            codes.WRONG_TYPE,
            f"{where} must be {expected}, got {_show(value)}",
            _type_hint(path),
        )
    return doc.diagnostic(path, codes.INVALID_VALUE, f"{where}: {err['msg']}")


def _show(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_hint(path: KeyPath) -> str:
    if path and path[-1] in _DTYPE_KEYS:
        return "write a dtype name such as quint8, or a mapping {dtype: quint8, ...}"
    if "fuser_method" in path:
        return "write a function name, or {sequential: FusedModuleClass}"
    return ""


def _custom_hint(code: str, ctx: dict[str, Any]) -> str:
    if code == codes.UNKNOWN_DTYPE:
        from backend_spec.names.dtypes import dtype_names

        match = difflib.get_close_matches(str(ctx.get("value")), sorted(dtype_names()), n=2)
        return ("did you mean " + " or ".join(f"'{m}'" for m in match) + "?") if match else ""
    if code == codes.UNKNOWN_OBSERVATION_TYPE:
        match = difflib.get_close_matches(str(ctx.get("value")).lower(), OBSERVATION_TYPES, n=1)
        return f"did you mean '{match[0]}'?" if match else "one of " + ", ".join(OBSERVATION_TYPES)
    if code == codes.ONE_PATTERN_FORM:
        return "keep 'pattern' (forward order) unless you need the legacy nested format"
    if code == codes.OUT_OF_RANGE:
        return "keep bounds inside the dtype's representable range"
    return ""
