"""``bespec explain``: per-node verdicts agree with prepare_fx, and reasons name the constraint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import backend_spec
from backend_spec._torch import quiet, torch
from backend_spec.analysis.explain import (
    explain,
    spec_mapping,
    torch_default_mapping,
    tutorial_model,
)
from backend_spec.cli.app import app

ROOT = Path(__file__).resolve().parent.parent

SPEC = """\
name: t
patterns:
  - pattern: nn.Linear
    dtype_configs:
      - input_dtype: {{dtype: {dtype}, quant_min_lower_bound: 0, quant_max_upper_bound: 127}}
        output_dtype: {{dtype: quint8, quant_min_lower_bound: 0, quant_max_upper_bound: 127}}
        weight_dtype: qint8
        bias_dtype: float
    root_module: nn.Linear
    reference_quantized_module: nnqr.Linear
"""


def observed_nodes(backend_config, qconfig_mapping) -> set[str]:
    """Nodes after which prepare_fx really inserted an observer (torch's own verdict)."""
    from torch.ao.quantization.quantize_fx import prepare_fx

    model, inputs = tutorial_model()
    with quiet():
        prepared = prepare_fx(model, qconfig_mapping, inputs, backend_config=backend_config)
    return {
        node.args[0].name
        for node in prepared.graph.nodes
        if node.op == "call_module" and "activation_post_process" in str(node.target)
        if isinstance(node.args[0], torch.fx.Node) and node.args[0].op != "placeholder"
    }


def explained(backend_config, qconfig_mapping):
    model, inputs = tutorial_model()
    return explain(backend_config, model, inputs, qconfig_mapping)


def fixed_eps_mapping(quant_max: int = 255):
    from torch.ao.quantization import QConfig, QConfigMapping
    from torch.ao.quantization.observer import MinMaxObserver, default_weight_observer

    activation = MinMaxObserver.with_args(
        dtype=torch.quint8, quant_min=0, quant_max=quant_max, eps=2**-12
    )
    return QConfigMapping().set_global(
        QConfig(activation=activation, weight=default_weight_observer)
    )


def test_tutorial_silent_skip_is_explained() -> None:
    bc = backend_spec.load(ROOT / "specs" / "tutorial.yaml")
    mapping = torch_default_mapping()
    report = explained(bc, mapping)
    nodes = {n.node: n for n in report.nodes}
    assert list(nodes) == ["linear", "conv", "bn", "relu", "sigmoid"]
    linear = nodes["linear"]
    assert (linear.pattern, linear.outcome) == ("nn.Linear", "skipped")
    assert linear.reasons == [
        "input activation observer eps 1.19e-07 is below scale_min_lower_bound 0.000244",
        "output activation observer eps 1.19e-07 is below scale_min_lower_bound 0.000244",
    ]
    assert all(nodes[n].outcome == "no pattern" for n in ("conv", "bn", "relu", "sigmoid"))
    assert report.unmatched_patterns == [
        "(nn.Conv2d, nn.ReLU)",
        "nni.ConvReLU2d",
        "nnqat.Linear",
        "nniqat.ConvReLU2d",
    ]
    assert observed_nodes(bc, mapping) == set()  # torch agrees: nothing is observed


def test_satisfying_qconfig_quantizes_and_agrees_with_prepare_fx() -> None:
    bc = backend_spec.load(ROOT / "specs" / "tutorial.yaml")
    mapping = fixed_eps_mapping()
    report = explained(bc, mapping)
    quantized = {n.node for n in report.nodes if n.outcome == "quantized"}
    assert quantized == {"linear"}
    assert observed_nodes(bc, mapping) == quantized


def test_quant_range_failure_is_named() -> None:
    bc = backend_spec.loads(SPEC.format(dtype="quint8"))
    report = explained(bc, fixed_eps_mapping(quant_max=255))
    (linear,) = [n for n in report.nodes if n.node == "linear"]
    assert linear.outcome == "skipped"
    assert linear.reasons == [
        "input activation observer quant_max 255 above quant_max_upper_bound 127",
        "output activation observer quant_max 255 above quant_max_upper_bound 127",
    ]
    assert observed_nodes(bc, fixed_eps_mapping(quant_max=255)) == set()
    ok = explained(bc, fixed_eps_mapping(quant_max=127))
    assert [n.outcome for n in ok.nodes if n.node == "linear"] == ["quantized"]


def test_dtype_mismatch_is_named() -> None:
    bc = backend_spec.loads(SPEC.format(dtype="qint8"))
    report = explained(bc, torch_default_mapping())
    (linear,) = [n for n in report.nodes if n.node == "linear"]
    assert linear.reasons[0] == "input dtype quint8 but the config wants qint8"


def test_builtin_backend_quantizes_the_fused_conv() -> None:
    from backend_spec.names.vocabulary import builtin_backend_config

    bc = builtin_backend_config("fbgemm")
    mapping = torch_default_mapping()
    report = explained(bc, mapping)
    outcomes = {n.node: (n.op, n.outcome) for n in report.nodes}
    # in eval mode torch's fuse_conv_bn_relu folds the bn into the conv: ConvReLU2d
    assert outcomes["conv"] == ("conv: nni.ConvReLU2d", "quantized")
    assert outcomes["linear"][1] == "quantized"
    quantized = {n.node for n in report.nodes if n.outcome == "quantized"}
    assert observed_nodes(bc, mapping) <= quantized


def test_fusion_that_built_a_node_is_not_unmatched() -> None:
    from backend_spec.names.vocabulary import builtin_backend_config

    report = explained(builtin_backend_config("fbgemm"), torch_default_mapping())
    (conv,) = [n for n in report.nodes if n.node == "conv"]
    # (Conv2d, BatchNorm2d, ReLU) fused into the ConvReLU2d (BatchNorm folded in eval mode)
    assert conv.fused_from == "(nn.Conv2d, nn.BatchNorm2d, nn.ReLU)"
    assert "(nn.Conv2d, nn.BatchNorm2d, nn.ReLU)" not in report.unmatched_patterns
    assert "nni.ConvReLU2d" not in report.unmatched_patterns  # matched the fused node
    assert "(nn.Conv2d, nn.ReLU)" in report.unmatched_patterns  # really matched nothing


def test_spec_mapping_is_the_default_for_qint8_specs() -> None:
    bc = backend_spec.loads(SPEC.format(dtype="qint8").replace("{dtype: quint8", "{dtype: qint8"))
    own = explained(bc, spec_mapping(bc))
    assert [n.outcome for n in own.nodes if n.node == "linear"] == ["quantized"]
    default = explained(bc, torch_default_mapping())
    assert [n.outcome for n in default.nodes if n.node == "linear"] == ["skipped"]


def test_cli(tmp_path: Path) -> None:
    runner = CliRunner()
    spec = str(ROOT / "specs" / "tutorial.yaml")
    model = "backend_spec.analysis.explain:tutorial_model"
    args = ["explain", spec, "--model", model, "--torch-default"]
    result = runner.invoke(app, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["nodes"][0]["outcome"] == "skipped"
    text = runner.invoke(app, args)
    assert text.exit_code == 0
    assert "scale_min_lower_bound" in text.stdout and "nni.ConvReLU2d" in text.stdout
    own = runner.invoke(app, ["explain", spec, "--model", model, "--format", "json"])
    assert own.exit_code == 0, own.output
    assert json.loads(own.stdout)["nodes"][0]["outcome"] == "quantized"
    bad = runner.invoke(app, ["explain", spec, "--model", "no_such_module:f"])
    assert bad.exit_code == 2


@pytest.mark.parametrize("ref", ["nomodule", "backend_spec.analysis.explain:nothing_here"])
def test_bad_model_reference(ref: str) -> None:
    spec = str(ROOT / "specs" / "tutorial.yaml")
    result = CliRunner().invoke(app, ["explain", spec, "--model", ref])
    assert result.exit_code == 2 and "error" in result.output


def test_model_file_from_the_current_directory(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "netdef.py").write_text(
        "from backend_spec.analysis.explain import tutorial_model as make\n"
    )
    monkeypatch.chdir(tmp_path)
    spec = str(ROOT / "specs" / "tutorial.yaml")
    for ref in ("netdef:make", "netdef.py:make"):
        result = CliRunner().invoke(app, ["explain", spec, "--model", ref, "--format", "json"])
        assert result.exit_code == 0, result.output


FX_DTYPES = """\
name: t
patterns:
  - pattern: nn.Linear
    dtype_configs:
      - {{input_dtype: {act}, output_dtype: {act}, weight_dtype: {weight}, bias_dtype: float}}
    root_module: nn.Linear
    reference_quantized_module: nnqr.Linear
"""

#: (activation dtype, weight dtype) -> what convert_fx does with the linear, and what explain
#: must call it: never "quantized" for a dtype FX does not quantize with (the dtype trap).
CONVERT_CASES = {
    "quint8-qint8": ("quint8", "qint8", "quantized"),
    "uint8-activations": ("uint8", "qint8", "float"),
    "int8-weight": ("quint8", "int8", "raises"),
}


def _converted(backend_config, mapping) -> str:
    """What convert_fx really does with the tutorial model: quantized, float, or raises."""
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    model, inputs = tutorial_model()
    with quiet():
        prepared = prepare_fx(model, mapping, inputs, backend_config=backend_config)
        prepared(*inputs)
        try:
            converted = convert_fx(prepared, backend_config=backend_config)
        except ValueError:
            return "raises"
    targets = {str(n.target) for n in converted.graph.nodes}
    return "quantized" if any("quantize_per_tensor" in t for t in targets) else "float"


@pytest.mark.parametrize("case", sorted(CONVERT_CASES))
def test_explain_agrees_with_convert_fx_on_dtypes(case: str) -> None:
    act, weight, convert = CONVERT_CASES[case]
    bc = backend_spec.loads(FX_DTYPES.format(act=act, weight=weight))
    mapping = spec_mapping(bc)
    assert _converted(bc, mapping) == convert
    (linear,) = [n for n in explained(bc, mapping).nodes if n.node == "linear"]
    assert linear.outcome == ("quantized" if convert == "quantized" else "not converted")
    if convert != "quantized":
        wanted = "qint8" if convert == "raises" else "quint8"
        assert all(f"write {wanted}" in reason for reason in linear.reasons), linear.reasons
