"""Presenting a :class:`CheckReport`: a rich table, JSON, and a progress bar on stderr."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from backend_spec.check.results import CheckReport
from backend_spec.cli.render.console import escape, user_text

_STYLE = {"pass": "green", "fail": "bold red", "skip": "yellow"}


def _db(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}"


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def pattern_table(report: CheckReport) -> Table:
    table = Table(title=user_text(f"patterns of {report.backend} on {report.engine}"))
    for column in ("pattern", "status", "kind", "SQNR dB", "reason"):
        table.add_column(column, overflow="fold")
    for r in report.patterns:
        status = user_text(r.status, _STYLE[r.status])
        table.add_row(
            user_text(r.pattern), status, user_text(r.kind), _db(r.sqnr_db), user_text(r.reason)
        )
    return table


def model_table(report: CheckReport) -> Table:
    table = Table(title="models")
    for column in ("model", "status", "quantized", "SQNR dB", "fp32 ms", "int8 ms", "reason"):
        table.add_column(column, overflow="fold")
    for m in report.models:
        quantized = sum(1 for kind in m.quantized.values() if kind != "fp32")
        status = user_text(m.status, _STYLE[m.status])
        # With nothing quantized the SQNR only says "float equals float": not worth showing.
        sqnr = _db(m.sqnr_db) if quantized else ""
        table.add_row(
            user_text(m.name),
            status,
            f"{quantized}/{len(m.quantized)} ops",
            sqnr,
            _ms(m.fp32_ms),
            _ms(m.int8_ms),
            user_text(m.reason),
        )
    return table


def summary_line(report: CheckReport) -> str:
    counts = report.counts()
    return (
        f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped of "
        f"{len(report.patterns)} patterns ({report.pass_fraction():.0%} exercised and passing); "
        f"{sum(m.status == 'fail' for m in report.models)} of {len(report.models)} models "
        f"failed; {report.seconds:.1f} s"
    )


def print_text(report: CheckReport, console: Console | None = None, drift: list[str] = ()) -> None:
    console = console or Console()
    console.print(pattern_table(report))
    if report.models:
        console.print(model_table(report))
    for message in drift:
        console.print(user_text("drift:", "bold red"), user_text(message), highlight=False)
    console.print(summary_line(report), highlight=False)


def to_json_text(report: CheckReport, drift: list[str] = ()) -> str:
    document = report.to_json()
    if drift:
        document["drift"] = list(drift)
    return json.dumps(document, indent=2, allow_nan=False)


@contextlib.contextmanager
def progress_bar(total: int, *, enabled: bool = True) -> Iterator:
    """A callback advancing a progress bar on stderr; silent when stderr is not a terminal."""
    console = Console(stderr=True)
    if not enabled or not console.is_terminal:
        yield lambda label: None
        return
    columns = (
        TextColumn("checking"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}", markup=False),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("", total=total)
        yield lambda label: progress.update(task, advance=1, description=escape(label))
