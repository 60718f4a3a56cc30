"""``bespec diff A B``: what changed between two backends (spec files or built-in names).

The comparison itself is :func:`backend_spec.analysis.compare.diff` (canonical descriptions,
identity of classes and functions, sequential fusers by the class they build); this module only
lays the differences out for people (grouped by pattern) and for tools (JSON).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from backend_spec.analysis.compare import Difference, diff

__all__ = ["diff_configs", "render_json", "render_text"]


def diff_configs(old: Any, new: Any) -> list[Difference]:
    """Every difference between backends ``old`` and ``new``, patterns labelled in the forward
    order a spec uses."""
    labels = {**_forward_labels(old), **_forward_labels(new)}
    return [replace(d, pattern=labels.get(d.pattern, d.pattern)) for d in diff(old, new)]


def _forward_labels(backend_config: Any) -> dict[str, str]:
    """compare's pattern labels (torch's reversed key order) -> the forward order a spec uses."""
    from backend_spec.build.compiler import pattern_key
    from backend_spec.names.labels import config_label, pattern_label

    return {pattern_label(pattern_key(c)): config_label(c) for c in backend_config.configs}


def _plain(value: Any) -> Any:
    """A description value as JSON data (classes and functions by their spec names)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def render_json(differences: list[Difference]) -> str:
    items = [
        {
            "kind": d.kind,
            "pattern": d.pattern,
            "field": d.field,
            "old": _plain(d.old),
            "new": _plain(d.new),
        }
        for d in differences
    ]
    return json.dumps({"identical": not differences, "differences": items}, indent=2) + "\n"


def render_text(differences: list[Difference], a: str, b: str) -> str:
    """Removed and added patterns, then changed fields grouped under their pattern."""
    if not differences:
        return f"{a} and {b} are identical\n"
    lines = [f"--- {a}", f"+++ {b}"]
    for d in differences:
        if d.kind in ("removed", "added") or not d.pattern:
            lines.append(str(d))
    changed: dict[str, list[Difference]] = {}
    for d in differences:
        if d.kind == "changed" and d.pattern:
            changed.setdefault(d.pattern, []).append(d)
    for pattern, items in changed.items():
        lines.append(f"~ {pattern}")
        lines.extend(f"    {d.field}: {d.old!r} -> {d.new!r}" for d in items)
    counts = {k: sum(1 for d in differences if d.kind == k) for k in ("added", "removed")}
    lines.append(
        f"{counts['added']} added, {counts['removed']} removed, {len(changed)} changed pattern(s)"
    )
    return "\n".join(lines) + "\n"
