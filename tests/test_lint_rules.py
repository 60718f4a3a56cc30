"""Every lint rule against its data-driven cases in tests/lint_fixtures/<rule-name>.yaml.

Each fixture file names its rule and lists ``fail`` cases (a spec snippet and the expected
``[line, column]`` of each problem) and ``pass`` cases (a snippet with no problem). A case may
name ``allow_imports``: modules of tests/fixtures its spec uses (such as ``spconv_like``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from backend_spec.diagnostics import Diagnostic
from backend_spec.lint import Selection, all_rules, lint_path, select_rules

FIXTURES = Path(__file__).parent / "lint_fixtures"

LOADER_PREFIXES = ("BS1", "BS2", "BS3", "BS4", "BS9")


def lint_snippet(
    folder: Path, text: str, rule: str, suffix: str = ".yaml", allow: tuple[str, ...] = ()
) -> list[Diagnostic]:
    """Every diagnostic of ``text`` (as a spec file) with only ``rule`` selected."""
    path = folder / f"snippet{suffix}"
    path.write_text(text, encoding="utf-8")
    return lint_path(path, select_rules(Selection(select=(rule,))), allow)


def assert_rule_positions(
    folder: Path,
    text: str,
    rule: str,
    expected: list[list[int]] | list[tuple[int, int]],
    allow: tuple[str, ...] = (),
    says: tuple[str, ...] = (),
) -> None:
    """``text`` loads without loader errors, and ``rule`` reports exactly at ``expected``,
    each message saying every text of ``says``."""
    found = lint_snippet(folder, text, rule, allow=allow)
    loader = [str(d) for d in found if d.code.startswith(LOADER_PREFIXES)]
    assert not loader, f"the snippet itself does not load: {loader}"
    others = [str(d) for d in found if d.code != rule]
    assert not others, f"other codes reported: {others}"
    positions = [[d.line, d.column] for d in found]
    assert positions == [list(p) for p in expected], "\n".join(str(d) for d in found)
    assert all(text in d.message for d in found for text in says), [d.message for d in found]


def _load(path: Path) -> dict[str, Any]:
    return YAML(typ="safe").load(path.read_text(encoding="utf-8"))


def _cases() -> list[Any]:
    cases = []
    for path in sorted(FIXTURES.glob("*.yaml")):
        data = _load(path)
        for kind in ("fail", "pass"):
            for case in data.get(kind, []):
                expected = case.get("expected", []) if kind == "fail" else []
                case_id = f"{path.stem}:{kind}:{case['name']}"
                allow = tuple(case.get("allow_imports", ()))
                says = tuple(case.get("says", ()))
                param = (data["rule"], case["spec"], expected, allow, says)
                cases.append(pytest.param(*param, id=case_id))
    return cases


@pytest.mark.parametrize(("rule", "spec", "expected", "allow", "says"), _cases())
def test_rule_case(
    tmp_path: Path,
    rule: str,
    spec: str,
    expected: list[list[int]],
    allow: tuple[str, ...],
    says: tuple[str, ...],
) -> None:
    assert_rule_positions(tmp_path, spec, rule, expected, allow, says)


def test_every_rule_has_a_fixture_with_fail_and_pass_cases() -> None:
    by_rule = {}
    for path in FIXTURES.glob("*.yaml"):
        data = _load(path)
        by_rule[data["rule"]] = (path.stem, data)
    for rule in all_rules():
        assert rule.id in by_rule, f"{rule.id} has no fixture"
        stem, data = by_rule[rule.id]
        assert stem == rule.name, f"fixture of {rule.id} should be named {rule.name}.yaml"
        assert data.get("fail") and data.get("pass"), f"{stem}: needs fail and pass cases"
        assert all(case.get("expected") for case in data["fail"]), f"{stem}: fail w/o expected"
