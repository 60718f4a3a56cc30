"""One verdict from ``check`` (issue 28): the FX side is built the same in every flow, a failing
model names its node and the spec entries, ``--model`` means one thing everywhere, and the
examples a new user starts from check with no skips."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import backend_spec
from backend_spec.check import zoo
from backend_spec.check.run import check_engine, check_model, run_check
from backend_spec.cli.app import app
from backend_spec.specfile.starter import starter_text

ROOT = Path(__file__).resolve().parent.parent
NEW_USER = Path(__file__).resolve().parent / "fixtures" / "new_user"
#: A spec FX lowering crashes on through torch (mychip), and one it crashes on through the
#: spec's own dtype config (quint8 weights on x86's kernels).
MYCHIP = NEW_USER / "mychip.yaml"
QUINT8_WEIGHTS = NEW_USER / "mychip_quint8_weights.yaml"


def _fx_verdicts(spec: str | Path) -> dict[str, str]:
    bc = backend_spec.load(spec)
    engine = check_engine(spec, bc)
    return {name: check_model(name, f, bc, engine).status for name, f in zoo.MODELS.items()}


@pytest.mark.slow
@pytest.mark.parametrize(
    "spec", [ROOT / "specs" / "native.yaml", MYCHIP, QUINT8_WEIGHTS], ids=lambda p: p.stem
)
def test_fx_and_both_give_every_zoo_model_one_verdict(spec) -> None:
    from backend_spec.pt2e.check import flow_check

    bc = backend_spec.load(spec)
    report = flow_check(bc, "both", dict(zoo.MODELS), engine=check_engine(spec, bc))
    both = {row["model"]: row["fx"] for row in report.rows}
    assert both == _fx_verdicts(spec)


def test_a_torch_lowering_crash_names_the_entries_and_does_not_fail() -> None:
    bc = backend_spec.load(MYCHIP)
    result = check_model("depthwise_hardswish", zoo.depthwise_hardswish, bc, "x86")
    assert (result.status, result.torch_limit) == ("pass", True)
    assert result.reason.startswith("torch limitation, not the spec: mul (operator.mul")
    assert "hswish (nn.Hardswish, no spec entry" in result.reason
    assert "pw (nn.Conv2d, spec line 26)" in result.reason
    assert result.sqnr_db is not None and result.sqnr_db > 20


def test_a_quantize_fed_a_tensor_torch_already_quantized_is_a_torch_limit() -> None:
    """The failing node is one convert_fx made (a quantize of hswish's output for the ops that
    read it quantized): still traced to the unclaimed op torch lowered."""
    bc = backend_spec.load(NEW_USER / "npu2.yaml")
    result = check_model("depthwise_hardswish", zoo.depthwise_hardswish, bc, "x86")
    assert (result.status, result.torch_limit) == ("pass", True), result.reason
    assert re.match(
        r"torch limitation, not the spec: quantize_per_tensor_\d+ \(torch.quantize_per_tensor, "
        r"made by convert_fx\) fails with inputs hswish \(quantized quint8",
        result.reason,
    ), result.reason
    assert "pw (nn.Conv2d, spec line 18), gate (nn.Sigmoid, spec line 40) read it" in result.reason


def test_a_crash_of_the_spec_names_the_entry_line_and_fails() -> None:
    bc = backend_spec.load(QUINT8_WEIGHTS)
    result = check_model("conv2d_bn_relu", zoo.conv2d_bn_relu, bc, "x86")
    assert result.status == "fail"
    assert re.fullmatch(
        r"convert_fx cannot lower conv\d \(nn\.Conv2d, spec line 26\) with input quint8, "
        r"weight quint8, output quint8",
        result.reason,
    ), result.reason
    assert "expected scalar type QInt8" in result.detail  # torch's text: --verbose only


@pytest.mark.parametrize("flow", ["fx", "both"])
def test_a_sharing_entry_that_makes_fx_crash_fails_with_its_line_in_every_flow(flow) -> None:
    from new_user.models import cat_trigger

    bc = backend_spec.load(MYCHIP)
    result = check_model("cat_trigger", cat_trigger, bc, "x86")
    assert (result.status, result.torch_limit) == ("fail", False)
    assert result.reason.startswith(
        "cat (torch.cat, spec line 47) shares one observer across the tensors it joins, so "
        "FX quantizes its input hswish, which the spec leaves float (nn.Hardswish has no entry)"
    ), result.reason
    cli = CliRunner().invoke(
        app, ["check", str(MYCHIP), "--flow", flow, "--model", "new_user.models:cat_trigger"]
    )
    assert cli.exit_code == 1, cli.output
    assert "spec line 47" in " ".join(cli.output.split())
    assert "promoteTypes" not in cli.output  # torch's message: --verbose only


@pytest.mark.parametrize("flow", ["fx", "pt2e"])
def test_model_takes_zoo_names_and_replaces_the_zoo_in_every_flow(flow) -> None:
    result = CliRunner().invoke(
        app,
        ["check", str(ROOT / "specs" / "tutorial.yaml"), "--flow", flow, "--model", "mlp"],
    )
    assert result.exit_code == 0, result.output
    assert "mlp" in result.output
    assert "conv1d_bn_relu" not in result.output and "tutorial_net" not in result.output


def test_explain_takes_zoo_names() -> None:
    result = CliRunner().invoke(app, ["explain", str(MYCHIP), "--model", "depthwise_hardswish"])
    assert result.exit_code == 0, result.output
    assert "hswish" in result.output and "no pattern" in result.output


def test_timings_leave_out_the_warm_up() -> None:
    """The first forwards of a model pay for lazy initialisation; they are not timed."""
    import time

    import torch

    from backend_spec.check.run import WARM_UP, _latency_ms

    class SlowStart(torch.nn.Module):
        calls = 0

        def forward(self, x):
            type(self).calls += 1
            if type(self).calls <= WARM_UP:
                time.sleep(0.05)
            return x + 1

    assert _latency_ms(SlowStart(), (torch.zeros(2),)) < 25


# --- the examples a new user starts from ----------------------------------------------------


def _doc_specs() -> list[tuple[str, str, str]]:
    """docs/format.md's fenced specs that stand alone: a name, patterns and no module outside
    torch (``my_pkg`` is a placeholder). Those that extend a built-in are in: the cases torch's
    own backend fails are marked inherited and are not theirs."""
    text = (ROOT / "docs" / "format.md").read_text(encoding="utf-8")
    found = []
    for match in re.finditer(r"```(yaml|toml)\n(.*?)```", text, re.S):
        body = match.group(2)
        named = re.search(r"^name\s*[:=]", body, re.M) and re.search(r"patterns", body)
        if named and "my_pkg" not in body:
            line = text[: match.start()].count("\n") + 1
            found.append((f"format.md:{line}", match.group(1), body))
    return found


def _examples() -> list[tuple[str, str, str]]:
    examples = [
        (f"init.{fmt}", fmt, starter_text("npu", fmt, "backend-spec.schema.json"))
        for fmt in ("yaml", "toml")
    ]
    for name in ("tutorial.yaml", "tutorial.toml"):
        path = ROOT / "specs" / name
        examples.append((name, path.suffix[1:], path.read_text(encoding="utf-8")))
    return examples + _doc_specs()


def test_the_docs_hold_the_worked_examples() -> None:
    specs = _doc_specs()
    assert len(specs) >= 8
    assert sum("\nextends: " in body for _, _, body in specs) >= 2


@pytest.mark.slow
@pytest.mark.parametrize(("label", "fmt", "text"), _examples(), ids=[e[0] for e in _examples()])
def test_examples_check_with_no_skips(tmp_path, label, fmt, text) -> None:
    path = tmp_path / f"spec.{fmt}"
    path.write_text(text, encoding="utf-8")
    report = run_check(path, models=["conv2d_bn_relu", "mlp", "depthwise_hardswish"])
    problems = [
        f"{r.key}: {r.status} {r.reason}"
        for r in report.patterns
        if r.status != "pass" and not r.inherited
    ]
    problems += [f"{m.name}: {m.reason}" for m in report.models if m.status == "fail"]
    assert not problems, problems


# --- what a spec inherits from torch ---------------------------------------------------------

#: x86's nn.Linear entry narrowed to static int8: its fused partners' fp16 cases now fail
#: because of this edit, not because of torch (x86 itself passes them).
NARROWED_LINEAR = """\
spec_version: 1
name: {name}
extends: x86
patterns:
  - pattern: nn.Linear
    dtype_configs:
      - {{input_dtype: quint8, output_dtype: quint8, weight_dtype: qint8, bias_dtype: float}}
      - {{input_dtype: quint8, output_dtype: float, weight_dtype: qint8, is_dynamic: true}}
    root_module: nn.Linear
    qat_module: nnqat.Linear
    reference_quantized_module: nnqr.Linear
