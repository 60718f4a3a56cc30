"""``bespec diff``: added/removed/changed patterns with field paths; exit 0 same, 1 different."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from backend_spec.cli.app import app
from backend_spec.cli.render.diff import diff_configs
from backend_spec.compiler.backends import load_backend

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL = str(ROOT / "specs" / "tutorial.yaml")


def diff_refs(a: str, b: str):
    return diff_configs(load_backend(a), load_backend(b))


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def edited_tutorial(tmp_path: Path) -> str:
    text = (ROOT / "specs" / "tutorial.yaml").read_text()
    text = text.replace(
        "scale_min_lower_bound: 0.000244140625\n    weight",
        "scale_min_lower_bound: 0.001\n    weight",
    )
    text = text.replace(
        "  # Quantize linear.\n", "  - pattern: nn.Sigmoid\n    dtype_configs: [weighted_int8]\n"
    )
    text = text.replace("    qat_module: nniqat.ConvReLU2d\n", "")
    path = tmp_path / "edited.yaml"
    path.write_text(text)
    return str(path)


def test_identical_spec_and_builtin() -> None:
    result = run("diff", str(ROOT / "specs" / "fbgemm.yaml"), "fbgemm")
    assert result.exit_code == 0, result.output
    assert "identical" in result.stdout
    assert diff_refs("x86", "x86") == []


def test_field_level_changes(tmp_path: Path) -> None:
    edited = edited_tutorial(tmp_path)
    found = {(d.kind, d.pattern, d.field) for d in diff_refs(TUTORIAL, edited)}
    assert ("added", "nn.Sigmoid", "") in found
    assert ("changed", "nni.ConvReLU2d", "qat_module") in found
    changed_scale = "dtype_configs[0].output_dtype.scale_min_lower_bound"
    # the output constraint changed for every pattern that uses the named config
    assert {p for k, p, f in found if f == changed_scale} == {
        "nn.Linear",
        "(nn.Conv2d, nn.ReLU)",
        "nni.ConvReLU2d",
        "nnqat.Linear",
        "nniqat.ConvReLU2d",
    }
    result = run("diff", TUTORIAL, edited)
    assert result.exit_code == 1
    assert "+ nn.Sigmoid" in result.stdout
    assert "    qat_module: nniqat.ConvReLU2d -> unset" in result.stdout
    assert "1 added, 0 removed, 5 changed patterns\n" in result.stdout


def test_text_shows_values_in_spec_syntax() -> None:
    result = run("diff", "native", "executorch")
    assert result.exit_code == 1
    assert "~ name: native -> executorch\n" in result.stdout
    assert "Ref(" not in result.stdout and "None" not in result.stdout
    assert "'" not in result.stdout  # no Python string reprs
    # a dtype config list that changed length is shown item by item, long mappings key by key
    assert "      + input_dtype: {dtype: qint8, scale_min_lower_bound: 0.000244140625}\n" in (
        result.stdout
    )
    assert max(len(line) for line in result.stdout.splitlines()) <= 100


def test_json(tmp_path: Path) -> None:
    result = run("diff", "--format", "json", TUTORIAL, edited_tutorial(tmp_path))
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["identical"] is False
    (qat,) = [d for d in data["differences"] if d["field"] == "qat_module"]
    assert qat == {
        "kind": "changed",
        "pattern": "nni.ConvReLU2d",
        "field": "qat_module",
        "old": "nniqat.ConvReLU2d",
        "new": None,
    }
    same = run("diff", "--format", "json", "native", "native")
    assert same.exit_code == 0 and json.loads(same.stdout) == {
        "identical": True,
        "differences": [],
    }


def test_builtins_differ() -> None:
    result = run("diff", "native", "executorch")
    assert result.exit_code == 1
    assert result.stdout.startswith("--- native\n+++ executorch\n")


def test_misuse_and_bad_specs(tmp_path: Path) -> None:
    assert run("diff", "nosuch", "fbgemm").exit_code == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: b\npatterns:\n  - pattern: nn.Nope\n")
    result = run("diff", str(bad), "fbgemm")
    assert result.exit_code == 2
    assert "BS300" in result.stderr


# -- version 2 keys: the whole form is compared -------------------------------------------------

V2_BASE = """\
spec_version: 12
name: npu
dtype_configs:
  act:
    input_dtype: {dtype: quint8}
    output_dtype: quint8
  weighted:
    input_dtype: quint8
    output_dtype: quint8
    weight_dtype: {dtype: qint8}
patterns:
  - pattern: nn.ReLU
    dtype_configs: [act]
  - pattern: nn.Linear
    dtype_configs: [weighted]
