"""Presenting ``check --lower`` and ``explain --lower``: per model, the quantized ops that did
not reach an int8 kernel (each with its spec entry, line and reason), what stayed outside, the
lowered outputs against the converted model and int8 against fp32 latency; then a summary.

Model names, node names, spec paths and backend messages can carry user text: every line goes
through ``escape``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

from backend_spec.cli.render.console import escape
from backend_spec.lower.results import MIN_SQNR_DB, LowerReport, ModelResult

#: Ops listed as left outside before "and N more".
_OUTSIDE_SHOWN = 6


def report_text(report: LowerReport, drift: list[str] | None = None, verbose: bool = False) -> str:
    lines = [f"lowering {report.backend} to {report.target} ({_versions(report.versions)})"]
    for model in report.models:
        lines += _model_lines(model, verbose)
    if drift:
        lines.append(f"drift from the golden ({len(drift)}):")
        lines += [f"  {line}" for line in drift]
    lines.append(summary(report))
    return "".join(f"{escape(line)}\n" for line in lines)


def summary(report: LowerReport) -> str:
    ops = [op for model in report.models for op in model.ops]
    int8 = sum(op.ok for op in ops)
    ratios = [m.latency_ratio for m in report.models if m.latency_ratio is not None]
    timing = ""
    if ratios:
        ratios.sort()
        timing = f"; median int8/fp32 latency {ratios[len(ratios) // 2]:.2f}x"
    return (
        f"{int8} of {len(ops)} quantized ops reach int8 kernels; "
        f"{len(report.models) - report.failed} of {len(report.models)} models ok{timing}"
    )


def _model_lines(model: ModelResult, verbose: bool) -> list[str]:
    head = f"{model.status.upper():4} {model.model}: "
    if model.skipped:
        return [head + model.skipped]
    facts = [f"{sum(op.ok for op in model.ops)}/{len(model.ops)} ops int8"]
    if model.target == "xnnpack":
        facts.append(f"{model.delegates} delegate{'s' if model.delegates != 1 else ''}")
    if model.error:
        facts.append("crashed")
    else:
        facts.append(_agreement(model))
    if model.latency_ratio is not None:
        facts.append(
            f"int8/fp32 {model.latency_ratio:.2f}x ({model.int8_us:.0f}/{model.fp32_us:.0f} µs)"
        )
    lines = [head + ", ".join(facts)]
    if model.error:
        lines.append(f"  lowering crashed: {model.error}")
        if model.error_reason:
            lines.append(f"    reason: {model.error_reason}")
    for op in model.ops:
        if not op.ok or verbose:
            where = f"{op.entry} at {_where(op.origin)}" if op.origin else op.entry
            verdict = f"int8 ({op.kernel})" if op.ok else f"NOT int8: {op.reason}"
            lines.append(f"  {op.op} [{where}]: {verdict}")
    if model.diverged:
        lines.append(
            f"  outputs diverge: {model.sqnr_db:.1f} dB against the converted model "
            f"(at least {MIN_SQNR_DB:.0f} dB expected)"
        )
        if model.host_note:
            lines.append(f"    not failed, a limit of this host: {model.host_note}")
    if model.outside and (verbose or not model.ok):
        shown = model.outside[:_OUTSIDE_SHOWN]
        more = len(model.outside) - len(shown)
        lines.append(
            "  left outside / in float: " + ", ".join(shown) + (f" and {more} more" if more else "")
        )
    if verbose and model.counters:
        lines.append("  " + ", ".join(f"{k} {v}" for k, v in model.counters.items() if v))
    return lines


def _where(origin: str) -> str:
    """``file:line`` relative to the working directory when the file is under it (workers
    load specs by absolute path)."""
    path, _, line = origin.rpartition(":")
    if not path or not os.path.isabs(path):
        return origin
    relative = os.path.relpath(path)
    return f"{relative if not relative.startswith('..') else path}:{line}"


def _agreement(model: ModelResult) -> str:
    if model.max_abs is None:
        return "not run"
    db = "identical" if model.sqnr_db is None else f"{model.sqnr_db:.1f} dB"
    return f"vs converted {db}, max abs {model.max_abs:.3g}"


def _versions(versions: dict[str, str]) -> str:
    return ", ".join(f"{name} {version}" for name, version in versions.items())


def report_json(report: LowerReport, drift: list[str] | None = None) -> str:
    document = {
        "target": report.target,
        "backend": report.backend,
        "versions": report.versions,
        "failed": report.failed,
        "models": [model_json(model) for model in report.models],
        "drift": drift or [],
    }
    return json.dumps(document, indent=2) + "\n"


def model_json(model: ModelResult) -> dict[str, Any]:
    data = {key: value for key, value in vars(model).items() if key != "ops"}
    data["ops"] = [vars(op) | {"targets": list(op.targets)} for op in model.ops]
    data["status"] = model.status
    data["latency_ratio"] = model.latency_ratio
    return data


def golden_line(report: LowerReport, path: Any, *, written: bool) -> str:
    if written:
        return escape(f"wrote {path} ({len(report.models)} models)")
    return escape(f"matches golden {path}")


def explain_text(model: ModelResult, verdicts: Iterable[Any]) -> str:
    """Per ATen node of the annotated graph: what the spec did with it, then where the
    lowering put it; a quantized op that missed its int8 kernel says why."""
    by_node = {name: op for op in model.ops for name in op.op.split("+")}
    lines = []
    for verdict in verdicts:
        head = f"{verdict.node} ({verdict.target}): "
        spec = verdict.rule if verdict.rule is not None else "not annotated"
        op = by_node.get(verdict.node)
        if op is not None:
            lowered = f"int8 in {op.kernel}" if op.ok else f"NOT int8: {op.reason}"
            where = f" at {_where(op.origin)}" if op.origin else ""
            lines.append(f"{head}quantized by {op.entry}{where} -> {lowered}")
            continue
        placed = model.placement.get(verdict.node, "removed by the lowering")
        reason = f" ({verdict.reason})" if verdict.rule is None and verdict.reason else ""
        lines.append(f"{head}{spec}{reason} -> float, {placed}")
    if model.error:
        lines.append(f"lowering crashed: {model.error}")
        if model.error_reason:
            lines.append(f"  reason: {model.error_reason}")
    return "".join(f"{escape(line)}\n" for line in lines)
