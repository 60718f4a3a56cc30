"""Presenting the pt2e flow: the rule table's report (``compile --target pt2e``), a
``check --flow pt2e|both`` run, and ``explain --flow pt2e``'s verdicts per ATen node.

Model errors and node names can carry user text, so every line goes through ``escape``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from backend_spec.cli.render.console import escape
from backend_spec.pt2e.check import FlowReport


def compile_lines(report: Any) -> list[str]:
    """The rule table's summary, then each entry skipped or in conflict."""
    lines = [f"pt2e: {report.summary()}"]
    lines += [f"  skipped {label}: {reason}" for label, reason in report.skipped]
    lines += [
        f"  conflict {label} with {first} on {chain}" for label, first, chain in report.conflicts
    ]
    return [escape(line) for line in lines]


def flow_text(report: FlowReport, *, verbose: bool = False) -> str:
    """One line per model (with FX's reason when it has one; torch's message with
    ``verbose``), then how many were ok."""
    lines = [f"pt2e quantizer: {report.summary}"]
    for row in report.rows:
        lines.append(_row_line(row, report.flow))
        if row.get("fx_reason") and "error" not in row:
            lines.append(f"     FX: {row['fx_reason']}")
        if verbose and row.get("fx_detail"):
            lines.append(f"     torch: {row['fx_detail']}")
    lines.append(f"{len(report.rows) - report.failed} of {len(report.rows)} models ok")
    return "\n".join(escape(line) for line in lines) + "\n"


def flow_json(report: FlowReport) -> str:
    document = {
        "flow": report.flow,
        "qat": report.qat,
        "models": report.rows,
        "failed": report.failed,
    }
    return json.dumps(document, indent=2) + "\n"


def _row_line(row: dict[str, Any], flow: str) -> str:
    if "error" in row:
        return f"FAIL {row['model']}: {row['error']}"
    if flow == "pt2e":
        return (
            f"ok   {row['model']}: pt2e {_db(row['pt2e_db'])} vs float, "
            f"{row['quantize_ops']} quantize ops"
        )
    verdict = "same" if row["identical"] else ", ".join(row["classes"]) or "UNEXPLAINED"
    return (
        f"{'ok  ' if row['ok'] else 'FAIL'} {row['model']}: FX {_db(row['fx_db'])}, "
        f"pt2e {_db(row['pt2e_db'])}, between {_db(row['between_db'])}, quantize ops "
        f"{row['quantize_ops'][0]}/{row['quantize_ops'][1]}: {verdict}"
    )


def _db(value: float | None) -> str:
    return "exact" if value is None else f"{value:.1f} dB"


def verdicts_text(verdicts: Iterable[Any]) -> str:
    """Per ATen node: the rule that annotated it, or why none did."""
    lines = []
    for verdict in verdicts:
        head = f"{verdict.node} ({verdict.target})"
        rule = verdict.rule if verdict.rule is not None else "not annotated"
        lines.append(escape(f"{head}: {rule}: {verdict.reason}"))
    return "".join(f"{line}\n" for line in lines)


def verdicts_json(verdicts: Iterable[Any]) -> str:
    return json.dumps([vars(v) for v in verdicts], indent=2) + "\n"
