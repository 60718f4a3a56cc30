"""Inline suppressions (``# noqa: CODE``, ``# bespec: noqa: CODE``) in YAML and TOML specs.

One table of cases: a spec's text and the findings that remain after its comments, as
``"LINE:CODE"`` in report order. Every rule runs, as ``bespec lint`` runs them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from backend_spec.cli.app import app
from backend_spec.lint import lint_path, noqa
from backend_spec.lint.noqa import MAX_DIRECTIVES
from backend_spec.lint.runner import compile_report
from backend_spec.specfile.fmt import format_text, format_toml_text

# A spec with one unused dtype config ('spare', line 4): one BS507 to silence.
YAML_SPARE = """\
name: b
dtype_configs:
  used: {{input_dtype: quint8, output_dtype: quint8}}
  spare: {{input_dtype: qint8, output_dtype: qint8}}{comment}
patterns:
  - pattern: nn.ReLU
    dtype_configs: [used]
"""

# The same in TOML: BS507 is reported on the [dtype_configs.spare] header (line 5).
TOML_SPARE = """\
name = "b"
[dtype_configs.used]
input_dtype = "quint8"
output_dtype = "quint8"
[dtype_configs.spare]{comment}
input_dtype = "qint8"
output_dtype = "qint8"
[[patterns]]
pattern = "nn.ReLU"
dtype_configs = ["used"]
"""


def yaml_spare(comment: str = "", before: str = "") -> str:
    return before + YAML_SPARE.format(comment=comment)


def toml_spare(comment: str = "", before: str = "") -> str:
    return before + TOML_SPARE.format(comment=comment)


CASES = [
    # -- YAML: what silences ---------------------------------------------------------------
    ("yaml-line", "yaml", yaml_spare("  # noqa: BS507"), []),
    ("yaml-no-comment", "yaml", yaml_spare(), ["4:BS507"]),
    ("yaml-several-codes", "yaml", yaml_spare("  # noqa: BS508, BS507"), ["4:BS521"]),
    ("yaml-blank-separated", "yaml", yaml_spare("  # noqa:BS507 BS513"), ["4:BS521"]),
    ("yaml-any-case", "yaml", yaml_spare("  # NOQA: bs507"), []),
    ("yaml-after-a-reason", "yaml", yaml_spare("  # kept for int4  # noqa: BS507"), []),
    ("yaml-file-wide", "yaml", yaml_spare(before="# bespec: noqa: BS507\n"), []),
    (
        "yaml-file-wide-two-findings",
        "yaml",
        "# bespec: noqa: BS507\n"
        + yaml_spare().replace("  spare:", "  a: {input_dtype: qint8}\n  spare:"),
        [],
    ),
    # -- YAML: what does not ---------------------------------------------------------------
    ("yaml-another-code", "yaml", yaml_spare("  # noqa: BS508"), ["4:BS507", "4:BS521"]),
    ("yaml-unknown-code", "yaml", yaml_spare("  # noqa: BS999"), ["4:BS507", "4:BS521"]),
    ("yaml-bare", "yaml", yaml_spare("  # noqa"), ["4:BS507", "4:BS520"]),
    ("yaml-empty-list", "yaml", yaml_spare("  # noqa:"), ["4:BS507", "4:BS520"]),
    ("yaml-bare-file-wide", "yaml", yaml_spare(before="# bespec: noqa\n"), ["1:BS520", "5:BS507"]),
    (
        "yaml-file-wide-not-alone",
        "yaml",
        yaml_spare("  # bespec: noqa: BS507"),
        ["4:BS507", "4:BS520"],
    ),
    ("yaml-own-line", "yaml", yaml_spare(before="# noqa: BS507\n"), ["1:BS521", "5:BS507"]),
    ("yaml-mention-only", "yaml", yaml_spare("  # no noqa here"), ["4:BS507"]),
    (
        "yaml-file-wide-other-code",
        "yaml",
        yaml_spare(before="# bespec: noqa: BS508\n"),
        ["1:BS521", "5:BS507"],
    ),
    # -- YAML: errors stay errors ----------------------------------------------------------
    (
        "yaml-loader-error",
        "yaml",
        yaml_spare("  # noqa: BS507").replace("nn.ReLU", "nn.Relu  # noqa: BS300"),
        ["6:BS300", "6:BS521"],
    ),
    (
        "yaml-loader-error-file-wide",
        "yaml",
        yaml_spare("  # noqa: BS507", "# bespec: noqa: BS300\n").replace("nn.ReLU", "nn.Relu"),
        ["1:BS521", "7:BS300"],
    ),
    (
        "yaml-schema-error",
        "yaml",
        "name: b\nbogus: 1  # noqa: BS201\n",
        ["2:BS201", "2:BS521"],
    ),
    (
        "yaml-enforced-error",
        "yaml",
        "name: b\npatterns:\n  - pattern: nn.ReLU  # noqa: BS501\n  - pattern: nn.ReLU\n",
        ["3:BS501", "3:BS521"],
    ),
    # -- YAML: a # in a string is text -----------------------------------------------------
    (
        "yaml-double-quoted-key",
        "yaml",
        yaml_spare().replace("  spare:", '  "spare # noqa: BS507":'),
        ["4:BS507"],
    ),
    (
        "yaml-single-quoted-key",
        "yaml",
        yaml_spare().replace("  spare:", "  'spare # noqa: BS507':"),
        ["4:BS507"],
    ),
    (
        "yaml-quoted-then-comment",
        "yaml",
        yaml_spare("  # noqa: BS507").replace("  spare:", "  'spare # x':"),
        [],
    ),
    (
        "yaml-block-scalar",
        "yaml",
        yaml_spare(before="x-note: |\n  # bespec: noqa: BS507\n  text\n"),
        ["7:BS507"],
    ),
    (
        "yaml-block-scalar-header-comment",
        "yaml",
        yaml_spare(before="x-note: |  # bespec: noqa: BS507\n  text\n"),
        ["1:BS520", "6:BS507"],
    ),
    (
        "yaml-multi-line-quoted",
        "yaml",
        yaml_spare(before='x-note: "first\n  # bespec: noqa: BS507\n  last"\n'),
        ["7:BS507"],
    ),
    # -- YAML: line ends --------------------------------------------------------------------
    ("yaml-crlf", "yaml", yaml_spare("  # noqa: BS507").replace("\n", "\r\n"), []),
    # an invisible line break is refused wherever it is (BS110, which no comment silences)
    (
        "yaml-line-separator-in-a-comment",
        "yaml",
        yaml_spare("  # noqa: BS507", before="# a\u2028b  # noqa: BS110\n"),
        ["1:BS110"],
    ),
    (
        "yaml-line-separator-in-a-string",
        "yaml",
        yaml_spare(before='x-note: "a\u2028# bespec: noqa: BS507"\n'),
        ["1:BS110"],
    ),
    # -- TOML ------------------------------------------------------------------------------
    ("toml-crlf", "toml", toml_spare("  # noqa: BS507").replace("\n", "\r\n"), []),
    ("toml-line", "toml", toml_spare("  # noqa: BS507"), []),
    ("toml-no-comment", "toml", toml_spare(), ["5:BS507"]),
    ("toml-comment-without-blank", "toml", toml_spare("#noqa:BS507"), []),
    ("toml-several-codes", "toml", toml_spare("  # noqa: BS507, BS508"), ["5:BS521"]),
    ("toml-file-wide", "toml", toml_spare(before="# bespec: noqa: BS507\n"), []),
    ("toml-another-code", "toml", toml_spare("  # noqa: BS508"), ["5:BS507", "5:BS521"]),
    ("toml-bare", "toml", toml_spare("  # noqa"), ["5:BS507", "5:BS520"]),
    (
        "toml-inline-table",
        "toml",
        'name = "b"\n[dtype_configs]\nused = {input_dtype = "quint8"}\n'
        'spare = {input_dtype = "qint8"}  # noqa: BS507\n'
        '[[patterns]]\npattern = "nn.ReLU"\ndtype_configs = ["used"]\n',
        [],
    ),
    (
        "toml-loader-error",
        "toml",
        toml_spare("  # noqa: BS507").replace('"nn.ReLU"', '"nn.Relu"  # noqa: BS300'),
        ["9:BS300", "9:BS521"],
    ),
    (
        "toml-basic-string",
        "toml",
        toml_spare(before='x-note = "# bespec: noqa: BS507"\n'),
        ["6:BS507"],
    ),
    (
        "toml-literal-string-key",
        "toml",
        toml_spare().replace("[dtype_configs.spare]", "[dtype_configs.'spare # noqa: BS507']"),
        ["5:BS507"],
    ),
    (
        "toml-string-then-comment",
        "toml",
        toml_spare(before='x-note = "a # b"  # bespec: noqa: BS507\n'),
        ["1:BS520", "6:BS507"],
    ),
    (
        "toml-multi-line-string",
        "toml",
        toml_spare(before='x-note = """\n# bespec: noqa: BS507\n"""\n'),
        ["8:BS507"],
    ),
    (
        "toml-multi-line-literal",
        "toml",
        toml_spare(before="x-note = '''\nx # noqa\n'''\n"),
        ["8:BS507"],
    ),
]


