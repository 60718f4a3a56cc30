"""Diagnostics: every problem bespec finds in a spec, with where it is and how to fix it.

All stages (source parsing, schema validation, name resolution, compilation, lint) report
through :class:`Diagnostic` so that the CLI reporters and :class:`SpecError` treat them alike.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from backend_spec import codes
from backend_spec.codes import Code, Severity

# C0 and C1 controls, DEL, soft hyphen, line/paragraph separators, zero-width and bidi marks,
# embeddings, overrides and isolates, the BOM and interlinear annotations: anything that moves
# the cursor, forges a new line, or makes text read differently from what it is.
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069"
    "\ufeff\ufff9-\ufffb]"
)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape(text: object) -> str:
    """``text`` with every control or invisible formatting character as a visible escape
    (``\\x1b``, ``\\u202e``): safe to print, and a ``\\n`` in a name cannot forge a line."""
    return _UNSAFE.sub(_escaped, str(text))


#: At most this many diagnostics per spec: past it, one more says how many were left out. A
#: hostile file with 400,000 errors must not cost a gigabyte to report.
MAX_DIAGNOSTICS = 200


#: The order in which the cap keeps diagnostics: errors are never hidden behind warnings.
_RANK = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


def capped(diagnostics: list[Diagnostic], unlisted_errors: int = 0) -> list[Diagnostic]:
    """At most MAX_DIAGNOSTICS diagnostics, errors first, then warnings, then notes (each in
    the order given), plus a note counting what was left out by severity. ``unlisted_errors``
    are errors the caller found but did not build; a note from an earlier cap is folded in."""
    notes = [d for d in diagnostics if d.code == codes.TOO_MANY_PROBLEMS and d.hidden]
    listed = [d for d in diagnostics if d not in notes] if notes else diagnostics
    hidden = Counter({Severity.ERROR: unlisted_errors})
    for note in notes:
        hidden.update(dict(zip(_RANK, note.hidden, strict=False)))
    if len(listed) <= MAX_DIAGNOSTICS and not hidden.total():
        return listed
    ranked = sorted(listed, key=lambda d: _RANK[d.severity])
    kept, rest = ranked[:MAX_DIAGNOSTICS], ranked[MAX_DIAGNOSTICS:]
    hidden.update(d.severity for d in rest)
    counts = tuple(hidden[s] for s in _RANK)
    named = ("error(s)", "warning(s)", "note(s)")
    detail = ", ".join(f"{n} {word}" for n, word in zip(counts, named, strict=True) if n)
    file, line, column = (kept[-1].file, kept[-1].line, kept[-1].column) if kept else ("", 0, 0)
    note = Diagnostic(
        file,
        line,
        column,
        codes.TOO_MANY_PROBLEMS,
        f"{sum(counts)} more problem(s) not shown: {detail} (limit {MAX_DIAGNOSTICS})",
        "fix these first",
        severity=Severity.ERROR if counts[0] or not kept else kept[-1].severity,
        hidden=counts,
    )
    return [*kept, note]


#: "Did you mean" stays linear: at most this many suggestions per load (the rest of the unknown
#: names get none), each compared with at most MAX_CANDIDATES names of a similar length.
MAX_SUGGESTIONS = 50
MAX_CANDIDATES = 2000
_MAX_WORD = 200


def close_matches(word: str, candidates: Any, n: int = 3, cutoff: float = 0.6) -> list[str]:
    """difflib's close matches of ``word``, among a bounded pool of similar-length names."""
    if len(word) > _MAX_WORD:
        return []
    slack = max(3, len(word) // 3)
    similar = (c for c in candidates if isinstance(c, str) and abs(len(c) - len(word)) <= slack)
    return difflib.get_close_matches(word, list(islice(similar, MAX_CANDIDATES)), n, cutoff)


def escape_lines(text: str) -> str:
    """A multi-line report for a terminal: each line escaped as :func:`escape` does, the
    ``\n`` between lines kept."""
    return "\n".join(escape(line) for line in text.split("\n"))


@dataclass(frozen=True)
class Diagnostic:
    """One problem at one place. ``line`` and ``column`` are 1-based (0 when unknown).

    ``code`` is an entry of the registry (:mod:`backend_spec.codes`; its id is accepted and
    looked up, an unregistered one is a ValueError). ``hint`` and ``severity`` default to the
    code's, so a call site writes them only when it knows better: a hint naming the value at
    hand, or ``""`` for none.
    """

    file: str
    line: int
    column: int
    code: Code
    message: str
    hint: str = None  # type: ignore[assignment]  # None: the code's hint
    severity: Severity = None  # type: ignore[assignment]  # None: the code's severity
    key_path: tuple[str | int, ...] = field(default=(), compare=False)
    #: On a BS108 note only: how many errors, warnings and notes it stands for, so that a
    #: list capped twice (validation, then compile's rules) still counts every one.
    hidden: tuple[int, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        code = codes.lookup(self.code)
        if code is None:
            raise ValueError(f"diagnostic code {self.code!r} is not in the registry (codes.py)")
        object.__setattr__(self, "code", code)
        if self.hint is None:
            object.__setattr__(self, "hint", code.hint)
        if self.severity is None:
            object.__setattr__(self, "severity", code.severity)

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
        return escape(text)  # user text never prints raw


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
        ordered = sorted(unique, key=lambda d: (d.file, d.line, d.column))
        self.diagnostics = capped(ordered)
        super().__init__("\n".join(str(d) for d in self.diagnostics))
