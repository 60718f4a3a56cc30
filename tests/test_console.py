"""The console policy (width, colour, markup, trailing spaces) and the tables built on it."""

from __future__ import annotations

import io
import re

import pytest
from rich.text import Text
from typer.testing import CliRunner

from backend_spec.cli.app import app
from backend_spec.cli.render import console as policy
from backend_spec.cli.render.summary import counts, summary_text

runner = CliRunner()


class _Stream(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def test_width_follows_columns_in_pipes_and_a_default_otherwise(monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "63")
    assert policy.output_width(_Stream(tty=False)) == 63
    monkeypatch.delenv("COLUMNS")
    assert policy.output_width(_Stream(tty=False)) == policy.DEFAULT_WIDTH


def test_colour_only_on_terminals_and_never_with_no_color(monkeypatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert policy.use_color(_Stream(tty=True))
    assert not policy.use_color(_Stream(tty=False))
    monkeypatch.setenv("NO_COLOR", "1")
    assert not policy.use_color(_Stream(tty=True))


def _printed(monkeypatch, width: int, print_it) -> str:
    monkeypatch.setenv("COLUMNS", str(width))
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    print_it(policy.make_console())
    return out.getvalue()


ROWS = [
    ["1", "nni.ConvBnReLU2d", "weighted_op_quint8_fixed_qparams_neg1to1", "[bold]not markup[/]"],
    ["2", "(nn.Conv2d, nn.BatchNorm2d, nn.ReLU)", "", Text("styled", style="red")],
]


@pytest.mark.parametrize("width", [40, 80, 120])
def test_tables_never_split_words_nor_leave_trailing_spaces(monkeypatch, width: int) -> None:
    text = _printed(
        monkeypatch, width, lambda c: policy.print_table(c, "title", ("#", "a", "b", "c"), ROWS)
    )
    lines = text.splitlines()
    assert all(len(line) <= width for line in lines), text
    assert not any(line != line.rstrip() for line in lines)
    words = set(re.findall(r"\S+", text))
    for word in ("nni.ConvBnReLU2d", "weighted_op_quint8_fixed_qparams_neg1to1", "nn.BatchNorm2d,"):
        assert word in words, (width, text)
    assert "[bold]not" in text  # user text is never rich markup


def test_narrow_tables_become_blocks(monkeypatch) -> None:
    text = _printed(
        monkeypatch, 50, lambda c: policy.print_table(c, "t", ("#", "a", "b", "c"), ROWS, 2)
    )
    assert "1  nni.ConvBnReLU2d\n" in text
    assert "    b  weighted_op_quint8_fixed_qparams_neg1to1\n" in text


def test_column_widths_share_the_room() -> None:
    assert policy.column_widths([3, 5], [3, 20], 30) == [3, 20]
    assert policy.column_widths([3, 5, 5], [3, 40, 40], 30) == [3, 13, 14]
    assert policy.column_widths([30, 30], [30, 30], 50) is None


def test_show_builtin_at_80_columns(monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    result = runner.invoke(app, ["show", "x86"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("x86: ") and lines[0].endswith(" patterns")
    assert all(len(line) <= 80 and line == line.rstrip() for line in lines)
    assert "dtype configs  weighted_op_quint8" in result.stdout  # names, not a count
    assert "from           torch:x86" in result.stdout


def test_show_a_file_names_its_own_dtype_configs(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("COLUMNS", "300")  # wide enough for the long tmp_path origins
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "name: s\nextends: qnnpack\ndtype_configs:\n  my_int8: {input_dtype: quint8, "
        "output_dtype: quint8, weight_dtype: qint8}\npatterns:\n  - pattern: nn.Linear\n"
        "    dtype_configs: [my_int8]\n"
    )
    result = runner.invoke(app, ["show", str(spec)])
    assert result.exit_code == 0, result.output
    linear = next(line for line in result.stdout.splitlines() if " nn.Linear " in line)
    assert "my_int8" in linear and f"{spec}:6" in linear
    assert "torch:qnnpack" in result.stdout


def test_summary_counts_add_up_with_singular_and_plural() -> None:
    from backend_spec.names.vocabulary import builtin_backend_config

    config = builtin_backend_config("x86")
    n = counts(config)
    assert n["quantized"] + n["fusions"] + n["other"] == n["patterns"]
    assert policy.plural(1, "fusion") == "1 fusion" and policy.plural(0, "fusion") == "0 fusions"
    text = summary_text(config, "x86")
    assert f"with {n['patterns']} patterns ({n['quantized']} quantized, {n['fusions']} fusions" in (
        text
    )


@pytest.mark.parametrize("width", [50, 80])
def test_check_tables_never_split_names(monkeypatch, width: int) -> None:
    from backend_spec.check.results import CheckReport, ModelResult, PatternResult
    from backend_spec.cli.render.check import print_text

    long = "(nn.ConvTranspose1d, nn.BatchNorm1d)"
    report = CheckReport(
        "specs/x86.yaml",
        "x86",
        patterns=[
            PatternResult(long, "fail", "SQNR -1.9 dB < 20 dB", -1.9, "static quint8", "ptq", 0)
        ],
        models=[ModelResult("depthwise_hardswish_model", "pass", sqnr_db=31.8)],
    )
    text = _printed(monkeypatch, width, lambda c: print_text(report, console=c))
    lines = text.splitlines()
    assert all(len(line) <= width and line == line.rstrip() for line in lines), text
    words = set(re.findall(r"\S+", text))
    assert {"(nn.ConvTranspose1d,", "nn.BatchNorm1d)", "depthwise_hardswish_model"} <= words, text
