"""Lowering goldens: which kernel each quantized op reached, frozen in JSON.

A spec edit, or a torch / torchao / ExecuTorch upgrade, that loses an int8 kernel (an op
falling out of the delegate, a pattern inductor stops lowering) is drift, even when the check
still passes. Kept per model: the status, each quantized op's kernel (or ``FAIL``), the ops
left outside, the delegate count and inductor's counters. Timings and SQNR are not kept: they
move with the machine.
"""

from __future__ import annotations

import json
import os
from typing import Any

from backend_spec.check.golden import load_golden_json
from backend_spec.files import write_atomic
from backend_spec.lower.results import LowerReport, ModelResult

KIND = "bespec-lowering"
VERSION = 1


def _entry(model: ModelResult) -> dict[str, Any]:
    return {
        "status": model.status,
        "ops": {op.op: op.kernel if op.ok else "FAIL" for op in model.ops},
        "outside": list(model.outside),
        "delegates": model.delegates,
        "counters": dict(model.counters),
    }


def document(report: LowerReport) -> dict[str, Any]:
    return {
        "kind": KIND,
        "version": VERSION,
        "target": report.target,
        "backend": report.backend,
        "versions": dict(report.versions),
        "models": {model.model: _entry(model) for model in report.models},
    }


def write(report: LowerReport, path: str | os.PathLike[str]) -> None:
    write_atomic(path, json.dumps(document(report), indent=1, sort_keys=True) + "\n")


def read(path: str | os.PathLike[str], target: str) -> dict[str, Any]:
    """A lowering golden of ``target``; ValueError for anything else."""
    golden = load_golden_json(path)
    if not isinstance(golden, dict) or golden.get("kind") != KIND:
        raise ValueError(
            f"{os.fspath(path)}: not a lowering golden (re-create it with --lower "
            f"{target} --update-golden)"
        )
    if golden.get("version") != VERSION or golden.get("target") != target:
        raise ValueError(
            f"{os.fspath(path)}: a lowering golden of version {golden.get('version')!r} for "
            f"{golden.get('target')!r}; this run writes version {VERSION} for {target!r}"
        )
    return golden


def version_note(report: LowerReport, golden: dict[str, Any]) -> str | None:
    """A note when the golden was recorded with other versions (the first suspect of drift)."""
    then = golden.get("versions") if isinstance(golden.get("versions"), dict) else {}
    moved = [
        f"{name} {then[name]} -> {now}"
        for name, now in report.versions.items()
        if name in then and then[name] != now
    ]
    return f"the golden was recorded with other versions: {', '.join(moved)}" if moved else None


def drift(report: LowerReport, golden: dict[str, Any]) -> list[str]:
    """Every difference that matters, naming the model and what moved."""
    recorded = golden.get("models") if isinstance(golden.get("models"), dict) else {}
    found = [
        f"model {name} is in the golden but was not lowered"
        for name in recorded
        if name not in {m.model for m in report.models}
    ]
    for model in report.models:
        then = recorded.get(model.model)
        if not isinstance(then, dict):
            found.append(f"model {model.model} is new (status {model.status}); update the golden")
            continue
        found += [f"model {model.model}: {line}" for line in _entry_drift(_entry(model), then)]
    return found


def _entry_drift(now: dict[str, Any], then: dict[str, Any]) -> list[str]:
    lines = []
    for key in ("status", "delegates"):
        if now[key] != then.get(key):
            lines.append(f"{key} {then.get(key)} -> {now[key]}")
    for key in ("ops", "counters"):
        before = then.get(key) if isinstance(then.get(key), dict) else {}
        for name in sorted(set(before) | set(now[key])):
            old, new = before.get(name, "absent"), now[key].get(name, "absent")
            if old != new:
                lines.append(f"{key[:-1]} {name}: {old} -> {new}")
    before = then.get("outside") if isinstance(then.get("outside"), list) else []
    if sorted(before) != sorted(now["outside"]):
        lines.append(f"outside {sorted(before)} -> {sorted(now['outside'])}")
    return lines
