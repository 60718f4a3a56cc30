"""Readable labels of objects, patterns and pattern configs: one spelling for every message,
table and report (``nn.Conv2d``, ``(nn.Conv2d, nn.ReLU)``), the exporter's names wherever an
object has one.
"""

from __future__ import annotations

from typing import Any

from backend_spec.names.dtypes import dtype_name
from backend_spec.names.naming import op_name

__all__ = ["config_label", "dtype_label", "object_label", "pattern_label", "qualified_name"]


def qualified_name(obj: Any) -> str:
    """``module.qualname`` of an object, for messages about objects without a spec name (no
    memory addresses)."""
    qualname = getattr(obj, "__qualname__", None)
    if qualname is None:
        return repr(obj)
    return f"{getattr(obj, '__module__', '?')}.{qualname}"


def object_label(obj: Any) -> str:
    """A class, function or op as a spec writes it (``nn.Conv2d``, ``F.relu``,
    ``method:view``), else its :func:`qualified_name`; ``""`` for None (an unset field)."""
    if obj is None:
        return ""
    name = op_name(obj)
    return qualified_name(obj) if name is None else name


def pattern_label(pattern: Any) -> str:
    """A pattern as text, in whatever order its tuple is given: ``nn.Linear``,
    ``(nn.Conv2d, nn.ReLU)`` (forward) or ``(nn.ReLU, nn.Conv2d)`` (torch's reversed key)."""
    if isinstance(pattern, tuple):
        return "(" + ", ".join(pattern_label(p) for p in pattern) + ")"
    return object_label(pattern)


def config_label(config: Any) -> str:
    """The pattern of a ``BackendPatternConfig`` as its spec entry writes it (``pattern``, else
    ``pattern_complex_format``, which says so: in torch's reversed nested format it reads like
    a forward pattern)."""
    return patterns_label(config.pattern, config._pattern_complex_format)


def patterns_label(pattern: Any, complex_format: Any) -> str:
    """An entry's ``pattern`` as text, else its ``pattern_complex_format``, which says so
    (for a config, :func:`config_label`; for an entry of the intermediate form, its fields)."""
    if pattern is not None:
        return pattern_label(pattern)
    return f"{pattern_label(complex_format)} (complex format)"


def dtype_label(dtype: Any) -> str:
    """A dtype in a message, as a spec writes it (``quint8``, ``float``); ``none`` for None."""
    return "none" if dtype is None else dtype_name(dtype)
