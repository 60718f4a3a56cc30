"""Diagnostics: every problem bespec finds in a spec, with where it is and how to fix it.

All stages (source parsing, schema validation, name resolution, compilation, lint) report
through :class:`Diagnostic` so that the CLI reporters and :class:`SpecError` treat them alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    #: A fact worth knowing that is not a problem (never fails a run, even with --strict).
    INFO = "info"

    @property
    def github_level(self) -> str:
        """The workflow-command level: error, warning or notice."""
        return "notice" if self is Severity.INFO else self.value

    @property
    def sarif_level(self) -> str:
        """The SARIF result level: error, warning or note."""
        return "note" if self is Severity.INFO else self.value


@dataclass(frozen=True)
class Diagnostic:
    """One problem at one place. ``line`` and ``column`` are 1-based (0 when unknown)."""

    file: str
    line: int
    column: int
    code: str
    message: str
    hint: str = ""
    severity: Severity = Severity.ERROR
    key_path: tuple[str | int, ...] = field(default=(), compare=False)

    def location(self) -> str:
        """``file:line:column``, or just the file (``<my_backend>`` for an exported config)
        when there is no position: ``:0:0`` would point nowhere."""
        if self.line <= 0:
            return self.file
        return f"{self.file}:{self.line}:{self.column}"

    def __str__(self) -> str:
        text = f"{self.location()}: {self.code} {self.message}"
        if self.hint:
            text += f" (hint: {self.hint})"
        return text


def format_key_path(path: tuple[str | int, ...]) -> str:
    """Render ``('patterns', 3, 'root_module')`` as ``patterns[3].root_module``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


class SpecError(Exception):
    """A spec could not be loaded; ``diagnostics`` holds every problem found, in file order,
    each once (a mistake inside a YAML anchor is found at every use but reported at the anchor).
    """

    def __init__(self, diagnostics: list[Diagnostic]):
        unique = dict.fromkeys(diagnostics)
        self.diagnostics = sorted(unique, key=lambda d: (d.file, d.line, d.column))
        super().__init__("\n".join(str(d) for d in self.diagnostics))
