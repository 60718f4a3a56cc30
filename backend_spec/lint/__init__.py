"""``bespec lint``: the loader's own checks plus semantic rules on a spec that loads.

Layout (like yamllint): :mod:`.rules` holds one module per rule, each with its ``CODE`` from
:mod:`backend_spec.codes` (id, slug, severity, summary), a docstring and a ``check(context)``
generator; :mod:`.registry` finds them
and selects them (``--select``/``--ignore``); :mod:`.context` is what a rule sees;
:mod:`.runner` lints files, :mod:`.noqa` applies a file's ``# noqa`` comments and
:mod:`.settings` reads ``[tool.bespec.lint]``.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Where each public name lives. They are imported on first use, so that a module of this
#: package that needs no torch (:mod:`.cache`, :mod:`.session` on a cache hit) stays light.
_EXPORTS = {
    "LintContext": "context",
    "Problem": "context",
    "Rule": "registry",
    "Selection": "registry",
    "all_rules": "registry",
    "select_rules": "registry",
    "lint_path": "runner",
}


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)


__all__ = [
    "LintContext",
    "Problem",
    "Rule",
    "Selection",
    "all_rules",
    "lint_path",
    "select_rules",
]
