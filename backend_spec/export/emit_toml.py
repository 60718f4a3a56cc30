"""Export stage 4 (TOML): a small, strict TOML writer for spec documents.

tomli-w is not a dependency, and spec documents need only a sliver of TOML: root key/value
pairs, ``[dtype_configs.NAME]`` tables, ``[[patterns]]`` arrays of tables, and inline arrays
and tables inside them. Strings are TOML basic strings with every required escape; floats
use ``repr`` so that they read back exactly.
"""

from __future__ import annotations

import math
import re
from typing import Any

from backend_spec.export.document import SpecDocument
from backend_spec.specfile.schema import SCHEMA_NAME, schema_comment

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")

_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def toml_string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped."""
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def toml_key(key: Any) -> str:
    """A bare key when TOML allows one (``0``, ``weight``), else a quoted key."""
    text = str(key)
    return text if _BARE_KEY.fullmatch(text) else toml_string(text)


def toml_float(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(value)


def toml_value(value: Any) -> str:
    """An inline TOML value (nested mappings become inline tables)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return toml_float(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        items = ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items())
        return "{ " + items + " }" if items else "{}"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def _table(header: str, body: dict[str, Any]) -> list[str]:
    return ["", header, *(f"{toml_key(k)} = {toml_value(v)}" for k, v in body.items())]


def emit_toml(doc: SpecDocument, schema_ref: str = SCHEMA_NAME) -> str:
    """The TOML text of a spec document; its first line (taplo's schema directive) points
    editors at ``schema_ref``."""
    lines = [
        schema_comment("toml", schema_ref),
        f"spec_version = {doc.spec_version}",
        f"name = {toml_string(doc.name)}",
    ]
    if doc.extends is not None:
        lines.append(f"extends = {toml_string(doc.extends)}")
    if doc.remove:
        lines.append("remove = [")
        lines += [f"    {toml_value(item)}," for item in doc.remove]
        lines.append("]")
    if doc.graph_inputs is not None:
        lines.append(f"graph_inputs = {toml_string(doc.graph_inputs)}")
    if doc.input_sharing is not None:
        lines.append(f"input_sharing = {toml_string(doc.input_sharing)}")
    if doc.transform_for_annotation:
        lines.append("transform_for_annotation = [")
        lines += [f"    {toml_value(item)}," for item in doc.transform_for_annotation]
        lines.append("]")
    if not doc.patterns:
        lines.append("patterns = []")
    for name, dtype_config in doc.dtype_configs.items():
        lines += _table(f"[dtype_configs.{toml_key(name)}]", dtype_config)
    for entry in doc.patterns:
        lines += _table("[[patterns]]", entry)
    return "\n".join(lines) + "\n"
