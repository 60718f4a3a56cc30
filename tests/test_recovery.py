"""Every problem in one pass: recovery across stages, one diagnostic per mistake at its value,
the loader's integer/input-type/dtype rules, and what compile enforces or warns about."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

import backend_spec
from backend_spec.cli.app import app
from backend_spec.diagnostics import Diagnostic, Severity
from backend_spec.lint import lint_path

MIXED = """\
name: mixed
dtype_configs:
  w8a8:
    input_dtype: {dtype: quint8, quant_min_lower_bound: 0.5}
    weight_dtype: qint8
  int_bias:
    input_dtype: quint8
    weight_dtype: qint8
    bias_dtype: int32
patterns:
  - pattern: nn.Linear
    dtype_configs: [int_bias]
  - pattern: [nn.ReLU, nn.Conv2d]
    observation_type: output_shares_observer
  - pattern: nn.Conv2d
    input_type_to_index: {weights: 1}
    dtype_configs: [w8a8]
  - pattern: nn.Linear
    root_module: nn.Lineer
  - pattern: 42
"""

SMELLS = """\
name: smells
dtype_configs:
  act:
    input_dtype: {dtype: quint8, quant_min_lower_bound: 0, quant_max_upper_bound: 300}
    output_dtype: quint8
  spare:
    input_dtype: quint8
patterns:
  - pattern: nn.ReLU
    dtype_configs: [act]
  - pattern: torch.nn.modules.activation.ReLU
  - pattern: [nn.Conv2d, nn.ReLU]
    fused_module: nni.ConvReLU2d
    fuser_method: {sequential: nni.ConvReLU2d}
  - pattern: nn.Conv2d
    dtype_configs: [act]
    root_module: nn.Conv2d
