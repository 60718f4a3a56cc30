"""Golden files: the check's outcome frozen in JSON, and the drift of a new run against it.

A golden keeps what should not change silently when torch, the spec or bespec changes: each
pattern's status, each model's node -> quantized-kind mapping and statuses, and SQNR figures
(compared with a tolerance, since they move a little across torch builds and CPUs). Timings are
not kept: they are not reproducible.
"""

from __future__ import annotations

import json
import os
from typing import Any

from backend_spec.check.results import CheckReport
from backend_spec.files import write_atomic

GOLDEN_VERSION = 1

#: Default SQNR tolerance (dB) of a golden comparison.
DEFAULT_TOLERANCE_DB = 3.0


def golden_from_report(report: CheckReport, tolerance_db: float = DEFAULT_TOLERANCE_DB) -> dict:
    return {
        "version": GOLDEN_VERSION,
        "backend": report.backend,
        "engine": report.engine,
        "tolerance_db": tolerance_db,
        "patterns": {
            r.pattern: {"status": r.status, "sqnr_db": r.sqnr_db} for r in report.patterns
        },
        "models": {
            m.name: {"status": m.status, "sqnr_db": m.sqnr_db, "quantized": dict(m.quantized)}
            for m in report.models
        },
    }


def write_golden(
    report: CheckReport, path: str | os.PathLike[str], tolerance_db: float = DEFAULT_TOLERANCE_DB
) -> None:
    """Write ``report`` as a golden file (atomically, so CI never reads half a file)."""
    text = json.dumps(golden_from_report(report, tolerance_db), indent=2, sort_keys=True) + "\n"
    write_atomic(path, text)


def read_golden(path: str | os.PathLike[str]) -> dict:
    with open(path, encoding="utf-8") as handle:
        golden = json.load(handle)
    if golden.get("version") != GOLDEN_VERSION:
        raise ValueError(f"{path}: unsupported golden version {golden.get('version')!r}")
    return golden


def compare_to_golden(
    report: CheckReport, golden: dict, tolerance_db: float | None = None
) -> list[str]:
    """Every difference between ``report`` and ``golden`` that matters, as messages.

    SQNR drifts count when they move more than the tolerance either way: a jump up also means
    the quantization changed.
    """
    tolerance = golden.get("tolerance_db", DEFAULT_TOLERANCE_DB)
    tolerance = tolerance if tolerance_db is None else tolerance_db
    drift: list[str] = []
    if golden.get("engine") not in (None, report.engine):
        drift.append(
            f"golden was recorded on engine {golden['engine']}, this run used {report.engine}"
        )
    current = {r.pattern: {"status": r.status, "sqnr_db": r.sqnr_db} for r in report.patterns}
    drift += _compare_entries("pattern", current, golden.get("patterns", {}), tolerance)
    models = {
        m.name: {"status": m.status, "sqnr_db": m.sqnr_db, "quantized": m.quantized}
        for m in report.models
    }
    drift += _compare_entries("model", models, golden.get("models", {}), tolerance)
    for name in sorted(set(models) & set(golden.get("models", {}))):
        drift += _compare_quantized(
            name, models[name]["quantized"], golden["models"][name].get("quantized", {})
        )
    return drift


def _compare_entries(
    what: str, current: dict[str, dict], golden: dict[str, dict], tolerance: float
) -> list[str]:
    drift = []
    for name in golden:
        if name not in current:
            drift.append(f"{what} {name} is in the golden but was not checked")
    for name, now in current.items():
        then = golden.get(name)
        if then is None:
            drift.append(f"{what} {name} is new (status {now['status']}); update the golden")
            continue
        if now["status"] != then.get("status"):
            drift.append(f"{what} {name}: status {then.get('status')} -> {now['status']}")
        message = _sqnr_drift(then.get("sqnr_db"), now["sqnr_db"], tolerance)
        if message:
            drift.append(f"{what} {name}: {message}")
    return drift


def _sqnr_drift(then: Any, now: Any, tolerance: float) -> str:
    if then is None and now is None:
        return ""
    if then is None or now is None:
        return f"SQNR {then} -> {now}"
    if abs(now - then) > tolerance:
        direction = "dropped" if now < then else "rose"
        return f"SQNR {direction} from {then:.1f} to {now:.1f} dB (tolerance {tolerance:g} dB)"
    return ""


def _compare_quantized(model: str, now: dict[str, str], then: dict[str, str]) -> list[str]:
    drift = []
    for node in sorted(set(now) | set(then)):
        before, after = then.get(node, "absent"), now.get(node, "absent")
        if before != after:
            drift.append(f"model {model}: node {node} {before} -> {after}")
    return drift
