"""``bespec lint``'s report in the chosen format (the lint package itself prints nothing)."""

from __future__ import annotations

from backend_spec.cli.render import diagnostics as reporters
from backend_spec.lint.session import LintReport, sarif_rules


def render_lint(report: LintReport, fmt: str, color: bool = False) -> str:
    """The report's diagnostics in ``fmt`` (text, json, github or sarif)."""
    if fmt == "sarif":
        texts, metadata = sarif_rules()
        return reporters.render_sarif(report.diagnostics, texts, metadata)
    if fmt == "text":
        return reporters.render_text(report.diagnostics, color=color)
    return reporters.RENDERERS[fmt](report.diagnostics)