"""


def write(folder: Path, text: str, name: str = "spec.yaml") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def load_errors(folder: Path, text: str) -> list[Diagnostic]:
    """The diagnostics of loading ``text`` as a spec file (which must fail)."""
    with pytest.raises(backend_spec.SpecError) as info:
        backend_spec.load(write(folder, text))
    return info.value.diagnostics


def where(found: list[Diagnostic]) -> set[tuple[str, int]]:
    return {(d.code, d.line) for d in found}


def test_lint_reports_schema_name_and_semantic_problems_in_one_run(tmp_path: Path) -> None:
    found = lint_path(write(tmp_path, MIXED))
    assert {
        ("BS203", 4),  # a float where the bound is an integer
        ("BS513", 9),  # int32 bias on a weighted pattern
        ("BS501", 11),  # nn.Linear given again at line 18
        ("BS514", 13),  # reversed chain
        ("BS215", 14),  # bad observation type
        ("BS216", 16),  # unknown input type
        ("BS300", 19),  # a typo in a name
        ("BS203", 20),  # not a pattern
    } <= where(found), "\n".join(map(str, found))


def test_lint_finds_all_five_smells_next_to_a_schema_error(tmp_path: Path) -> None:
    found = lint_path(write(tmp_path, SMELLS))
    assert {
        ("BS212", 4),  # bound outside quint8
        ("BS507", 6),  # unused dtype config
        ("BS501", 9),  # shadowed duplicate
        ("BS502", 13),  # dead fusion (nni.ConvReLU2d is never quantized)
        ("BS505", 17),  # nn.Conv2d has no reference module
    } <= where(found), "\n".join(map(str, found))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "name: b\npatterns:\n"
            "  - pattern: nn.Conv2D\n"
            "  - pattern: nn.ReLU\n    dtype_configs: [nope]\n"
            "  - pattern: nn.Linear\n    observation_type: sideways\n",
            {("BS300", 3), ("BS401", 5), ("BS215", 7)},
        ),
        (
            "name: b\npatterns:\n"
            "  - pattern: nn.ReLU\n    observation_type: sideways\n"
            "  - pattern: nn.ReLU\n"
            "  - pattern: [nn.Conv2d, nn.BatchNorm2d, nn.ReLU]\n    fuser_method: fuse_conv_bn\n",
            {("BS215", 4), ("BS501", 3), ("BS511", 7)},
        ),
        (  # a reference to a config that failed validation is not reported again
            "name: b\ndtype_configs:\n  a: {input_dtype: quint9}\n"
            "patterns:\n  - pattern: nn.ReLU\n    dtype_configs: [a]\n",
            {("BS213", 3)},
        ),
    ],
    ids=["schema-name-reference", "schema-and-semantic", "no-follow-up-error"],
)
def test_load_reports_every_error_of_the_file_together(
    tmp_path: Path, text: str, expected: set[tuple[str, int]]
) -> None:
    assert where(load_errors(tmp_path, text)) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "name: b\npatterns:\n  - pattern: nn.Linear\n  - pattern: nn.Linear\n",
            {("BS501", 3)},
        ),
        (
            "name: b\npatterns:\n  - pattern: [nn.Conv2d, nn.BatchNorm2d, nn.ReLU]\n"
            "    fuser_method: fuse_conv_bn\n",
            {("BS511", 4)},
        ),
    ],
    ids=["duplicate", "fuser-arity"],
)
def test_load_refuses_files_that_do_not_mean_what_they_say(
    tmp_path: Path, text: str, expected: set[tuple[str, int]]
) -> None:
    found = load_errors(tmp_path, text)
    assert where(found) == expected
    assert all(d.severity is Severity.ERROR for d in found)


def test_compile_prints_lint_warnings_and_exits_0_only_without_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    smelly = write(tmp_path, "name: b\npatterns:\n  - pattern: [nn.ReLU, nn.Conv2d]\n")
    result = runner.invoke(app, ["compile", str(smelly)])
    assert result.exit_code == 0, result.output
    assert f"{smelly}:3:14: warning BS514" in result.output
    duplicate = write(
        tmp_path, "name: b\npatterns:\n  - pattern: nn.ReLU\n  - pattern: nn.ReLU\n", "dup.yaml"
    )
    result = runner.invoke(app, ["compile", str(duplicate)])
    assert result.exit_code == 1
    assert f"{duplicate}:3:14: error BS501" in result.output
    # the API raises for errors only
    assert backend_spec.load(smelly).configs
    # with errors, the warnings still come in the same report
    both = write(
        tmp_path,
        "name: b\npatterns:\n  - pattern: [nn.ReLU, nn.Conv2d]\n  - pattern: nn.Conv2D\n",
        "both.yaml",
    )
    result = runner.invoke(app, ["compile", str(both)])
    assert result.exit_code == 1
    assert f"{both}:3:14: warning BS514" in result.output
    assert f"{both}:4:14: error BS300" in result.output


def test_a_mistake_inside_an_anchor_is_reported_once_at_the_anchor(tmp_path: Path) -> None:
    text = (
        "name: b\n"
        "x-act: &act {dtype: quint8, quant_min_lower_bound: 0.5}\n"
        "x-entry: &entry\n  observation_type: sideways\n"
        "dtype_configs:\n"
        "  a: {input_dtype: *act, output_dtype: *act}\n"
        "  b: {input_dtype: *act}\n"
        "patterns:\n"
        "  - {pattern: nn.ReLU, dtype_configs: [a], <<: *entry}\n"
        "  - {pattern: nn.ReLU6, dtype_configs: [b], <<: *entry}\n"
    )
    found = load_errors(tmp_path, text)
    assert [(d.code, d.line, d.column) for d in found] == [("BS203", 2, 52), ("BS215", 4, 21)]


def test_one_diagnostic_per_mistake_with_the_value_as_written(tmp_path: Path) -> None:
    text = (
        "name: b\n"
        "patterns:\n"
        "  - pattern: 42\n"
        "  - pattern: nn.ReLU\n"
        "    dtype_configs: [{input_dtype: {dtype: quint8, scale_min_lower_bound: 2**-12}}]\n"
        "    num_tensor_args_to_observation_type:\n"
        "      1: input_output_not_observed\n"
        "      2: nonsense\n"
    )
    found = load_errors(tmp_path, text)
    messages = {d.line: d.message for d in found}
    assert len(found) == 3, found
    assert messages[3] == (
        "patterns[0].pattern must be an op name, or a list of 2\N{EN DASH}3 op names, got 42"
    )
    assert messages[5].endswith("scale_min_lower_bound must be a number, got '2**-12'")
    assert ".int" not in messages[5] and ".float" not in messages[5]
    assert messages[8] == "unknown observation type 'nonsense'"


@pytest.mark.parametrize(
    ("constraint", "ok"),
    [
        ("quant_min_lower_bound: 0.5", False),
        ("quant_min_lower_bound: 0.0", True),
        ("zero_point_exact_match: 0.0", True),
        ("zero_point_exact_match: 1.5", False),
        ("quant_max_upper_bound: true", False),
        ("scale_min_lower_bound: 1", True),
        ("scale_max_upper_bound: .inf", False),
    ],
)
def test_integer_fields_take_integers_and_integral_floats_alike(constraint: str, ok: bool) -> None:
    text = (
        "name: b\npatterns:\n  - pattern: nn.ReLU\n    dtype_configs:\n"
        f"      - input_dtype: {{dtype: quint8, {constraint}}}\n"
    )
    if ok:
        backend_spec.loads(text)
    else:
        with pytest.raises(backend_spec.SpecError):
            backend_spec.loads(text)


def test_input_types_are_torchs_with_suggestions() -> None:
    text = "name: b\npatterns:\n  - pattern: torch.addmm\n    input_type_to_index: {{{}: 1}}\n"
    backend_spec.loads(text.format("input: 0, weight: 2, bias"))
    with pytest.raises(backend_spec.SpecError) as info:
        backend_spec.loads(text.format("weights"))
    (problem,) = info.value.diagnostics
    assert (problem.code, problem.line, problem.column) == ("BS216", 4, 27)
    assert problem.hint == "did you mean 'weight'?"


def test_qualified_dtype_names_get_a_hint() -> None:
    text = (
        "name: b\npatterns:\n  - pattern: nn.Linear\n"
        "    dtype_configs: [{bias_dtype: torch.float}]\n"
    )
    with pytest.raises(backend_spec.SpecError) as info:
        backend_spec.loads(text)
    (problem,) = info.value.diagnostics
    assert problem.hint == "write 'float': dtypes are named without 'torch.'"


def test_lint_reads_and_validates_each_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from backend_spec.compiler import loader
    from backend_spec.lint import runner

    calls = {"read": 0, "validate": 0}
    read, validate = runner.read_source, loader.validate

    def counting_read(*args, **kwargs):
        calls["read"] += 1
        return read(*args, **kwargs)

    def counting_validate(*args, **kwargs):
        calls["validate"] += 1
        return validate(*args, **kwargs)

    monkeypatch.setattr(runner, "read_source", counting_read)
    monkeypatch.setattr(loader, "validate", counting_validate)
    lint_path(write(tmp_path, SMELLS))
    assert calls == {"read": 1, "validate": 1}


def test_a_duplicate_key_is_reported_with_the_other_problems(tmp_path: Path) -> None:
    text = "name: b\nname: c\npatterns:\n  - pattern: nn.Conv2D\n"
    found = load_errors(tmp_path, text)
    assert where(found) == {("BS107", 2), ("BS300", 4)}


def test_a_bad_inline_dtype_config_leaves_the_entrys_other_configs(tmp_path: Path) -> None:
    """Only the bad item is set aside: the entry still quantizes nni.ConvReLU2d, so the
    fusion is not reported dead."""
    text = (
        "name: b\npatterns:\n"
        "  - pattern: [nn.Conv2d, nn.ReLU]\n"
        "    fused_module: nni.ConvReLU2d\n"
        "    fuser_method: {sequential: nni.ConvReLU2d}\n"
        "  - pattern: nni.ConvReLU2d\n"
        "    dtype_configs:\n"
        "      - {input_dtype: quint9}\n"
        "      - {input_dtype: quint8, output_dtype: quint8}\n"
        "  - nn.ReLU\n"
    )
    found = lint_path(write(tmp_path, text))
    assert ("BS213", 8) in where(found) and ("BS203", 10) in where(found)
    assert not [d for d in found if d.code == "BS502"], found


def test_a_bad_bound_in_a_block_mapping_is_reported_at_its_own_line(tmp_path: Path) -> None:
    """A per-field mistake is at its value; the order checks (BS210), at the later field."""
    text = (
        "name: b\ndtype_configs:\n  a:\n    input_dtype:\n"
        "      dtype: quint8\n      quant_max_upper_bound: 300\n"
        "    output_dtype:\n      dtype: quint8\n      scale_min_lower_bound: -1\n"
        "    weight_dtype:\n      dtype: qint8\n      quant_min_lower_bound: 9\n"
        "      quant_max_upper_bound: 1\n"
    )
    found = load_errors(tmp_path, text)
    assert [(d.code, d.line, d.column) for d in found] == [
        ("BS212", 6, 30),
        ("BS211", 9, 30),
        ("BS210", 13, 30),
    ]


def test_every_bad_field_of_one_dtype_mapping_is_reported(tmp_path: Path) -> None:
    """A type error in one field does not hide a range or scale error in its neighbours."""
    found = load_errors(
        tmp_path,
        """\
        name: b
        dtype_configs:
          act:
            input_dtype:
              dtype: quint8
              quant_min_lower_bound: -1
              quant_max_upper_bound: 300
              scale_min_lower_bound: 2**-12
              scale_max_upper_bound: -1.0
            output_dtype: quint8
        patterns:
          - pattern: nn.ReLU
            dtype_configs: [act]
        """,
    )
    assert where(found) == {("BS212", 6), ("BS212", 7), ("BS203", 8), ("BS211", 9)}, found


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: b\nextends: ''\n", "extends must not be empty"),
        ("name: ''\n", "name must not be empty"),
        (
            "spec_version: 2\nname: b\ndtype_configs:\n"
            "  a: {weight_dtype: {dtype: qint8, ch_axis: 8}}\n",
            "dtype_configs.a.weight_dtype.ch_axis must be <= 7",
        ),
    ],
)
def test_limits_are_named_in_our_words_not_pydantics(text: str, message: str) -> None:
    with pytest.raises(backend_spec.SpecError) as info:
        backend_spec.loads(text)
    assert [d.message for d in info.value.diagnostics] == [message]
