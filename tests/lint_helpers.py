"""Test helper for lint rules: lint a spec snippet and compare positions with expectations."""

from __future__ import annotations

from pathlib import Path

from backend_spec.diagnostics import Diagnostic
from backend_spec.lint import Selection, lint_path, select_rules

LOADER_PREFIXES = ("BS1", "BS2", "BS3", "BS4", "BS9")


def lint_snippet(folder: Path, text: str, rule: str, suffix: str = ".yaml") -> list[Diagnostic]:
    """Every diagnostic of ``text`` (as a spec file) with only ``rule`` selected."""
    path = folder / f"snippet{suffix}"
    path.write_text(text, encoding="utf-8")
    return lint_path(path, select_rules(Selection(select=(rule,))))


def assert_rule_positions(
    folder: Path, text: str, rule: str, expected: list[list[int]] | list[tuple[int, int]]
) -> None:
    """``text`` loads without loader errors, and ``rule`` reports exactly at ``expected``."""
    found = lint_snippet(folder, text, rule)
    loader = [str(d) for d in found if d.code.startswith(LOADER_PREFIXES)]
    assert not loader, f"the snippet itself does not load: {loader}"
    others = [str(d) for d in found if d.code != rule]
    assert not others, f"other codes reported: {others}"
    positions = [[d.line, d.column] for d in found]
    assert positions == [list(p) for p in expected], "\n".join(str(d) for d in found)
