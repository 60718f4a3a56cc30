"""``bespec fmt``: canonical order and layout, comments kept, idempotent, meaning unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import backend_spec
from backend_spec.analysis.compare import diff
from backend_spec.cli.app import app
from backend_spec.specfile.fmt import FormatError, format_text, format_toml_text

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


def test_cli_misuse(tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["fmt", str(tmp_path / "missing.yaml")]).exit_code == 2
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [x\n")
    assert runner.invoke(app, ["fmt", str(broken)]).exit_code == 1
    bad_toml = tmp_path / "broken.toml"
    bad_toml.write_text("name = \n")
    result = runner.invoke(app, ["fmt", str(bad_toml)])
    assert result.exit_code == 1 and "broken.toml:1:8: BS101" in result.stderr
    bomb = ROOT / "tests" / "bad_specs" / "alias_bomb.yaml"
    result = runner.invoke(app, ["fmt", "--check", str(bomb)])  # refused under the loader's caps
    assert result.exit_code == 1 and "BS105" in result.stderr


ANCHORED = """\
# header
spec_version: 1
name: anchored

x-int8: &int8 {input_dtype: quint8, output_dtype: quint8, weight_dtype: qint8}

patterns:
  - pattern: nn.Linear
    dtype_configs: [*int8]

dtype_configs:
  int8: *int8
"""


def test_x_keys_stay_where_written_and_blank_lines_stay_single() -> None:
    result = format_text(ANCHORED)
    lines = result.splitlines()
    assert lines[:3] == ["# header", "spec_version: 1", "name: anchored"]
    assert lines.index("dtype_configs:") < lines.index("patterns:")
    assert lines.index(
        "x-int8: &int8 {input_dtype: quint8, output_dtype: quint8, weight_dtype: qint8}"
    ) < lines.index("dtype_configs:")
    assert "\n\n\n" not in result and not result.endswith("\n\n")
    assert format_text(result) == result
    assert diff(backend_spec.loads(ANCHORED), backend_spec.loads(result)) == []


MESSY_TOML = """\
#:schema backend-spec.schema.json
# header comment
name = "messy"   # the name
spec_version = 1


[dtype_configs.act]
output_dtype = "quint8"
input_dtype = {scale_min_lower_bound=0.001, dtype="quint8"}

# the linear entry
[[patterns]]
root_module = "nn.Linear"
# the pattern itself
pattern = "nn.Linear"
dtype_configs = ["act"]
"""

EXPECTED_TOML = """\
#:schema backend-spec.schema.json
# header comment
spec_version = 1
name = "messy"   # the name

[dtype_configs.act]
input_dtype = { dtype = "quint8", scale_min_lower_bound = 0.001 }
output_dtype = "quint8"

# the linear entry
[[patterns]]
# the pattern itself
pattern = "nn.Linear"
dtype_configs = ["act"]
root_module = "nn.Linear"
"""


def test_toml_canonical_order_with_comments_kept() -> None:
    assert format_toml_text(MESSY_TOML) == EXPECTED_TOML
    assert format_toml_text(EXPECTED_TOML) == EXPECTED_TOML
    before = backend_spec.loads(MESSY_TOML, format="toml")
    assert diff(before, backend_spec.loads(EXPECTED_TOML, format="toml")) == []


def test_check_diff_shows_the_change(tmp_path: Path) -> None:
    spec = tmp_path / "messy.toml"
    spec.write_text(MESSY_TOML)
    result = CliRunner().invoke(app, ["fmt", "--check", "--diff", str(spec)])
    assert result.exit_code == 1
    assert f"--- {spec}\n+++ {spec} (formatted)\n" in result.stdout
    assert '\n-input_dtype = {scale_min_lower_bound=0.001, dtype="quint8"}\n' in result.stdout
    assert '\n+input_dtype = { dtype = "quint8", scale_min_lower_bound = 0.001 }\n' in result.stdout
    assert spec.read_text() == MESSY_TOML
    assert CliRunner().invoke(app, ["fmt", str(spec)]).exit_code == 0
    assert spec.read_text() == EXPECTED_TOML


def test_the_repositorys_own_specs_are_formatted() -> None:
    specs = sorted([*(ROOT / "specs").glob("*.yaml"), *(ROOT / "specs").glob("*.toml")])
    assert any(p.suffix == ".toml" for p in specs)
    result = CliRunner().invoke(app, ["fmt", "--check", "--diff", *map(str, specs)])
    assert result.exit_code == 0, result.output


def test_canonical_keys_keep_x_keys_before_what_followed_them() -> None:
    from backend_spec.specfile.fmt import TOP_LEVEL, canonical_keys

    keys = ["spec_version", "name", "x-a", "patterns", "x-b", "dtype_configs", "zz", "x-end"]
    assert canonical_keys(keys, TOP_LEVEL, "x-") == [
        "spec_version", "name", "x-a", "x-b", "dtype_configs", "patterns", "zz", "x-end",
    ]  # fmt: skip
    assert canonical_keys(["x-top", "name", "spec_version"], TOP_LEVEL, "x-")[0] == "x-top"
    many = [f"x-{i}" for i in range(100_000)] + ["name"]  # linear, not quadratic
    assert canonical_keys(many, TOP_LEVEL, "x-") == many


def test_toml_keys_are_written_key_equals_value() -> None:
    text = 'spec_version = 1\n"name"   =  "x"  # kept\n[dtype_configs.a]\ninput_dtype=  "quint8"\n'
    assert format_toml_text(text) == (
        'spec_version = 1\n"name" = "x"  # kept\n[dtype_configs.a]\ninput_dtype = "quint8"\n'
    )


def test_invisible_line_breaks_are_refused_not_rewritten() -> None:
    text = "patterns: []\nname: a  # note\u2029 x: 1\n"
    with pytest.raises(FormatError, match="line 2: BS110"):
        format_text(text)
