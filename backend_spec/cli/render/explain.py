"""Presenting an :class:`~backend_spec.analysis.explain.Explanation`: one row per node of the
traced model, then the spec's patterns that matched nothing."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from backend_spec.analysis.explain import Explanation
from backend_spec.cli.render.console import plural, print_table, user_text

_STYLES = {
    "quantized": "green",
    "skipped": "bold red",
    "not converted": "bold red",
    "no qconfig": "yellow",
    "not quantized": "yellow",
    "no pattern": "dim",
}


def print_explanation(report: Explanation, console: Console) -> None:
    """A table of the nodes, then the spec's patterns that matched nothing (the console is
    bespec's, :func:`backend_spec.cli.render.console.make_console`: no markup)."""
    rows = [
        [
            node.node,
            node.op,
            f"{node.pattern or ''} (fused from {node.fused_from})".strip()
            if node.fused_from
            else node.pattern or "",
            Text(node.outcome, style=_STYLES.get(node.outcome, "")),
            " ".join(node.reasons),
        ]
        for node in report.nodes
    ]
    headers = ("node", "op", "pattern", "outcome", "why")
    print_table(console, f"backend {report.backend}", headers, rows)
    if report.unmatched_patterns:
        console.print(Text("Patterns of the spec that matched nothing:", style="bold"))
        for label in report.unmatched_patterns:
            console.print(user_text(f"  {label}"))
    if report.unmatched_inherited:
        inherited = plural(report.unmatched_inherited, "inherited pattern")
        console.print(f"({inherited} matched nothing)")
    skipped = sum(1 for n in report.nodes if n.outcome == "skipped")
    quantized = sum(1 for n in report.nodes if n.outcome == "quantized")
    left = sum(1 for n in report.nodes if n.outcome == "not converted")
    console.print(
        f"{plural(quantized, 'node')} quantized, {skipped} matched but skipped"
        + (f", {left} not converted by convert_fx." if left else ".")
    )
