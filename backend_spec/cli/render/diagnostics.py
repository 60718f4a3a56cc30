"""Renderers of diagnostics: text (colored on a tty), json, github annotations and SARIF 2.1.0.

Checking and reporting stay apart: every command produces :class:`Diagnostic` objects and one of
these turns them into text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from backend_spec.diagnostics import Diagnostic, Severity, escape

FORMATS = ("text", "json", "github", "sarif")

_RULE_DOCS = "https://github.com/bespec/bespec/blob/main/docs/rules.md"


#: ANSI colour per severity: red, yellow, cyan.
_STYLES = {Severity.ERROR: "31", Severity.WARNING: "33", Severity.INFO: "36"}


def render_text(diagnostics: Iterable[Diagnostic], color: bool = False) -> str:
    """``file:line:col: error BS300 message``: the severity is written in words, so it survives
    pipes, screen readers and NO_COLOR; colour (only when ``color``) merely repeats it."""
    lines = []
    for d in diagnostics:
        severity = d.severity.value
        location, message = escape(d.location()), escape(d.message)
        if color:
            style = _STYLES[d.severity]
            text = f"\x1b[1m{location}\x1b[0m: \x1b[{style}m{severity} {d.code}\x1b[0m {message}"
        else:
            text = f"{location}: {severity} {d.code} {message}"
        if d.hint:
            text += f"\n    hint: {escape(d.hint)}"
        lines.append(text)
    return "\n".join(lines) + ("\n" if lines else "")


_EXPORT_MESSAGE = re.compile(r"cannot export (?P<where>\S+) of (?P<what>.+?): (?P<cause>.*)", re.S)


def render_grouped(diagnostics: Iterable[Diagnostic], color: bool = False, shown: int = 3) -> str:
    """Diagnostics that share a cause (code and problem) as one entry with a count and a few
    of the places, for exports where hundreds of patterns share one unnameable fuser."""
    groups: dict[tuple[str, str, str, str], list[str]] = {}
    for d in diagnostics:
        match = _EXPORT_MESSAGE.fullmatch(d.message)
        cause = match["cause"] if match else d.message
        place = f"{match['where']} of {match['what']}" if match else ""
        groups.setdefault((d.location(), d.code, cause, d.hint), []).append(place)
    lines = []
    for (location, code, cause, hint), places in groups.items():
        count = f" ({len(places)} patterns)" if len(places) > 1 else ""
        head = f"{location}: {code}{count} {cause}"
        if color:
            head = f"\x1b[1m{location}\x1b[0m: \x1b[31m{code}\x1b[0m{count} {cause}"
        lines.append(head)
        named = [p for p in places if p]
        if named:
            more = f", and {len(named) - shown} more" if len(named) > shown else ""
            lines.append(f"    at {'; '.join(named[:shown])}{more}")
        if hint:
            lines.append(f"    hint: {hint}")
    return "\n".join(lines) + ("\n" if lines else "")


def render_json(diagnostics: Iterable[Diagnostic]) -> str:
    items = [
        {
            "path": d.file,
            "line": d.line,
            "column": d.column,
            "code": d.code,
            "severity": d.severity.value,
            "message": d.message,
            "hint": d.hint,
        }
        for d in diagnostics
    ]
    return json.dumps(items, indent=2) + "\n"


def _github_escape(text: str, *, property_value: bool = False) -> str:
    text = escape(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if property_value:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


def render_github(diagnostics: Iterable[Diagnostic]) -> str:
    lines = []
    for d in diagnostics:
        level = d.severity.github_level
        props = ",".join(
            [
                f"file={_github_escape(d.file, property_value=True)}",
                f"line={max(d.line, 1)}",
                f"col={max(d.column, 1)}",
                f"title={_github_escape(d.code, property_value=True)}",
            ]
        )
        message = f"{d.code} {d.message}" + (f" (hint: {d.hint})" if d.hint else "")
        lines.append(f"::{level} {props}::{_github_escape(message)}")
    return "\n".join(lines) + ("\n" if lines else "")


def render_sarif(
    diagnostics: Iterable[Diagnostic],
    rules: dict[str, str] | None = None,
    rule_metadata: dict[str, dict[str, Any]] | None = None,
) -> str:
    """SARIF 2.1.0. ``rules`` maps codes to short descriptions; ``rule_metadata`` adds SARIF
    reportingDescriptor fields per code (``name``, ``helpUri``, ``defaultConfiguration``...)."""
    diagnostics = list(diagnostics)
    rules = dict(rules or {})
    for d in diagnostics:
        rules.setdefault(d.code, d.message)
    metadata = rule_metadata or {}
    from backend_spec import __version__

    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "bespec",
                "version": __version__,
                "informationUri": _RULE_DOCS,
                "rules": [
                    {
                        "id": code,
                        "shortDescription": {"text": text},
                        "helpUri": _RULE_DOCS,
                        **metadata.get(code, {}),
                    }
                    for code, text in sorted(rules.items())
                ],
            }
        },
        "results": [
            {
                "ruleId": d.code,
                "level": d.severity.sarif_level,
                "message": {"text": d.message + (f" (hint: {d.hint})" if d.hint else "")},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {"uri": d.file},
                            "region": {
                                "startLine": max(d.line, 1),
                                "startColumn": max(d.column, 1),
                            },
                        }
                    }
                ],
            }
            for d in diagnostics
        ],
    }
    sarif = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [run],
    }
    return json.dumps(sarif, indent=2) + "\n"


RENDERERS: dict[str, Callable[[list[Diagnostic]], str]] = {
    "text": render_text,
    "json": render_json,
    "github": render_github,
    "sarif": render_sarif,
}
