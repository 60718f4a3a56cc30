"""``lint``: every problem of each spec, in the chosen report format."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from backend_spec.cli.common import existing, project
from backend_spec.cli.options import AllowImport, RuleTokens, app, format_option
from backend_spec.cli.render.diagnostics import FORMATS as REPORT_FORMATS
from backend_spec.cli.render.streams import fail_usage, note, out


@app.command("lint")
def lint_command(
    specs: Annotated[list[Path], typer.Argument(help="Spec files (.yaml, .yml, .toml).")],
    select: RuleTokens = None,
    ignore: RuleTokens = None,
    strict: Annotated[bool, typer.Option("--strict", help="Warnings fail the run too.")] = False,
    fmt: Annotated[
        str, format_option(*REPORT_FORMATS, help="text, json, github or sarif.")
    ] = "text",
    allow_import: AllowImport = None,
    no_cache: Annotated[
        bool,
        typer.Option(
            "--no-cache", help="Lint every file afresh (results are otherwise cached per file)."
        ),
    ] = False,
) -> None:
    """Report every problem of each SPEC: loader errors and semantic rules (docs/rules.md)."""
    from backend_spec.cli.render.console import use_color
    from backend_spec.cli.render.lint import render_lint
    from backend_spec.lint.session import lint_files
    from backend_spec.lint.settings import merged

    for spec in specs:
        existing(spec)
    settings = project()
    try:
        chosen = merged(settings.lint, select, ignore, strict)
        report = lint_files(specs, chosen, settings.allowed(allow_import), use_cache=not no_cache)
    except ValueError as exc:
        raise fail_usage(str(exc)) from None
    out(render_lint(report, fmt, color=use_color(sys.stdout)))
    if fmt == "text":
        note(report.summary())
    raise typer.Exit(1 if report.failed else 0)
