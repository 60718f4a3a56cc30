"""Lint settings: the project's ``[tool.bespec.lint]`` (:mod:`backend_spec.settings`)
overridden by the command line.

``select`` and ``ignore`` are lists of rule codes or slugs (prefixes allowed), ``strict``
makes warnings fail the run. On the command line ``--select`` replaces the project's list,
``--ignore`` adds to it and ``--strict`` turns strict on.
"""

from __future__ import annotations

from collections.abc import Iterable

from backend_spec.settings import LintSettings, split_tokens

__all__ = ["LintSettings", "merged"]


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
