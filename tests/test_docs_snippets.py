"""The docs as a new user reads them: docs/format.md's Contents list every section, the pt2e keys
each have a section of their own (and stay out of the FX tables), every code the docs cite is
in the registry, and the Python snippets of the README and docs/format.md run as written.

The snippets run in a folder that holds the repository's ``specs/`` and, as ``NAME.yaml``, each
complete YAML example of docs/format.md (a snippet that loads ``my_npu.yaml`` loads the worked
example the page just showed)."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

from backend_spec.codes import REGISTRY
from backend_spec.specfile.fields import PT2E_PATTERN_FIELDS

ROOT = Path(__file__).resolve().parent.parent
FORMAT = (ROOT / "docs" / "format.md").read_text(encoding="utf-8")
PAGES = {
    path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8")
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
}
SNIPPETS = [
    (page, index, body)
    for page in ("README.md", "docs/format.md")
    for index, body in enumerate(re.findall(r"```python\n(.*?)```", PAGES[page], re.DOTALL))
]
#: The pt2e-only top-level keys (the pattern ones are the field table's).
PT2E_SPEC_KEYS = ("graph_inputs", "input_sharing")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_contents_list_every_section_and_every_link_lands() -> None:
    contents = FORMAT.split("## Contents\n", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^- \[(.+?)\]\(#(.+?)\)$", contents, re.MULTILINE)
    headings = [h for h in re.findall(r"^## (.+)$", FORMAT, re.MULTILINE) if h != "Contents"]
    assert [title for title, _ in listed] == headings
    assert all(anchor == slug(title) for title, anchor in listed)
    assert {"QAT in pt2e", "Exporting a pt2e Quantizer", "pt2e keys"} <= set(headings)
    anchors = {slug(h) for h in re.findall(r"^#+ (.+)$", FORMAT, re.MULTILINE)}
    for anchor in re.findall(r"\]\(#([^)]+)\)", FORMAT):
        assert anchor in anchors, anchor


def test_each_pt2e_key_has_its_own_section_and_stays_out_of_the_fx_tables() -> None:
    fx_reference = FORMAT.split("\n## Worked examples\n", 1)[0]
    for key in (*PT2E_PATTERN_FIELDS, *PT2E_SPEC_KEYS):
        assert f"\n### `{key}`\n" in FORMAT, key
        assert f"| `{key}` |" not in fx_reference, key
    assert len(PT2E_PATTERN_FIELDS) == 16


@pytest.mark.parametrize("page", sorted(PAGES))
def test_every_cited_code_exists(page: str) -> None:
    cited = set(re.findall(r"\bBS\d{3}\b", PAGES[page]))
    assert cited <= set(REGISTRY), sorted(cited - set(REGISTRY))


def _examples() -> dict[str, str]:
    """docs/format.md's complete YAML examples, by the name they declare (first one wins)."""
    found: dict[str, str] = {}
    for body in re.findall(r"```yaml\n(.*?)```", FORMAT, re.DOTALL):
        name = re.search(r"^name:\s*(\w+)", body, re.MULTILINE)
        if name:
            found.setdefault(name[1], body)
    return found


@pytest.mark.slow
@pytest.mark.parametrize(
    ("page", "index", "body"), SNIPPETS, ids=[f"{p}#{i}" for p, i, _ in SNIPPETS]
)
def test_python_snippets_run_as_written(tmp_path: Path, monkeypatch, page, index, body) -> None:
    (tmp_path / "specs").symlink_to(ROOT / "specs")
    for name, text in _examples().items():
        (tmp_path / f"{name}.yaml").write_text(text, encoding="utf-8")
    script = tmp_path / "snippet.py"
    script.write_text(body, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    runpy.run_path(str(script), run_name="__main__")


def test_the_architecture_page_describes_the_code_not_the_work_on_it() -> None:
    page = PAGES["docs/architecture.md"]
    assert not re.search(r"\b[Ii]ssue \d+", page)
    assert "Not yet done" not in page and "What is left" not in page
