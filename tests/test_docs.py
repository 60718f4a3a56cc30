"""``bespec docs``: a Markdown page whose tables are well formed and cover every DTypeConfig."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from backend_spec.cli.app import app
from backend_spec.cli.render.docs import backend_markdown, dtype_text
from backend_spec.names.vocabulary import builtin_backend_config

ROOT = Path(__file__).resolve().parent.parent


def tables(markdown: str) -> list[list[list[str]]]:
    """Every Markdown table as rows of cells (header and separator included)."""
    out: list[list[list[str]]] = []
    current: list[list[str]] = []
    for line in [*markdown.splitlines(), ""]:
        if line.startswith("|"):
            current.append([c.strip() for c in line.strip("|").split(" | ")])
        elif current:
            out.append(current)
            current = []
    return out


def test_tutorial_page() -> None:
    result = CliRunner().invoke(app, ["docs", str(ROOT / "specs" / "tutorial.yaml")])
    assert result.exit_code == 0, result.output
    page = result.stdout
    assert page.startswith("# Backend `my_backend`")
    assert "5 patterns: 4 quantized, 1 fusion, 1 distinct dtype config." in page
    fusions, linear, conv = tables(page)
    assert fusions[2] == ["`(nn.Conv2d, nn.ReLU)`", "nni.ConvReLU2d", "sequential nni.ConvReLU2d"]
    assert linear[2] == [
        "`nn.Linear`",
        "own observer",
        "quint8 (0..255, scale ≥ 0.000244141)",
        "qint8",
        "quint8 (0..255, scale ≥ 0.000244141)",
        "float",
        "",
        "nn.Linear / nnqat.Linear / nnqr.Linear",
    ]
    assert [row[0] for row in linear[2:]] == ["`nn.Linear`", "`nnqat.Linear`"]
    assert [row[0] for row in conv[2:]] == [
        "`(nn.Conv2d, nn.ReLU)`",
        "`nni.ConvReLU2d`",
        "`nniqat.ConvReLU2d`",
    ]


def test_builtin_page_covers_every_dtype_config() -> None:
    config = builtin_backend_config("x86")
    found = tables(backend_markdown(config))
    for table in found:
        assert all(len(row) == len(table[0]) for row in table), table[0]
    quantized_rows = sum(len(t) - 2 for t in found if t[0][0] == "pattern" and len(t[0]) == 8)
    assert quantized_rows == sum(len(c.dtype_configs) for c in config.configs)
    fusion_rows = sum(len(t) - 2 for t in found if len(t[0]) == 3)
    assert fusion_rows == sum(1 for c in config.configs if c.fuser_method is not None)


@pytest.mark.parametrize(
    ("options", "text"),
    [
        ({}, "qint8"),
        (
            {"scale_exact_match": 1 / 256, "zero_point_exact_match": 0},
            "qint8 (scale = 0.00390625, zp = 0)",
        ),
        (
            {"granularity": "per_channel", "quant_min_lower_bound": -127},
            "qint8 (-127.., per_channel)",
        ),
        (
            {"observer": "histogram", "reduce_range": True},
            "qint8 (observer histogram, reduce_range)",
        ),
    ],
)
def test_dtype_text(options, text) -> None:
    from backend_spec._torch import torch
    from backend_spec.ir import DTypeMapping

    assert dtype_text(DTypeMapping.of(torch.qint8, options)) == text


def test_output_file_and_misuse(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "native.md"
    assert runner.invoke(app, ["docs", "native", "-o", str(out)]).exit_code == 0
    assert out.read_text().startswith("# Backend `native`")
    assert runner.invoke(app, ["docs", "nosuch"]).exit_code == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: b\npatterns:\n  - pattern: nn.Nope\n")
    assert runner.invoke(app, ["docs", str(bad)]).exit_code == 1
