"""``bespec lint``: the loader's own checks plus semantic rules on a spec that loads.

Layout (like yamllint): :mod:`.rules` holds one module per rule, each with its ``CODE`` from
:mod:`backend_spec.codes` (id, slug, severity, summary), a docstring and a ``check(context)``
generator; :mod:`.registry` finds them
and selects them (``--select``/``--ignore``); :mod:`.context` is what a rule sees;
:mod:`.runner` lints files, :mod:`.noqa` applies a file's ``# noqa`` comments and
:mod:`.settings` reads ``[tool.bespec.lint]``.
"""

from __future__ import annotations

from backend_spec.lint.context import LintContext, Problem
from backend_spec.lint.registry import Rule, Selection, all_rules, select_rules
from backend_spec.lint.runner import lint_path

__all__ = [
    "LintContext",
    "Problem",
    "Rule",
    "Selection",
    "all_rules",
    "lint_path",
    "select_rules",
]
