"""``check --lower`` / ``explain --lower``: a spec's quantized ops reach int8 kernels, or the
check names the op, its spec entry and line, and the reason.

Lowering is slow (ExecuTorch's passes take seconds, an inductor compile tens of seconds), so
the cases lower one small net (the tutorial net: conv-relu twice, flatten, linear) without
timing, and the inductor cases are marked slow.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from backend_spec.cli.app import app
from backend_spec.lower import LoweringMissing, require
from backend_spec.lower import golden as goldens
from backend_spec.lower.constraints import CONSTRAINTS, Facts, known_reason
from backend_spec.lower.results import LowerReport, ModelResult, OpResult

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "lowering"
NET = "tutorial_net"
runner = CliRunner()

pytest.importorskip("torchao")


def _lower(spec: Path, target: str) -> LowerReport:
    from backend_spec.lower.run import lower_check

    try:
        require(target)
    except LoweringMissing as exc:
        pytest.skip(str(exc))
    return lower_check(spec, target, [NET], jobs=1, timing=False)


def _line_of(spec: Path, text: str) -> int:
    """The line of the first entry whose pattern is ``text`` (what the report must name)."""
    lines = spec.read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.strip() == f"- pattern: {text}")


#: (spec, target, whether every quantized op reaches int8, the reason a failure gives).
CASES = [
    pytest.param(
        ROOT / "specs/xnnpack.yaml", "xnnpack", True, "", id="xnnpack-ok", marks=pytest.mark.slow
    ),
    # the unsigned-activation XNNPACK spec: through the command line, below
    pytest.param(
        ROOT / "specs/x86_inductor.yaml",
        "inductor",
        True,
        "",
        id="inductor-ok",
        marks=pytest.mark.slow,
    ),
    pytest.param(
        FIXTURES / "x86_per_tensor_weights.yaml",
        "inductor",
        False,
        "x86 inductor lowers conv and linear only with per-channel weights",
        id="inductor-per-tensor",
        marks=pytest.mark.slow,
    ),
    pytest.param(
        FIXTURES / "x86_signed_activations.yaml",
        "inductor",
        False,
        "x86 inductor takes unsigned int8 activations",
        id="inductor-qint8",
        marks=pytest.mark.slow,
    ),
]


@pytest.mark.parametrize(("spec", "target", "reaches", "reason"), CASES)
def test_lowering_judges_each_quantized_op(spec, target, reaches, reason):
    report = _lower(spec, target)
    (model,) = report.models
    assert model.ops, "the net has quantized ops to judge"
    assert not model.skipped
    if reaches:
        assert model.ok, model
        assert all(op.ok and op.kernel for op in model.ops)
        assert model.sqnr_db is None or model.sqnr_db > 20
        if target == "xnnpack":
            assert model.delegates == 1 and not model.outside
        else:
            assert model.counters.get("qconv_unary_lower_count", 0) >= 1
        return
    assert not model.ok and report.failed == 1
    failed = [op for op in model.ops if not op.ok] or model.ops
    conv = next(op for op in failed if "conv" in op.op)
    # the op's spec entry, with the line it is written on
    assert conv.origin.endswith(f"{spec.name}:{_line_of(spec, '[nn.Conv2d, nn.ReLU]')}")
    assert reason in (conv.reason or model.error_reason), (conv, model.error)


@pytest.mark.slow
def test_the_report_names_op_entry_line_and_reason_and_exits_1():
    spec = FIXTURES / "xnnpack_unsigned_activations.yaml"
    try:
        require("xnnpack")
    except LoweringMissing as exc:
        pytest.skip(str(exc))
    result = runner.invoke(app, ["check", str(spec), "--lower", "xnnpack", "--model", NET])
    assert result.exit_code == 1, result.output
    line = _line_of(spec, "[nn.Conv2d, nn.ReLU]")
    assert re.search(
        rf"conv2d\+relu \[\(nn\.Conv2d, nn\.ReLU\) at \S*{spec.name}:{line}\]: NOT int8: .*"
        "XNNPACK takes signed int8 activations",
        result.output,
    ), result.output
    assert "Traceback" not in result.output
    assert "[XNN" not in result.output and "cpuinfo" not in result.output  # runtime logs held


@pytest.mark.slow
def test_explain_says_where_each_node_ran():
    try:
        require("xnnpack")
    except LoweringMissing as exc:
        pytest.skip(str(exc))
    result = runner.invoke(
        app,
        [
            "explain",
            str(ROOT / "specs/xnnpack.yaml"),
            "--flow",
            "pt2e",
            "--lower",
            "xnnpack",
            "--model",
            f"backend_spec.pt2e.nets:{NET}",
        ],
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    conv = next(line for line in lines if line.startswith("conv2d (aten.conv2d.default)"))
    assert "quantized by (nn.Conv2d, nn.ReLU)" in conv and "int8 in xnnpack delegate 0" in conv


@pytest.mark.parametrize(
    ("target", "missing", "says"),
    [
        ("xnnpack", "executorch.exir", "pip install --no-deps executorch==1.5.1 flatbuffers"),
        ("inductor", None, "needs a C++ compiler"),
    ],
)
def test_a_missing_lowering_stack_is_one_line(monkeypatch, target, missing, says):
    import backend_spec.lower as lower

    if missing:
        found = lower._found
        monkeypatch.setattr(lower, "_found", lambda module: module != missing and found(module))
    else:
        monkeypatch.setattr(lower, "compiler", lambda: None)
    with pytest.raises(LoweringMissing, match=re.escape(says)):
        require(target)
    result = runner.invoke(app, ["check", "tutorial", "--lower", target, "--model", NET])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and says in lines[0], result.output


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--lower", "tpu"], "--lower must be xnnpack or inductor"),
        (["--lower", "xnnpack", "--flow", "both"], "does not take --flow both"),
        (["--lower", "xnnpack", "--qat"], "does not take --qat"),
    ],
)
def test_misused_lower_flags_exit_2(argv, says):
    result = runner.invoke(app, ["check", str(ROOT / "specs/xnnpack.yaml"), *argv])
    assert result.exit_code == 2 and says in result.output, result.output


def _report(kernel: str, ok: bool = True, counters: dict[str, int] | None = None) -> LowerReport:
    op = OpResult("conv2d+relu", ("aten.conv2d.default",), "nn.Conv2d", "s.yaml:3", kernel, ok)
    model = ModelResult("net", "inductor", ops=[op], counters=counters or {})
    return LowerReport("inductor", "b", [model], {"torch": "2.13.0"})


@pytest.mark.parametrize(
    ("now", "drifted"),
    [
        (_report("lowered qconv", counters={"qconv_unary_lower_count": 1}), []),
        (
            _report("fp32", ok=False, counters={"qconv_unary_lower_count": 0}),
            [
                "model net: status ok -> fail",
                "model net: op conv2d+relu: lowered qconv -> FAIL",
                "model net: counter qconv_unary_lower_count: 1 -> 0",
            ],
        ),
    ],
)
def test_a_lost_kernel_is_golden_drift(tmp_path, now, drifted):
    path = tmp_path / "g.json"
    goldens.write(_report("lowered qconv", counters={"qconv_unary_lower_count": 1}), path)
    assert goldens.drift(now, goldens.read(path, "inductor")) == drifted


def test_a_golden_of_another_kind_is_refused(tmp_path):
    path = tmp_path / "fx.json"
    path.write_text(json.dumps({"version": 2, "cases": {}}))
    with pytest.raises(ValueError, match="not a lowering golden"):
        goldens.read(path, "xnnpack")


@pytest.mark.parametrize("constraint", CONSTRAINTS, ids=lambda c: c.reason[:40])
def test_every_known_constraint_cites_its_source_and_can_fire(constraint):
    assert constraint.source and constraint.target in ("xnnpack", "inductor")
    facts = [
        Facts(("aten.conv2d.default",), activation, weight, symmetric, full, vnni)
        for activation in ("int8", "uint8", None)
        for weight in ("per_channel", "per_tensor", None)
        for symmetric in (True, False)
        for full in (True, False)
        for vnni in (True, False)
    ]
    fired = [known_reason(constraint.target, f, host=constraint.host) for f in facts]
    assert any(constraint.reason in reasons for reasons in fired)
    assert not all(constraint.reason in reasons for reasons in fired)  # it tells cases apart


def test_executorch_stays_out_of_the_dependencies():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = [*project["dependencies"], *sum(project["optional-dependencies"].values(), [])]
    assert not [dep for dep in wanted if dep.lower().startswith("executorch")]


def test_the_reporter_writes_text_and_json_with_user_text_escaped():
    from backend_spec.cli.render.lower import report_json, report_text

    op = OpResult(
        "conv\x1b[31m",
        ("aten.conv2d.default",),
        "nn.Conv2d",
        "s.yaml:3",
        "fp32",
        False,
        "no x86 int8 pattern lowered it",
    )
    model = ModelResult("net", "inductor", ops=[op], counters={"qconv_unary_lower_count": 0})
    report = LowerReport("inductor", "b", [model], {"torch": "2.13.0"})
    text = report_text(report)
    assert "\x1b" not in text
    assert "[nn.Conv2d at s.yaml:3]: NOT int8: no x86 int8 pattern lowered it" in text
    assert text.rstrip().endswith("0 of 1 quantized ops reach int8 kernels; 0 of 1 models ok")
    document = json.loads(report_json(report, ["model net: status ok -> fail"]))
    assert document["failed"] == 1 and document["models"][0]["ops"][0]["ok"] is False
