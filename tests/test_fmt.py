"""``bespec fmt``: canonical order and layout, comments kept, idempotent, meaning unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import backend_spec
from backend_spec.analysis.compare import diff
from backend_spec.cli.app import app
from backend_spec.spec.fmt import FormatError, format_text

ROOT = Path(__file__).resolve().parent.parent

MESSY = """\
# header comment
patterns:
- dtype_configs:
  - weight_dtype: qint8
    output_dtype: quint8
    input_dtype: {scale_min_lower_bound: 0.001, dtype: quint8}
  root_module: nn.Linear   # the root
  pattern: nn.Linear
  reference_quantized_module: nnqr.Linear
# the relu entry
- {observation_type: output_share_observer_with_input, pattern: nn.ReLU}
x-shared: &act {input_dtype: quint8, output_dtype: quint8}
dtype_configs:
  act: *act
name: messy
spec_version: 1
"""

EXPECTED = """\
# header comment
x-shared: &act {input_dtype: quint8, output_dtype: quint8}
spec_version: 1
name: messy
dtype_configs:
  act: *act
patterns:
  - pattern: nn.Linear
    dtype_configs:
      - input_dtype: {dtype: quint8, scale_min_lower_bound: 0.001}
        output_dtype: quint8
        weight_dtype: qint8
    root_module: nn.Linear # the root
    reference_quantized_module: nnqr.Linear
# the relu entry
  - {pattern: nn.ReLU, observation_type: output_share_observer_with_input}
"""


def test_canonical_order_layout_and_comments() -> None:
    assert format_text(MESSY) == EXPECTED


def test_meaning_is_kept_and_formatting_is_idempotent() -> None:
    once = format_text(MESSY)
    assert format_text(once) == once
    assert diff(backend_spec.loads(MESSY), backend_spec.loads(once)) == []


@pytest.mark.parametrize("name", ["tutorial", "native", "executorch"])
def test_checked_in_specs(name: str) -> None:
    text = (ROOT / "specs" / f"{name}.yaml").read_text()
    once = format_text(text)
    assert format_text(once) == once
    assert "# yaml-language-server" in once.splitlines()[0] or name != "tutorial"
    assert diff(backend_spec.loads(text), backend_spec.loads(once)) == []


def test_invalid_yaml_is_refused() -> None:
    with pytest.raises(FormatError):
        format_text("name: [unclosed\n")


def test_cli_check_and_write(tmp_path: Path) -> None:
    runner = CliRunner()
    messy = tmp_path / "messy.yaml"
    messy.write_text(MESSY)
    result = runner.invoke(app, ["fmt", "--check", str(messy)])
    assert result.exit_code == 1 and "would reformat" in result.stderr
    assert messy.read_text() == MESSY  # --check writes nothing
    assert runner.invoke(app, ["fmt", str(messy)]).exit_code == 0
    assert messy.read_text() == EXPECTED
    assert runner.invoke(app, ["fmt", "--check", str(messy)]).exit_code == 0
    assert list(tmp_path.iterdir()) == [messy]  # no temporary files left behind


def test_cli_toml_left_alone_and_misuse(tmp_path: Path) -> None:
    runner = CliRunner()
    toml = tmp_path / "spec.toml"
    toml.write_text('name = "t"\n')
    result = runner.invoke(app, ["fmt", "--check", str(toml)])
    assert result.exit_code == 0 and "TOML files are left as they are" in result.stderr
    assert runner.invoke(app, ["fmt", str(tmp_path / "missing.yaml")]).exit_code == 2
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [x\n")
    assert runner.invoke(app, ["fmt", str(broken)]).exit_code == 1
