"""The lint result cache: a file linted before, unchanged, is answered without importing torch.

``bespec lint`` runs in pre-commit on every commit, and most of its time is ``import torch``,
which the rules need (they resolve names to torch objects). Like ruff's cache, a result is kept
per file. A cache is an optimisation, never a source of truth, so an entry is used only when
everything that produced it is unchanged:

* **the key** (the entry's file name): the file's bytes (its ``# noqa`` comments included),
  the path as given (diagnostics carry it) and where it resolves (``extends`` is confined to
  its folder), the rule selection, and bespec's own code (every file of the package: size and
  modification time), torch's and torchao's installed versions and Python's;
* **the files it read** (kept in the entry): every base file its ``extends`` chain looked up,
  as the loader found them while linting (the parsed document decides, whatever spelling the
  key has), each with a fingerprint taken before reading it (:func:`files.fingerprint`: where
  it resolves, its size and the hash of its bytes). On a hit each is fingerprinted again: a
  base edited, created, removed or re-pointed is a miss.

A run with an allow-list is never cached (the allowed modules may change).

Every entry is validated on read, and whatever fails is a miss, never an error: an entry that
is not a regular file (a directory, FIFO or symlink), larger than :data:`MAX_ENTRY_BYTES`, not
strict JSON (``NaN``, ``Infinity``), nested deeper than Python parses, of another shape, with
a field out of range (a line of ``1e400``, an unknown severity or code), stored under another
key, or whose seal (a hash of its content and key) does not match. Entries are written
atomically, only into a cache folder that is the user's own (:func:`files.trusted_cache`), and
the folder keeps at most :data:`MAX_ENTRIES` of them (oldest dropped). A writer of the cache
folder can still make a file's result wrong, which is why a folder others can write is never
used (docs/security.md).

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
from backend_spec.files import (
    WriteError,
    fingerprint,
    read_cache_file,
    trusted_cache,
    write_atomic,
)

#: Entries kept in the cache folder; past this the oldest are removed.
MAX_ENTRIES = 2000
#: Cache entries larger than this are not read (a result of 200 diagnostics is far smaller).
MAX_ENTRY_BYTES = 4 * 2**20
#: The format of an entry; bump it when the stored fields change.
FORMAT = 2
#: Most diagnostics and base files an entry may list (201 and 17 are the loader's caps).
_MAX_DIAGNOSTICS = 1000
_MAX_READS = 64
#: Largest line or column an entry may hold (a file is at most 8 MiB).
_MAX_POSITION = 2**31
_MAX_TEXT = 2**16
_CODE = re.compile(r"BS\d{3}")
_PACKAGE = Path(__file__).resolve().parent.parent


def folder(*, create: bool = False) -> Path | None:
    """The cache's folder, None when it may not be used (not the user's own)."""
    return trusted_cache("lint", create=create)


def enabled() -> bool:
    """Off with ``BESPEC_NO_CACHE=1`` (``bespec lint --no-cache`` sets it)."""
    return os.environ.get("BESPEC_NO_CACHE", "") in ("", "0")


def key(path: Path, data: bytes, selection: Iterable[str]) -> str:
    """The cache key of linting ``data`` (read from ``path``)."""
    parts = [
        f"format {FORMAT}",
        str(path),
        os.path.realpath(path),
        hashlib.sha256(data).hexdigest(),
        ",".join(sorted(selection)),
        _environment(),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def lookup(entry_key: str) -> list[Diagnostic] | None:
    """The diagnostics stored under ``entry_key``, or None (a miss, whatever the reason)."""
    where = folder()
    if where is None:
        return None
    data = read_cache_file(where / f"{entry_key}.json", MAX_ENTRY_BYTES)
    if data is None:
        return None
    try:
        stored = json.loads(data, parse_constant=_refuse_constant)
        return _valid(stored, entry_key)
    except (ValueError, TypeError, KeyError, RecursionError, OverflowError):
        return None


def store(entry_key: str, diagnostics: list[Diagnostic], reads: list[tuple[str, str]]) -> None:
    """Keep a result with the (path, fingerprint) of each base file it read; a cache that
    cannot be written is no error (the run already has its result)."""
    where = folder(create=True)
    if where is None:
        return
    body = {
        "format": FORMAT,
        "key": entry_key,
        "reads": [list(read) for read in reads],
        "diagnostics": [_record(d) for d in diagnostics],
    }
    try:
        write_atomic(where / f"{entry_key}.json", json.dumps({**body, "seal": _seal(body)}))
        _prune(where)
    except (OSError, WriteError):
        return


def _seal(body: dict[str, Any]) -> str:
    """A hash of an entry's content and key: an entry damaged, truncated or copied under
    another key's name does not match it."""
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _valid(stored: Any, entry_key: str) -> list[Diagnostic] | None:
    """The diagnostics of a well-formed, sealed entry whose base files are unchanged."""
    if not isinstance(stored, dict) or set(stored) != {
        "format",
        "key",
        "reads",
        "diagnostics",
        "seal",
    }:
        return None
    seal = stored.pop("seal")
    if stored["format"] != FORMAT or stored["key"] != entry_key or seal != _seal(stored):
        return None
    reads, found = stored["reads"], stored["diagnostics"]
    if not isinstance(reads, list) or len(reads) > _MAX_READS:
        return None
    for read in reads:
        if not (isinstance(read, list) and len(read) == 2 and all(_text(part) for part in read)):
            return None
        if fingerprint(read[0]) != read[1]:
            return None  # a base file changed since
    if not isinstance(found, list) or len(found) > _MAX_DIAGNOSTICS:
        return None
    diagnostics = [_diagnostic(item) for item in found]
    return None if any(d is None for d in diagnostics) else diagnostics  # type: ignore[misc]


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


_FIELDS = frozenset(_record(Diagnostic("f", 1, 1, "BS100", "")))


def _diagnostic(item: Any) -> Diagnostic | None:
    """A stored diagnostic, None unless every field has its type and range."""
    if not isinstance(item, dict) or set(item) != _FIELDS:
        return None
    texts = (item["file"], item["message"], item["hint"])
    if not all(_text(value) for value in texts):
        return None
    if not (_position(item["line"]) and _position(item["column"])):
        return None
    if not (isinstance(item["code"], str) and _CODE.fullmatch(item["code"])):
        return None
    if item["severity"] not in {s.value for s in Severity}:
        return None
    key_path, hidden = item["key_path"], item["hidden"]
    if not isinstance(key_path, list) or len(key_path) > 64:
        return None
    if not all(_text(part) or _position(part) for part in key_path):
        return None
    if not isinstance(hidden, list) or len(hidden) > 3 or not all(map(_position, hidden)):
        return None
    try:
        return Diagnostic(
            item["file"],
            item["line"],
            item["column"],
            item["code"],
            item["message"],
            item["hint"],
            Severity(item["severity"]),
            key_path=tuple(key_path),
            hidden=tuple(hidden),
        )
    except ValueError:  # a code that is not in the registry
        return None


def _text(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= _MAX_TEXT


def _position(value: Any) -> bool:
    return type(value) is int and 0 <= value <= _MAX_POSITION


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
