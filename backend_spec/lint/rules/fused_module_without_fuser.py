"""``fused_module`` is set but ``fuser_method`` is not, so the pattern never fuses.

torch fuses a pattern only when its entry has a ``fuser_method``; ``fused_module`` alone only
tells convert which class a fusion produced. An entry with a fused module and no fuser
describes a fusion that never happens.
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec.lint.context import LintContext, Problem

ID = "BS503"
NAME = "fused-module-without-fuser"
SEVERITY = "error"


def check(context: LintContext) -> Iterator[Problem]:
    for entry in context.entries:
        model = entry.model
        if model.fused_module is not None and model.fuser_method is None:
            yield Problem(
                (*entry.path, "fused_module"),
                "fused_module is set but fuser_method is not; torch never fuses this pattern",
                f"add 'fuser_method: {{sequential: {model.fused_module}}}' or a fuser function",
                at_key=True,
            )
