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
from backend_spec.cli.render.console import plural

__all__ = ["behaviour_json", "behaviour_text", "diff_configs", "render_json", "render_text"]


def diff_configs(old: Any, new: Any) -> list[Difference]:
    """Every difference between backends ``old`` and ``new``, patterns labelled in the forward
    order a spec uses."""
    labels = {**_forward_labels(old), **_forward_labels(new)}
    return [replace(d, pattern=labels.get(d.pattern, d.pattern)) for d in diff(old, new)]


def _forward_labels(backend_config: Any) -> dict[str, str]:
    """compare's pattern labels (torch's reversed key order) -> the forward order a spec uses."""
    from backend_spec.compiler.compiler import pattern_key
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
        if d.kind in ("removed", "added") or d.kind == "reordered":
            lines.append(str(d))
        elif not d.pattern:
            lines += [line[4:] for line in _change_lines(f"~ {d.field}", d.old, d.new)]
    changed: dict[str, list[Difference]] = {}
    for d in differences:
        if d.kind == "changed" and d.pattern:
            changed.setdefault(d.pattern, []).append(d)
    for pattern, items in changed.items():
        lines.append(f"~ {pattern}")
        for d in items:
            lines += _change_lines(d.field, d.old, d.new)
    counts = {k: sum(1 for d in differences if d.kind == k) for k in ("added", "removed")}
    lines.append(
        f"{counts['added']} added, {counts['removed']} removed, "
        f"{plural(len(changed), 'changed pattern')}"
    )
    return "\n".join(lines) + "\n"


#: A change whose two values are longer than this together is shown on several lines.
_ONE_LINE = 60

#: A mapping longer than this is shown one key per line.
_LONG_MAPPING = 72


def _change_lines(field: str, old: Any, new: Any) -> list[str]:
    """``field: old -> new``, or for long values ``field:`` then ``- old`` and ``+ new`` lines
    (a list item by item, a long mapping key by key)."""
    if len(spec_text(old)) + len(spec_text(new)) <= _ONE_LINE:
        return [f"    {field}: {spec_text(old)} -> {spec_text(new)}"]
    return [f"    {field}:", *_value_lines(old, "-"), *_value_lines(new, "+")]


def _value_lines(value: Any, sign: str) -> list[str]:
    items = value if isinstance(value, list) and value else [value]
    out = []
    for item in items:
        lines = _mapping_lines(item, "")
        out += [f"      {sign} {lines[0]}", *(f"        {line}" for line in lines[1:])]
    return out


def _mapping_lines(value: Any, indent: str) -> list[str]:
    """A value in spec syntax; a long mapping one key per line (block style), recursively."""
    text = spec_text(value)
    if not isinstance(value, dict) or len(indent) + len(text) <= _LONG_MAPPING:
        return [text]
    lines = []
    for key, item in value.items():
        if item is None:
            continue
        inner = _mapping_lines(item, indent + "  ")
        if len(inner) == 1:
            lines.append(f"{indent}{key}: {inner[0]}")
        else:
            lines += [f"{indent}{key}:", *inner]
    return lines


def spec_text(value: Any) -> str:
    """A description value as a spec writes it (YAML flow style): names bare, ``unset`` for
    an absent value, dtype mappings without their unset constraints, a dtype mapping with
    only ``dtype`` as the bare dtype."""
    if value is None:
        return "unset"
    if isinstance(value, dict):
        items = {k: v for k, v in value.items() if v is not None}
        if list(items) == ["dtype"]:
            return spec_text(items["dtype"])
        return "{" + ", ".join(f"{k}: {spec_text(v)}" for k, v in items.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(spec_text(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, (int, float, str)) else repr(value)


#: Lines shown per differing op in the text report (JSON has them all).
_LINES_PER_OP = 4


def behaviour_text(result: Any, a: str, b: str) -> str:
    """``diff --behaviour``: "quantize identically" with what was run, or each differing op
    (flow and op, then a few ``model: node: A vs B`` lines)."""
    ran = _ran(result)
    if result.identical:
        lines = [f"{a} and {b} quantize identically ({ran})"]
    else:
        # Per flow, the ops with the most differing nodes first: the changed entry's op
        # before the neighbours whose inputs merely moved with it.
        ops = sorted(
            result.differences,
            key=lambda key: (result.flows.index(key[0]), -len(result.differences[key]), key[1]),
        )
        lines = [f"{a} and {b} quantize differently on {plural(len(ops), 'op')} ({ran}):"]
        for flow, op in ops:
            found = result.differences[flow, op]
            lines.append(f"  {flow} {op}")
            lines += [f"    {line}" for line in found[:_LINES_PER_OP]]
            if len(found) > _LINES_PER_OP:
                lines.append(f"    ... and {len(found) - _LINES_PER_OP} more")
    return "\n".join(lines) + "\n"


def _ran(result: Any) -> str:
    parts = []
    if "pt2e" in result.flows:
        parts.append(
            f"pt2e: {plural(result.pt2e_models, 'model')} and {plural(result.pt2e_probes, 'probe')}"
        )
    if "fx" in result.flows:
        parts.append(f"FX: {plural(result.fx_models, 'model')}")
    return "; ".join(parts) + "; placement, qparams, outputs"


def behaviour_json(result: Any) -> str:
    """``diff --behaviour --format json``: the verdict, the flows run and every difference."""
    return json.dumps(
        {
            "identical": result.identical,
            "flows": list(result.flows),
            "ran": {
                "pt2e_models": result.pt2e_models,
                "pt2e_probes": result.pt2e_probes,
                "fx_models": result.fx_models,
            },
            "differences": [
                {"flow": flow, "op": op, "nodes": lines}
                for (flow, op), lines in result.differences.items()
            ],
        },
        indent=2,
    )
