"""The lint result cache: a file linted before, unchanged, is answered without importing torch.

``bespec lint`` runs in pre-commit on every commit, and most of its time is ``import torch``,
which the rules need (they resolve names to torch objects). Like ruff's cache, a result is kept
per file under a key of everything it depends on:

* the file's bytes (its ``# noqa`` comments included) and the path as given (diagnostics
  carry it);
* the rule selection;
* bespec's own code (every file of the package: size and modification time), torch's and
  torchao's installed versions and Python's, so an upgrade or an edit of bespec misses.

A file whose result depends on anything else is never cached: one that ``extends`` another
file (the base may change), and any run with an allow-list (the allowed modules may change).
A cache entry that is unreadable or of the wrong shape is a miss; entries are written
atomically, and the folder keeps at most :data:`MAX_ENTRIES` of them (oldest dropped).

This module imports nothing heavy, so a run whose every file hits never imports torch.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

from backend_spec.diagnostics import Diagnostic, Severity
from backend_spec.files import cache_folder, write_atomic

#: Entries kept in the cache folder; past this the oldest are removed.
MAX_ENTRIES = 2000
#: Cache entries larger than this are not read (a result of 200 diagnostics is far smaller).
MAX_ENTRY_BYTES = 4 * 2**20
#: The format of an entry; bump it when the stored fields change.
FORMAT = 1

#: A top-level ``extends`` key, YAML (``extends:``) or TOML (``extends =``).
_EXTENDS = re.compile(rb"^[\"']?extends[\"']?\s*[:=]", re.MULTILINE)
_PACKAGE = Path(__file__).resolve().parent.parent


def folder() -> Path:
    return cache_folder() / "lint"


def enabled() -> bool:
    """Off with ``BESPEC_NO_CACHE=1`` (``bespec lint --no-cache`` sets it)."""
    return os.environ.get("BESPEC_NO_CACHE", "") in ("", "0")


def key(path: Path, data: bytes, selection: Iterable[str]) -> str | None:
    """The cache key of linting ``data`` (read from ``path``), or None when not cacheable."""
    if _EXTENDS.search(data):
        return None
    parts = [
        f"format {FORMAT}",
        str(path),
        hashlib.sha256(data).hexdigest(),
        ",".join(sorted(selection)),
        _environment(),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def lookup(entry_key: str) -> list[Diagnostic] | None:
    """The diagnostics stored under ``entry_key``, or None (a miss, whatever the reason)."""
    target = folder() / f"{entry_key}.json"
    try:
        if target.stat().st_size > MAX_ENTRY_BYTES:
            return None
        stored = json.loads(target.read_text("utf-8"))
        if not isinstance(stored, list):
            return None
        return [_diagnostic(item) for item in stored]
    except (OSError, ValueError, TypeError, KeyError):
        return None


def store(entry_key: str, diagnostics: list[Diagnostic]) -> None:
    """Keep a result; a cache that cannot be written is no error (the run already has it)."""
    target = folder() / f"{entry_key}.json"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, json.dumps([_record(d) for d in diagnostics]))
        _prune(target.parent)
    except OSError:
        return


def _record(d: Diagnostic) -> dict[str, Any]:
    return {
        "file": d.file,
        "line": d.line,
        "column": d.column,
        "code": str(d.code),
        "message": d.message,
        "hint": d.hint,
        "severity": d.severity.value,
        "key_path": list(d.key_path),
        "hidden": list(d.hidden),
    }


def _diagnostic(item: dict[str, Any]) -> Diagnostic:
    return Diagnostic(
        str(item["file"]),
        int(item["line"]),
        int(item["column"]),
        str(item["code"]),
        str(item["message"]),
        str(item["hint"]),
        Severity(item["severity"]),
        key_path=tuple(item["key_path"]),
        hidden=tuple(int(n) for n in item["hidden"]),
    )


def _prune(where: Path) -> None:
    entries = list(where.glob("*.json"))
    if len(entries) <= MAX_ENTRIES:
        return
    entries.sort(key=lambda p: p.stat().st_mtime)
    for old in entries[: len(entries) - MAX_ENTRIES]:
        old.unlink(missing_ok=True)


def _environment() -> str:
    """What else a result depends on: bespec's code and the installed versions."""
    stamps = sorted(
        f"{p.relative_to(_PACKAGE)}:{p.stat().st_size}:{p.stat().st_mtime_ns}"
        for p in _PACKAGE.rglob("*")
        if p.suffix in (".py", ".json") and "__pycache__" not in p.parts
    )
    return "\n".join([sys.version, *(_installed(n) for n in ("torch", "torchao")), *stamps])


def _installed(name: str) -> str:
    try:
        return f"{name} {metadata.version(name)}"
    except metadata.PackageNotFoundError:
        return f"{name} absent"
