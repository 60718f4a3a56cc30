"""A named dtype config is defined but no pattern uses it.

Usually a leftover after a refactor, or a typo'd name in a pattern that happens to resolve to
another config. Keep shared snippets under an ``x-`` key (with a YAML anchor) instead.
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec.lint.context import LintContext, Problem

ID = "BS507"
NAME = "unused-dtype-config"
SEVERITY = "warning"


def check(context: LintContext) -> Iterator[Problem]:
    used = {
        ref
        for entry in context.entries
        for ref in entry.model.dtype_configs
        if isinstance(ref, str)
    }
    for name in context.spec.dtype_configs:
        if name not in used:
            yield Problem(
                ("dtype_configs", name),
                f"dtype config '{name}' is not used by any pattern",
                "use it in a pattern's dtype_configs, or remove it",
                at_key=True,
            )
