"""The code registry: every code the package can emit is registered once and documented."""

from __future__ import annotations

import re
from pathlib import Path

from backend_spec import codes
from backend_spec.cli.render.reference import PAGES
from backend_spec.lint.registry import all_rules

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "backend_spec"


def _source_code_ids() -> set[str]:
    """Every ``BSnnn`` written in the package, and every ``codes.NAME`` it uses."""
    found: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        if path.name == "codes.py":
            continue
        text = path.read_text(encoding="utf-8")
        found.update(re.findall(r"\bBS\d{3}\b", text))
        for name in re.findall(r"\bcodes\.([A-Z][A-Z0-9_]+)\b", text):
            found.add(getattr(codes, name).id)
    return found


def test_every_code_used_in_the_package_is_registered() -> None:
    used = _source_code_ids()
    assert used, "the scan found no codes at all"
    assert used <= set(codes.REGISTRY), sorted(used - set(codes.REGISTRY))


def test_registry_entries_are_complete_and_unique() -> None:
    slugs = [c.slug for c in codes.REGISTRY.values()]
    assert len(slugs) == len(set(slugs)), "two codes share a slug"
    for code in codes.REGISTRY.values():
        assert re.fullmatch(r"BS\d{3}", code.id)
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", code.slug), code.slug
        assert code.summary, code.id
        assert code == code.id and str(code) == code.id


def test_lint_rules_take_their_codes_from_the_registry() -> None:
    for rule in all_rules():
        code = codes.lookup(rule.id)
        assert code is not None and code.id.startswith(("BS5", "BS7"))  # 7xx: pt2e rules
        assert (rule.name, rule.severity, rule.summary) == (code.slug, code.severity, code.summary)
        assert rule.doc, f"{rule.id} has no docstring to document it"


def test_generated_pages_are_current() -> None:
    for name, render in PAGES.items():
        path = ROOT / "docs" / name
        assert path.read_text(encoding="utf-8") == render(), f"{path} is stale: run `make docs`"


def test_every_registered_code_is_documented() -> None:
    page = (ROOT / "docs" / "codes.md").read_text(encoding="utf-8")
    for code in codes.REGISTRY.values():
        assert f"| {code.id} | {code.slug} |" in page


def test_a_diagnostic_takes_severity_and_hint_from_its_code() -> None:
    from backend_spec.diagnostics import Diagnostic

    warning = Diagnostic("f.yaml", 1, 1, codes.UNUSED_DTYPE_CONFIG, "unused")
    assert warning.severity is codes.Severity.WARNING
    error = Diagnostic("f.yaml", 1, 1, codes.YAML_TAG, "tag")
    assert (error.severity, error.hint) == (codes.Severity.ERROR, codes.YAML_TAG.hint)
    assert error.hint  # the test means something only if the code has a hint
    told = Diagnostic("f.yaml", 1, 1, "BS106", "tag", "", codes.Severity.WARNING)
    assert told.code is codes.YAML_TAG  # an id is looked up in the registry
    assert (told.hint, told.severity) == ("", codes.Severity.WARNING)


def test_an_unregistered_code_is_refused() -> None:
    import pytest

    from backend_spec.diagnostics import Diagnostic

    with pytest.raises(ValueError, match="BS999"):
        Diagnostic("f.yaml", 1, 1, "BS999", "nothing")


def test_no_call_site_retypes_a_registry_hint() -> None:
    # A hint written again by hand drifts from the registry's; the default is the registry's.
    import ast

    hints = {c.hint for c in codes.REGISTRY.values() if c.hint}
    retyped = [
        f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}"
        for path in PACKAGE.rglob("*.py")
        if path.name != "codes.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and node.value in hints
    ]
    assert not retyped, retyped