def remaining(path: Path) -> list[str]:
    return [f"{d.line}:{d.code}" for d in lint_path(path)]


@pytest.mark.parametrize(
    ("fmt", "text", "expected"), [pytest.param(*case[1:], id=case[0]) for case in CASES]
)
def test_suppression(tmp_path: Path, fmt: str, text: str, expected: list[str]) -> None:
    path = tmp_path / f"spec.{fmt}"
    path.write_text(text, encoding="utf-8")
    assert remaining(path) == expected


def test_loader_errors_stay_errors_and_the_comment_says_why(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml_spare().replace("nn.ReLU", "nn.Relu  # noqa: BS300"), encoding="utf-8")
    result = CliRunner().invoke(app, ["lint", str(path)])
    assert result.exit_code == 1
    assert "BS300" in result.output and "cannot be suppressed" in result.output


def test_compile_hides_a_silenced_warning(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    for comment, shown in (("", ["BS507"]), ("  # noqa: BS507", [])):
        path.write_text(yaml_spare(comment), encoding="utf-8")
        compiled, found = compile_report(path)
        assert compiled is not None
        assert [d.code for d in found] == shown


def test_deselected_codes_are_not_unused(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml_spare("  # noqa: BS507"), encoding="utf-8")
    result = CliRunner().invoke(app, ["lint", "--ignore", "BS507", str(path)])
    assert result.exit_code == 0 and "BS521" not in result.output, result.output


@pytest.mark.parametrize(
    ("fmt", "text", "render"),
    [
        ("yaml", yaml_spare("  # noqa: BS507", "# bespec: noqa: BS508\n"), format_text),
        # Keys out of order, so that fmt moves lines: the comments must move with them.
        (
            "yaml",
            "dtype_configs:\n  spare: {output_dtype: qint8, input_dtype: qint8}  # noqa: BS507\n"
            "  used: {input_dtype: quint8}\nname: b\n"
            "patterns:\n  - dtype_configs: [used]\n    pattern: nn.ReLU\n",
            format_text,
        ),
        ("toml", toml_spare("  # noqa: BS507", "# bespec: noqa: BS508\n"), format_toml_text),
        (
            "toml",
            toml_spare("  # noqa: BS507").replace(
                'pattern = "nn.ReLU"\ndtype_configs = ["used"]',
                'dtype_configs = ["used"]\npattern = "method:veiw"  # noqa: BS512',
            ),
            format_toml_text,
        ),
    ],
)
def test_fmt_keeps_the_comments_on_their_lines(
    tmp_path: Path, fmt: str, text: str, render: object
) -> None:
    before, after = tmp_path / f"before.{fmt}", tmp_path / f"after.{fmt}"
    before.write_text(text, encoding="utf-8")
    formatted = render(text)  # type: ignore[operator]
    after.write_text(formatted, encoding="utf-8")
    assert formatted.count("noqa") == text.count("noqa")
    codes_after = [f.split(":")[1] for f in remaining(after)]
    assert codes_after == [f.split(":")[1] for f in remaining(before)]
    assert not {"BS507", "BS512"} & set(codes_after), codes_after
    assert not [c for c in codes_after if c < "BS5"], "the case itself must load"


def test_too_many_comments_are_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A smaller cap, so that every finding fits under the diagnostics cap and can be counted.
    monkeypatch.setattr(noqa, "MAX_DIRECTIVES", 20)
    path = tmp_path / "spec.yaml"
    filler = "# noqa: BS507\n" * (20 + 50)
    path.write_text(yaml_spare(before=filler), encoding="utf-8")
    found = lint_path(path)
    unused = [d for d in found if d.code == "BS521"]
    capped = [d for d in found if d.code == "BS520"]
    assert len(unused) == 20 and len(capped) == 1
    assert capped[0].line == 20 + 1 and "not honoured" in capped[0].message


def test_a_line_is_read_once_however_often_it_says_noqa() -> None:
    from backend_spec.specfile.source import parse

    line = "name: b  # " + "noqa: BS507 " * 100_000
    doc = parse(line + "\n# noqa: BS508\n", "spec.yaml", "yaml")
    comments = doc.comments("noqa", MAX_DIRECTIVES)
    assert [(c.line, c.column, c.alone) for c in comments] == [(1, 10, False), (2, 1, True)]
