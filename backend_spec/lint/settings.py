"""Lint settings: ``[tool.bespec.lint]`` of the nearest pyproject.toml, overridden by the CLI.

``select`` and ``ignore`` are lists of rule codes or slugs (prefixes allowed), ``strict``
makes warnings fail the run. On the command line ``--select`` replaces the project's list,
``--ignore`` adds to it and ``--strict`` turns strict on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend_spec.settings import tool_settings


@dataclass(frozen=True)
class LintSettings:
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    strict: bool = False


def split_tokens(values: Iterable[str] | None) -> tuple[str, ...]:
    """``["BS501,BS502", "dead-fusion"]`` -> ``("BS501", "BS502", "dead-fusion")``."""
    return tuple(t.strip() for v in values or () for t in v.split(",") if t.strip())


def _token_list(table: dict[str, Any], key: str, source: Path | None) -> tuple[str, ...]:
    value = table.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{source}: [tool.bespec.lint] {key} must be a list of rule codes")
    return split_tokens(value)


def project_settings(spec: Path) -> LintSettings:
    """The ``[tool.bespec.lint]`` settings that apply to ``spec`` (ValueError if malformed)."""
    from backend_spec.settings import nearest_pyproject

    folder = spec.parent if spec.suffix else spec
    table = tool_settings(folder).get("lint", {})
    source = nearest_pyproject(folder)
    if not isinstance(table, dict):
        raise ValueError(f"{source}: [tool.bespec.lint] must be a table")
    unknown = set(table) - {"select", "ignore", "strict"}
    if unknown:
        raise ValueError(f"{source}: unknown [tool.bespec.lint] keys: {', '.join(sorted(unknown))}")
    strict = table.get("strict", False)
    if not isinstance(strict, bool):
        raise ValueError(f"{source}: [tool.bespec.lint] strict must be true or false")
    return LintSettings(
        _token_list(table, "select", source), _token_list(table, "ignore", source), strict
    )


def merged(
    project: LintSettings,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    strict: bool = False,
) -> LintSettings:
    """The project's settings with the command line's on top."""
    cli_select = split_tokens(select)
    return LintSettings(
        cli_select or project.select,
        (*project.ignore, *split_tokens(ignore)),
        strict or project.strict,
    )
