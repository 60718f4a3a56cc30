"""Where the commands' output goes: documents and reports to stdout, notes, progress and
errors to stderr. The only place the command line writes to the terminal
(``tests/test_layout.py``); what it is handed is already rendered, with user text escaped."""

from __future__ import annotations

import sys

import typer

from backend_spec.diagnostics import escape


def out(text: str) -> None:
    """A rendered document or report, as is, to stdout."""
    sys.stdout.write(text)


def out_line(line: str) -> None:
    """One line of a command's result to stdout."""
    typer.echo(line)


def err(text: str) -> None:
    """Rendered diagnostics, as is, to stderr."""
    sys.stderr.write(text)


def note(line: str) -> None:
    """One line about the run (``wrote X``, a note, a summary) to stderr."""
    typer.echo(line, err=True)


def fail_usage(message: str) -> typer.Exit:
    """Report misuse of a command (exit 2) on one line, user text escaped."""
    note(f"bespec: error: {escape(message)}")
    return typer.Exit(2)
