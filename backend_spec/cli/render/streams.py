"""Where the commands' output goes: documents and reports to stdout, notes, progress and
errors to stderr. The only place the command line writes to the terminal
(``tests/test_layout.py``); what it is handed is already rendered, with user text escaped."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import typer

from backend_spec.diagnostics import Diagnostic, escape, escape_lines


def out(text: str) -> None:
    """A rendered document or report, as is, to stdout."""
    sys.stdout.write(text)


def out_escaped(text: str) -> None:
    """A document with user text in it to stdout, escaped line by line (files get it as is)."""
    sys.stdout.write(escape_lines(text))


def out_line(line: str) -> None:
    """One line of a command's result to stdout."""
    typer.echo(line)


def err(text: str) -> None:
    """Rendered diagnostics, as is, to stderr."""
    sys.stderr.write(text)


def diagnostics(found: Sequence[Diagnostic], *, grouped: bool = False) -> None:
    """Diagnostics to stderr, coloured on a terminal; ``grouped``: one entry per cause with a
    count (export refusals, where hundreds of patterns share one cause)."""
    from backend_spec.cli.render.console import use_color
    from backend_spec.cli.render.diagnostics import render_grouped, render_text

    render = render_grouped if grouped else render_text
    err(render(found, color=use_color(sys.stderr)))


def note(line: str) -> None:
    """One line about the run (``wrote X``, a note, a summary) to stderr."""
    typer.echo(line, err=True)


def fail_usage(message: str) -> typer.Exit:
    """Report misuse of a command (exit 2) on one line, user text escaped."""
    note(f"bespec: error: {escape(message)}")
    return typer.Exit(2)


def cache_notes() -> None:
    """One note per cache folder the run refused to use (not the user's own:
    :func:`backend_spec.files.trusted_cache`), each said once."""
    from backend_spec.files import refused_caches

    for line in refused_caches():
        note(f"note: {escape(line)}")
