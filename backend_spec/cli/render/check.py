"""Presenting a :class:`CheckReport`: tables, the summary, JSON, and a progress bar on stderr.

Text output leads with what needs attention: failing and skipped cases (every case under
``--verbose``), short reasons (torch's full text under ``--verbose`` and in JSON), report-wide
notes once, drift from the golden, and a summary that says how many pattern × DTypeConfig cases
were really exercised. Tables go through ``print_table``, so names never split at 80 columns.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Sequence
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from backend_spec.check.golden import known_failures
from backend_spec.check.results import CheckReport, PatternResult
from backend_spec.cli.render.console import Cell, escape, make_console, print_table, user_text

_STYLE = {"pass": "green", "fail": "bold red", "skip": "yellow"}


def _db(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}"


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def _status(status: str) -> Text:
    return user_text(status, _STYLE[status])


def _case_text(result: PatternResult) -> str:
    mode = result.mode if result.dtype_index is None else f"{result.mode}#{result.dtype_index}"
    return mode if result.kind in ("", "fusion") else f"{mode} {result.kind}"


_CASE_HEADERS = ("pattern", "case", "status", "dB", "reason")
_MODEL_HEADERS = ("model", "status", "quantized", "dB", "ms fp32/q", "reason")


def case_rows(report: CheckReport, verbose: bool = False, inherited: str = "") -> list[list[Cell]]:
    """Failing and skipped cases (all of them when ``verbose``), one row each: the spec's own,
    or those ``inherited`` from that built-in (see :attr:`PatternResult.inherited`)."""
    rows: list[list[Cell]] = []
    for r in report.patterns:
        if r.inherited != inherited:
            continue
        if verbose or r.status != "pass":
            sqnr = _db(r.sqnr_db) + ("*" if r.reference_fallback else "")
            rows.append([r.pattern, _case_text(r), _status(r.status), sqnr, r.reason])
    return rows


def model_rows(report: CheckReport) -> list[list[Cell]]:
    rows: list[list[Cell]] = []
    for m in report.models:
        quantized = sum(1 for kind in m.quantized.values() if kind != "fp32")
        # With nothing quantized the SQNR only says "float equals float": not worth showing.
        sqnr = _db(m.sqnr_db) + ("*" if m.reference_fallback else "") if quantized else ""
        timing = f"{_ms(m.fp32_ms)}/{_ms(m.int8_ms)}" if m.int8_ms is not None else ""
        ops = f"{quantized}/{len(m.quantized)} ops"
        rows.append([m.name, _status(m.status), ops, sqnr, timing, m.reason])
    return rows


def summary_line(report: CheckReport) -> str:
    counts = report.counts()
    patterns = len({r.pattern for r in report.patterns})
    model_failures = sum(m.status == "fail" for m in report.models)
    return (
        f"{report.exercised()} of {len(report.patterns)} cases (pattern × DTypeConfig, QAT, "
        f"fusion) of {patterns} patterns exercised: {counts['pass']} passed, {counts['fail']} "
        f"failed, {counts['skip']} skipped{_inherited_count(counts['inherited'])}; "
        f"{model_failures} of {len(report.models)} models failed; {report.seconds:.1f} s"
    )


def _inherited_count(count: int) -> str:
    return f" ({count} more fail or skip as in torch's own backend)" if count else ""


def golden_line(report: CheckReport, golden: str | os.PathLike[str], *, written: bool) -> str:
    """``matches golden F (13 known failures)`` / ``wrote golden F (13 known failures)``."""
    from backend_spec.check.golden import golden_from_report

    failures = known_failures(golden_from_report(report))
    verb = "wrote" if written else "matches"
    return f"{verb} golden {os.fspath(golden)} ({failures} known failure{'s' * (failures != 1)})"


def print_text(
    report: CheckReport,
    drift: Sequence[str] | None = None,
    *,
    verbose: bool = False,
    console: Console | None = None,
) -> None:
    console = console or make_console()
    cases = case_rows(report, verbose)
    if cases:
        title = f"cases of {report.backend} on {report.engine}"
        print_table(console, title, _CASE_HEADERS, cases)
    for source in dict.fromkeys(r.inherited for r in report.patterns if r.inherited):
        title = (
            f"inherited unchanged from {source}, which fails or skips them the same way "
            "(torch's, not this spec's: `remove` an entry to drop it, or write it to own it)"
        )
        print_table(console, title, _CASE_HEADERS, case_rows(report, verbose, source))
    hints = list(dict.fromkeys(r.hint for r in report.patterns if r.hint))
    if hints:
        console.print("to exercise the skipped cases, add to patterns:", highlight=False)
    for line in (line for hint in hints for line in hint.splitlines()):
        console.print(user_text(f"  {line}"), highlight=False, soft_wrap=True)
    passing = sum(r.status == "pass" and not r.inherited for r in report.patterns)
    if not verbose and passing:
        console.print(f"{passing} passing cases not listed (--verbose lists them)")
    if report.models:
        print_table(console, "models", _MODEL_HEADERS, model_rows(report))
    if verbose:
        _print_details(report, console)
    for note in report.notes:
        console.print(user_text(f"note: {note}"))
    for message in drift or ():
        console.print(user_text("drift:", "bold red"), user_text(message), highlight=False)
    console.print(summary_line(report), highlight=False)


def _print_details(report: CheckReport, console: Console) -> None:
    for key, detail in [(r.key, r.detail) for r in report.patterns] + [
        (m.name, m.detail) for m in report.models
    ]:
        if detail:
            console.print(user_text(key, "bold"), user_text(f": {detail}"), sep="", soft_wrap=True)


def to_json_text(
    report: CheckReport, drift: Sequence[str] | None = None, *, verbose: bool = True
) -> str:
    """The report as JSON (with signatures and torch's full error text); ``drift`` is a list
    when a golden was compared (empty: it matched), absent otherwise."""
    document: dict[str, Any] = report.to_json()
    if drift is not None:
        document["drift"] = list(drift)
        document["matches_golden"] = not drift
    if not verbose:
        for entry in (*document["patterns"], *document["models"]):
            entry.pop("signature", None)
    return json.dumps(document, indent=2, allow_nan=False)


@contextlib.contextmanager
def progress_bar(*, enabled: bool = True) -> Iterator:
    """A ``progress(label, total)`` callback advancing a bar on stderr; silent when stderr is not
    a terminal."""
    console = Console(stderr=True)
    if not enabled or not console.is_terminal:
        yield lambda label, total: None
        return
    columns = (
        TextColumn("checking"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}", markup=False),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("", total=None)
        yield lambda label, total: progress.update(
            task, advance=1, total=total, description=escape(label)
        )