"""

#: One case per key beyond torch's fields (versions 2 to 5): where it goes (a dtype mapping of
#: ``act``/``weighted``, or the nn.ReLU entry), and two values that differ. Every such key of
#: the field table must have a case.
V2_CASES = {
    "observer": ("input_dtype: {dtype: quint8", "histogram", "minmax"),
    "qscheme": ("input_dtype: {dtype: quint8", "symmetric", "affine"),
    "granularity": ("weight_dtype: {dtype: qint8", "per_channel", "per_tensor"),
    "ch_axis": ("weight_dtype: {dtype: qint8", "1", "0"),
    "reduce_range": ("input_dtype: {dtype: quint8", "true", "false"),
    "fake_quant": ("input_dtype: {dtype: quint8", "learnable", "fake_quantize"),
    "quantize": ("    dtype_configs: [act]", "always", "if_input_quantized"),
    "aten": ("    dtype_configs: [act]", "[[aten.relu.default]]", "[[aten.relu_.default]]"),
    # version 3 pt2e policy keys
    "output": ("    dtype_configs: [act]", "never", "always"),
    "extra_inputs": ("    dtype_configs: [act]", "quantized", "float"),
    "chain_input": ("    dtype_configs: [act]", "any", "first"),
    "input_shapes": ("    dtype_configs: [act]", "equal", "any"),
    "scalars": ("    dtype_configs: [act]", "tensor", "keep"),
    "consumers": ("    dtype_configs: [act]", "quantizing", "any"),
    # version 4
    "bias_qspec": ("    dtype_configs: [act]", "derived", "float"),
    # version 5
    "input_observer": ("    dtype_configs: [act]", "upstream", "own"),
    "producers": ("    dtype_configs: [act]", "join", "split"),
    # version 6
    "ptq_fake_quant": ("input_dtype: {dtype: quint8", "true", "false"),
    # version 7
    "when": ("    dtype_configs: [act]", "{min_val: 0}", "{min_val: 1}"),
    # version 8
    "customized_qrange": ("input_dtype: {dtype: quint8", "false", "true"),
    "annotation_stage": ("    dtype_configs: [act]", "2", "1"),
    # version 9
    "averaging_constant": ("input_dtype: {dtype: quint8", "0.5", "1"),
    # version 10
    "claim_stage": ("    dtype_configs: [act]", "2", "1"),
    # version 11
    "qconfig": ("    dtype_configs: [act]", "own", "first_op"),
    # version 12
    "input_sharing": ("    dtype_configs: [act]", "qspec", "dtype"),
}


def _v2_spec(folder: Path, name: str, key: str, value: str) -> str:
    anchor = V2_CASES[key][0]
    if anchor.startswith("    "):  # a key of the nn.ReLU entry
        text = V2_BASE.replace(anchor, f"{anchor}\n    {key}: {value}", 1)
    else:
        text = V2_BASE.replace(anchor, f"{anchor}, {key}: {value}", 1)
    path = folder / name
    path.write_text(text)
    return str(path)


def test_every_version_2_key_has_a_diff_case() -> None:
    from backend_spec.specfile.fields import OBSERVER_FIELDS, PT2E_PATTERN_FIELDS

    assert set(V2_CASES) == {*OBSERVER_FIELDS, *PT2E_PATTERN_FIELDS}


@pytest.mark.parametrize("key", sorted(V2_CASES))
def test_specs_differing_only_in_a_version_2_key_differ(tmp_path: Path, key: str) -> None:
    _, old, new = V2_CASES[key]
    a = _v2_spec(tmp_path, "a.yaml", key, old)
    b = _v2_spec(tmp_path, "b.yaml", key, new)
    differences = diff_refs(a, b)
    # the field is named: dtype_configs[0].input_dtype.observer, aten[0][0], when.min_val...
    assert len(differences) == 1, differences
    assert key in re.split(r"[.\[]", differences[0].field), differences
    result = run("diff", a, b)
    assert result.exit_code == 1, result.output
    assert key in result.stdout and "identical" not in result.stdout
    assert run("diff", a, _v2_spec(tmp_path, "a2.yaml", key, old)).exit_code == 0


def test_check_records_every_entry_field_of_the_table() -> None:
    # check/cases.py reads the field table: a field it left out (num_tensor_args_to_observation
    # _type) would let an edit to it pass a golden unnoticed.
    from backend_spec.check.cases import declared_text
    from backend_spec.specfile.fields import ENTRY_FIELDS, PT2E_PATTERN_FIELDS

    native = load_backend("native")
    recorded = {line.split(":", 1)[0] for c in native.configs for line in declared_text(native, c)}
    settable = {f.key for f in ENTRY_FIELDS}
    assert "num_tensor_args_to_observation_type" in recorded
    assert recorded <= settable | set(PT2E_PATTERN_FIELDS)