"""


@pytest.mark.slow
def test_only_what_torch_itself_fails_is_inherited(tmp_path) -> None:
    """A case is torch's when its entry came unchanged from the built-in and the built-in fails
    it the same way; the spec's own edits keep their failures, and a built-in checked as
    itself owns everything."""
    own = run_check("x86", models=[])
    torch_fails = {r.key: r.status for r in own.patterns if r.status != "pass"}
    assert own.failed and torch_fails and not any(r.inherited for r in own.patterns)

    plain = tmp_path / "plain.yaml"
    plain.write_text("spec_version: 1\nname: mine\nextends: x86\n", encoding="utf-8")
    report = run_check(plain, models=[])
    marked = {r.key: r.status for r in report.patterns if r.inherited}
    assert marked == torch_fails and not report.failed
    assert {r.inherited for r in report.patterns if r.inherited} == {"torch:x86"}
    assert report.counts()["inherited"] == len(torch_fails) and report.counts()["fail"] == 0

    narrowed = tmp_path / "narrowed.yaml"
    narrowed.write_text(NARROWED_LINEAR.format(name="narrowed"), encoding="utf-8")
    report = run_check(narrowed, models=[])
    own_failures = [r.key for r in report.patterns if r.status == "fail" and not r.inherited]
    assert report.failed and "(nn.Linear, nn.BatchNorm1d) | ptq#2" in own_failures
    assert all(key not in torch_fails for key in own_failures)


@pytest.mark.slow
def test_check_lists_inherited_cases_apart_and_passes(tmp_path) -> None:
    spec = tmp_path / "mine.yaml"
    spec.write_text("spec_version: 1\nname: mine\nextends: x86\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["check", str(spec), "--model", "mlp"])
    assert result.exit_code == 0, result.output
    output = " ".join(result.output.split())  # the terminal wraps lines anywhere
    assert "inherited unchanged from torch:x86" in output
    assert "0 failed, 0 skipped (" in output and "as in torch's own backend" in output
