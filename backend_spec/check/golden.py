"""Golden files: the check's outcome frozen in JSON, and the drift of a new run against it.

A golden keeps, per case and per model, what should not change silently when torch, the spec
or bespec changes: the status, the quantization kind, the exact behaviour signature (observers
and their sharing, the prepared, reference and lowered graphs; see
:mod:`backend_spec.check.signature`) and the SQNR, compared with a tolerance since it moves a
little across torch builds and CPUs. Timings are not kept: they are not reproducible.

A run *matches* its golden when nothing drifted, known failures included: CI gates on
"still behaves as recorded", and a spec whose only failures are torch's own passes.
"""

from __future__ import annotations

import json
import os
from typing import Any

from backend_spec.check.results import CheckReport
from backend_spec.check.signature import first_difference
from backend_spec.files import write_atomic

#: Version 2: cases (pattern × DTypeConfig × ptq/qat, fusions) with behaviour signatures.
GOLDEN_VERSION = 2

#: Default SQNR tolerance (dB) of a golden comparison.
DEFAULT_TOLERANCE_DB = 3.0


def _case_entries(report: CheckReport) -> dict[str, dict]:
    return {
        r.key: {
            "status": r.status,
            "kind": r.kind,
            "reason": r.reason,
            "sqnr_db": r.sqnr_db,
            "signature": r.signature,
        }
        for r in report.patterns
    }


def _model_entries(report: CheckReport) -> dict[str, dict]:
    return {
        m.name: {
            "status": m.status,
            "sqnr_db": m.sqnr_db,
            "quantized": dict(m.quantized),
            "signature": m.signature,
        }
        for m in report.models
    }


def golden_from_report(report: CheckReport, tolerance_db: float = DEFAULT_TOLERANCE_DB) -> dict:
    """The golden document of ``report``, with the torch version it was made with."""
    from backend_spec._torch import torch

    return {
        "version": GOLDEN_VERSION,
        "torch": str(torch.__version__),
        "backend": report.backend,
        "engine": report.engine,
        "tolerance_db": tolerance_db,
        "cases": _case_entries(report),
        "models": _model_entries(report),
    }


def write_golden(
    report: CheckReport, path: str | os.PathLike[str], tolerance_db: float = DEFAULT_TOLERANCE_DB
) -> None:
    """Write ``report`` as a golden file (atomically, so CI never reads half a file)."""
    document = golden_from_report(report, tolerance_db)
    write_atomic(path, json.dumps(document, indent=1, sort_keys=True) + "\n")


def load_golden_json(path: str | os.PathLike[str]) -> Any:
    """The JSON of a golden file (of the check or of lowering); ValueError, one line, for a
    file that cannot be read or parsed."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{os.fspath(path)}: not a readable golden file: {exc}") from None


def read_golden(path: str | os.PathLike[str]) -> dict:
    """A golden file's content; ValueError for unreadable files and other versions."""
    golden = load_golden_json(path)
    if not isinstance(golden, dict) or golden.get("version") != GOLDEN_VERSION:
        found = golden.get("version") if isinstance(golden, dict) else None
        raise ValueError(
            f"{os.fspath(path)}: golden version {found!r}, this bespec writes "
            f"{GOLDEN_VERSION}; re-create it with --update-golden"
        )
    return golden


def torch_note(golden: dict) -> str | None:
    """A note when ``golden`` was recorded with another torch than the running one: not drift
    (the comparison still decides), but the first thing to suspect when something moved."""
    from backend_spec._torch import torch

    recorded = golden.get("torch")
    if not isinstance(recorded, str) or recorded == str(torch.__version__):
        return None
    return f"the golden was recorded with torch {recorded}; this run uses torch {torch.__version__}"


def known_failures(golden: dict) -> int:
    """How many cases and models the golden records as failing."""
    entries = [*golden.get("cases", {}).values(), *golden.get("models", {}).values()]
    return sum(1 for entry in entries if entry.get("status") == "fail")


def compare_to_golden(
    report: CheckReport, golden: dict, tolerance_db: float | None = None
) -> list[str]:
    """Every difference between ``report`` and ``golden`` that matters, as messages naming the
    case (pattern and DTypeConfig) and the field that moved.

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
    drift += _compare("case", _case_entries(report), golden.get("cases", {}), tolerance)
    drift += _compare("model", _model_entries(report), golden.get("models", {}), tolerance)
    return drift


def _compare(
    what: str, current: dict[str, dict], golden: dict[str, Any], tolerance: float
) -> list[str]:
    drift = []
    for name in golden:
        if name not in current:
            drift.append(f"{what} {name} is in the golden but was not checked")
    for name, now in current.items():
        then = golden.get(name)
        if not isinstance(then, dict):
            drift.append(f"{what} {name} is new (status {now['status']}); update the golden")
            continue
        drift += [f"{what} {name}: {message}" for message in _entry_drift(now, then, tolerance)]
    return drift


def _entry_drift(now: dict, then: dict, tolerance: float) -> list[str]:
    messages = []
    if now["status"] != then.get("status"):
        messages.append(f"status {then.get('status')} -> {now['status']}")
    if "kind" in now and now["kind"] != then.get("kind"):
        messages.append(f"kind {then.get('kind')} -> {now['kind']}")
    messages += _mapping_drift("node", now.get("quantized", {}), then.get("quantized", {}))
    messages += _signature_drift(now.get("signature", {}), then.get("signature", {}))
    message = _sqnr_drift(then.get("sqnr_db"), now["sqnr_db"], tolerance)
    if message:
        messages.append(message)
    return messages


def _signature_drift(now: dict, then: Any) -> list[str]:
    then = then if isinstance(then, dict) else {}
    messages = []
    for section in sorted(set(now) | set(then)):
        before, after = then.get(section), now.get(section)
        if before == after:
            continue
        if before is None or after is None:
            state = "appeared" if before is None else "disappeared"
            messages.append(f"{section} {state}")
            continue
        messages.append(f"{section} changed: {first_difference(list(before), list(after))}")
    return messages


def _mapping_drift(what: str, now: dict[str, str], then: Any) -> list[str]:
    then = then if isinstance(then, dict) else {}
    drift = []
    for key in sorted(set(now) | set(then)):
        before, after = then.get(key, "absent"), now.get(key, "absent")
        if before != after:
            drift.append(f"{what} {key} {before} -> {after}")
    return drift


def _sqnr_drift(then: Any, now: Any, tolerance: float) -> str:
    if then is None and now is None:
        return ""
    if not isinstance(then, (int, float)) or now is None:
        return f"SQNR {then} -> {now}"
    if abs(now - then) > tolerance:
        direction = "dropped" if now < then else "rose"
        return f"SQNR {direction} from {then:.1f} to {now:.1f} dB (tolerance {tolerance:g} dB)"
    return ""
