"""Project settings from the nearest ``pyproject.toml`` (``[tool.bespec]``)."""

from __future__ import annotations

import sys
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


def allow_imports_for(spec: Path, extra: list[str] | None = None) -> list[str]:
    """The allow-list for a spec: the CLI's ``--allow-import`` plus the project's setting."""
    configured = tool_settings(spec.parent if spec.suffix else spec).get("allow_imports", [])
    names = [*(extra or []), *(n for n in configured if isinstance(n, str))]
    return list(dict.fromkeys(names))
