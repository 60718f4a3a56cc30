"""The project's settings: ``[tool.bespec]`` of one ``pyproject.toml``, read in one place.

The project is found from the working directory upward, never from a spec file's folder. A
spec is untrusted: a ``pyproject.toml`` lying next to it must not widen what it may import,
silence its lint findings or pick the engine its check runs on. Every command (``compile``,
``lint``, ``check`` and the rest) reads :func:`project_settings` once and passes the typed
:class:`Settings` on; the command line's flags go on top.

```toml
[tool.bespec]
allow_imports = ["my_pkg.fusers"]   # modules specs may name, besides torch and operator

[tool.bespec.lint]
select = ["BS5"]                    # rule codes or slugs, prefixes allowed (default: all)
ignore = ["BS512"]
strict = true                       # warnings fail the run

[tool.bespec.check]
engine = "qnnpack"                  # the quantized engine of `bespec check`
```
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True)
class LintSettings:
    """``[tool.bespec.lint]``: which rules run, and whether warnings fail the run."""

    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    strict: bool = False


@dataclass(frozen=True)
class CheckSettings:
    """``[tool.bespec.check]``: the quantized engine (None: the backend's own)."""

    engine: str | None = None


@dataclass(frozen=True)
class Settings:
    """Everything ``[tool.bespec]`` may set; ``source`` is the file read (None: none found)."""

    source: Path | None = None
    allow_imports: tuple[str, ...] = ()
    lint: LintSettings = field(default_factory=LintSettings)
    check: CheckSettings = field(default_factory=CheckSettings)

    def allowed(self, extra: Iterable[str] | None = None) -> list[str]:
        """The allow-list of a command: ``extra`` (``--allow-import``) plus the project's."""
        return list(dict.fromkeys([*(extra or ()), *self.allow_imports]))


def nearest_pyproject(start: Path) -> Path | None:
    """The first ``pyproject.toml`` in ``start`` or one of its parents."""
    start = start.resolve()
    for folder in (start, *start.parents) if start.is_dir() else start.parents:
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def project_settings(project: Path | None = None) -> Settings:
    """The settings of the project ``project`` (default: the working directory) lies in.

    A missing or unreadable ``pyproject.toml`` means defaults; a malformed ``[tool.bespec]``
    is a ValueError naming the file and the key (the user's misuse, reported as such).
    """
    source = nearest_pyproject(project or Path.cwd())
    if source is None:
        return Settings()
    try:
        data = tomllib.loads(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return Settings(source)
    table = _table(data.get("tool", {}), "bespec", source, "[tool]")
    _known(table, ("allow_imports", "lint", "check"), source, "[tool.bespec]")
    lint = _table(table, "lint", source, "[tool.bespec]")
    _known(lint, ("select", "ignore", "strict"), source, "[tool.bespec.lint]")
    check = _table(table, "check", source, "[tool.bespec]")
    _known(check, ("engine",), source, "[tool.bespec.check]")
    return Settings(
        source,
        _strings(table, "allow_imports", source, "[tool.bespec]", "module names"),
        LintSettings(
            split_tokens(_strings(lint, "select", source, "[tool.bespec.lint]", "rule codes")),
            split_tokens(_strings(lint, "ignore", source, "[tool.bespec.lint]", "rule codes")),
            _bool(lint, "strict", source),
        ),
        CheckSettings(_engine(check, source)),
    )


def split_tokens(values: Iterable[str] | None) -> tuple[str, ...]:
    """``["BS501,BS502", "dead-fusion"]`` -> ``("BS501", "BS502", "dead-fusion")``."""
    return tuple(t.strip() for v in values or () for t in v.split(",") if t.strip())


def _table(parent: Any, key: str, source: Path, where: str) -> dict[str, Any]:
    value = parent.get(key, {}) if isinstance(parent, dict) else {}
    if not isinstance(value, dict):
        raise ValueError(f"{source}: {where} {key} must be a table")
    return value


def _known(table: dict[str, Any], keys: tuple[str, ...], source: Path, where: str) -> None:
    unknown = sorted(set(table) - set(keys))
    if unknown:
        raise ValueError(
            f"{source}: unknown {where} key(s) {', '.join(unknown)}; known: {', '.join(keys)}"
        )


def _strings(
    table: dict[str, Any], key: str, source: Path, where: str, what: str
) -> tuple[str, ...]:
    value = table.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{source}: {where} {key} must be a list of {what}")
    return tuple(value)


def _bool(table: dict[str, Any], key: str, source: Path) -> bool:
    value = table.get(key, False)
    if not isinstance(value, bool):
        raise ValueError(f"{source}: [tool.bespec.lint] {key} must be true or false")
    return value


def _engine(table: dict[str, Any], source: Path) -> str | None:
    value = table.get("engine")
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{source}: [tool.bespec.check] engine must be an engine name")
    return value
