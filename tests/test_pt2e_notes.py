"""BS701 notes only where pt2e is in play: a file that uses no pt2e key gets one line that counts
the entries the pt2e quantizer skips; a file that uses one (or an ``extends`` base that does),
or a user who selects the rule by name (``--select``, the project's ``select``), gets one note
per entry."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from backend_spec.cli.app import app

runner = CliRunner()

SKIPPED = """\
  - pattern: nn.Identity
    dtype_configs: [int8]
  - pattern: nnqat.Linear
    dtype_configs: [int8]
  - pattern: method:contiguous
    dtype_configs: [int8]
  - pattern: nnqat.Conv2d
    dtype_configs: [int8]
"""
HEAD = "name: b\ndtype_configs:\n  int8: {input_dtype: quint8, output_dtype: quint8}\n"
FX_ONLY = HEAD + "patterns:\n" + SKIPPED
RELU_QUANTIZE = (
    "  - pattern: nn.ReLU\n    dtype_configs: [int8]\n    quantize: if_input_quantized\n"
)
WITH_PT2E = "spec_version: 2\n" + HEAD + "patterns:\n" + RELU_QUANTIZE + SKIPPED
BASE = "spec_version: 2\n" + HEAD + "patterns:\n" + RELU_QUANTIZE
CHILD = "name: c\nextends: base.yaml\ndtype_configs:\n  int8: {input_dtype: quint8}\npatterns:\n"

#: (case, spec text, lint arguments, the project's [tool.bespec.lint], BS701 lines expected)
CASES = [
    ("fx only: one summary line", FX_ONLY, [], "", 1),
    ("fx only, --select BS701", FX_ONLY, ["--select", "BS701"], "", 4),
    ("fx only, --select the slug", FX_ONLY, ["--select", "no-pt2e-equivalent"], "", 4),
    ("fx only, the project selects it", FX_ONLY, [], 'select = ["BS5", "BS701"]', 4),
    ("a pt2e key in the file", WITH_PT2E, [], "", 4),
    ("a pt2e key in the extends base", CHILD + SKIPPED, [], "", 4),
]


@pytest.mark.parametrize(
    ("case", "text", "args", "project", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_pt2e_notes_only_where_pt2e_is_in_play(
    tmp_path: Path, monkeypatch, case, text, args, project, expected
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "base.yaml").write_text(BASE)
    (tmp_path / "pyproject.toml").write_text(f"[tool.bespec.lint]\n{project}\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    result = runner.invoke(app, ["lint", str(spec), "--no-cache", *args])
    assert result.exit_code == 0, result.output
    notes = [line for line in result.output.splitlines() if "info BS701" in line]
    assert len(notes) == expected, result.output
    if expected == 1:
        assert "4 entries have no pt2e equivalent (nn.Identity, nnqat.Linear, " in notes[0]
        assert "and 1 more" in notes[0] and "--select BS701" in result.output
        assert notes[0].startswith(f"{spec}:5:")  # at the first entry pt2e skips
    else:
        assert all("has no pt2e equivalent" in note for note in notes)
