"""docs/format.md, the format reference: current key tables, examples that load, and a README
that points into the repository only."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import backend_spec
from backend_spec import codes
from backend_spec.cli.render.reference import KEY_TABLES, fill_key_tables
from backend_spec.specfile.models import DTypeConfigModel, PatternModel, SpecModel

ROOT = Path(__file__).resolve().parent.parent
FORMAT = (ROOT / "docs" / "format.md").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")

EXAMPLES = [
    (fmt, body)
    for fmt, body in re.findall(r"```(yaml|toml)\n(.*?)```", FORMAT, re.DOTALL)
    if re.search(r"^name\s*[:=]", body, re.MULTILINE)
]


def test_key_tables_are_current() -> None:
    assert fill_key_tables(FORMAT) == FORMAT, "run `make docs`"
    for name in KEY_TABLES:
        assert f"<!-- keys: {name} -->" in FORMAT


def test_every_key_of_the_format_is_in_a_table() -> None:
    for model in (SpecModel, PatternModel, DTypeConfigModel):
        for key in model.model_fields:
            assert f"| `{key}` |" in FORMAT, key


@pytest.mark.parametrize(
    ("fmt", "body"), EXAMPLES, ids=[b.split("name")[1][:30] for _, b in EXAMPLES]
)
def test_every_complete_example_loads(fmt: str, body: str) -> None:
    if "my_pkg." in body:  # examples of names outside the allowed roots: refused, not imported
        with pytest.raises(backend_spec.SpecError) as info:
            backend_spec.loads(body, format=fmt)
        assert {d.code for d in info.value.diagnostics} == {codes.OUTSIDE_ROOTS}
    else:
        assert backend_spec.loads(body, format=fmt).configs


def test_the_examples_cover_the_npu_and_toml() -> None:
    names = {re.search(r"^name\s*[:=]\s*\"?(\w+)", b, re.MULTILINE)[1] for _, b in EXAMPLES}
    assert "my_npu" in names
    assert any(fmt == "toml" for fmt, _ in EXAMPLES)
    npu = next(b for _, b in EXAMPLES if "name: my_npu" in b)
    assert "dtype: qint8" in npu and "per-channel" in FORMAT.lower()


def test_readme_and_docstrings_point_inside_the_repository() -> None:
    assert "spec-format.md" not in README and "shared/" not in README
    assert "docs/format.md" in README
    assert "docs/format.md" in (backend_spec.__doc__ or "")
    for link in re.findall(r"\]\(([^)#]+)", README):
        if not link.startswith("http"):
            assert (ROOT / link).exists(), link


def test_codes_named_in_the_reference_mean_what_it_says() -> None:
    assert f"is an error (`{codes.SPEC_VERSION}`)" in FORMAT  # an unknown spec_version
    assert f"is an error (`{codes.UNKNOWN_KEY}`)" in FORMAT  # an unknown key
    version_1 = FORMAT.split("\n## Version 2:")[0]  # the version 2 sections name their own
    assert set(re.findall(r"`(BS\d{3})`", version_1)) <= {codes.SPEC_VERSION, codes.UNKNOWN_KEY}
