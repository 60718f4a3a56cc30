"""Readable names of patterns and objects for lint messages (the exporter's spelling)."""

from __future__ import annotations

from typing import Any

from backend_spec.lint.context import PatternEntry


def name_of(obj: Any) -> str:
    """A class or function as a spec writes it (``nn.Conv2d``)."""
    from backend_spec.analysis.compare import label

    return label(obj)


def entry_label(entry: PatternEntry) -> str:
    """The pattern of an entry as a spec writes it: ``nn.Linear`` or ``(nn.Conv2d, nn.ReLU)``."""
    from backend_spec.analysis.compare import pattern_key_label
    from backend_spec.export.document import pattern_label

    if entry.ops is not None:
        return pattern_label(entry.ops[0] if len(entry.ops) == 1 else entry.ops)
    return pattern_key_label(entry.key) if entry.key is not None else "?"
