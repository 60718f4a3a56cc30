"""Project settings from the nearest ``pyproject.toml`` (``[tool.bespec]``)."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def nearest_pyproject(start: Path) -> Path | None:
    """The first ``pyproject.toml`` in ``start`` or one of its parents."""
    start = start.resolve()
    for folder in (start, *start.parents) if start.is_dir() else start.parents:
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def tool_settings(start: Path) -> dict[str, Any]:
    """``[tool.bespec]`` of the nearest pyproject.toml, or ``{}`` (unreadable counts as none)."""
    path = nearest_pyproject(start)
    if path is None:
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}
    settings = data.get("tool", {}).get("bespec", {})
    return settings if isinstance(settings, dict) else {}


def project_allow_imports(
    extra: Iterable[str] | None = None, project: Path | None = None
) -> list[str]:
    """The allow-list of a command: ``extra`` (``--allow-import``, the API) plus
    ``[tool.bespec] allow_imports`` of the project's pyproject.toml.

    The project is found from ``project`` (default: the working directory) upward, never from
    a spec file's folder: a spec is untrusted, and a pyproject.toml lying next to it must not
    widen what it may import.
    """
    configured = tool_settings(project or Path.cwd()).get("allow_imports", [])
    if not isinstance(configured, list):
        configured = []
    names = [*(extra or []), *(n for n in configured if isinstance(n, str))]
    return list(dict.fromkeys(names))
