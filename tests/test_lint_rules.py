"""Every lint rule against its data-driven cases in tests/lint_fixtures/<rule-name>.yaml.

Each fixture file names its rule and lists ``fail`` cases (a spec snippet and the expected
``[line, column]`` of each problem) and ``pass`` cases (a snippet with no problem).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from backend_spec.lint import all_rules
from lint_helpers import assert_rule_positions

FIXTURES = Path(__file__).parent / "lint_fixtures"


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
                cases.append(pytest.param(data["rule"], case["spec"], expected, id=case_id))
    return cases


@pytest.mark.parametrize(("rule", "spec", "expected"), _cases())
def test_rule_case(tmp_path: Path, rule: str, spec: str, expected: list[list[int]]) -> None:
    assert_rule_positions(tmp_path, spec, rule, expected)


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
