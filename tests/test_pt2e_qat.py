"""QAT in pt2e: ``quantizer(spec, qat=True)`` trains like ``prepare_qat_fx`` under the spec.

The ``fake_quant`` kinds of a spec become one set of fake-quantize constructors (FX QAT
QConfigs), and the pt2e QAT table is read off them; conv-bn(-relu) chains stay whole for
torchao's QAT fold. The zoo-wide comparison is the slow ``test_pt2e_qat_matrix.py``.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

import backend_spec
from backend_spec._torch import torch

pytest.importorskip("torchao")

from backend_spec.analysis.qconfigs import choose, qconfig_mapping  # noqa: E402
from backend_spec.check import zoo  # noqa: E402
from backend_spec.pt2e import qat  # noqa: E402
from backend_spec.pt2e.runtime import TableQuantizer, make_spec  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "specs"

SPEC = """\
spec_version: 2
name: qat_kinds
dtype_configs:
  weighted:
    input_dtype: {{dtype: quint8{activation}}}
    output_dtype: quint8
    weight_dtype: {{dtype: qint8{weight}}}
    bias_dtype: float
patterns:
  - pattern: nn.Conv2d
    dtype_configs: [weighted]
    root_module: nn.Conv2d
    qat_module: nnqat.Conv2d
    reference_quantized_module: nnqr.Conv2d
  - pattern: nnqat.Conv2d
    dtype_configs: [weighted]
    root_module: nn.Conv2d
    reference_quantized_module: nnqr.Conv2d
"""

#: (activation keys, weight keys) -> (FX activation class, FX activation observer, FX weight
#: class, pt2e activation class, pt2e weight class). fused_moving_avg takes the moving-average
#: observer whatever the PTQ one; the absent key is version 1's FakeQuantize.
KINDS = [
    ("", "", "FakeQuantize", "MinMaxObserver", "FakeQuantize", "FakeQuantize", "FakeQuantize"),
    (
        ", fake_quant: fused_moving_avg",
        ", fake_quant: fused_moving_avg, granularity: per_channel",
        "FusedMovingAvgObsFakeQuantize",
        "MovingAverageMinMaxObserver",
        "FusedMovingAvgObsFakeQuantize",
        "FusedMovingAvgObsFakeQuantize",
        "FusedMovingAvgObsFakeQuantize",
    ),
    (
        ", fake_quant: learnable, observer: moving_average_minmax",
        ", fake_quant: fake_quantize",
        "_LearnableFakeQuantize",
        "MovingAverageMinMaxObserver",
        "FakeQuantize",
        "LearnableFakeQuantize",
        "FakeQuantize",
    ),
]


def write_spec(tmp_path: Path, activation: str, weight: str) -> Path:
    path = tmp_path / "qat_kinds.yaml"
    path.write_text(SPEC.format(activation=activation, weight=weight))
    return path


@pytest.mark.parametrize("row", KINDS, ids=lambda row: row[2])
def test_fake_quant_kinds_reach_fx_and_pt2e_alike(tmp_path: Path, row: tuple) -> None:
    activation, weight, fx_act, fx_observer, fx_weight, pt2e_act, pt2e_weight = row
    path = write_spec(tmp_path, activation, weight)
    qconfig = qconfig_mapping(path, qat=True).object_type_qconfigs[torch.nn.Conv2d]
    act, wt = qconfig.activation(), qconfig.weight()
    assert (type(act).__name__, type(act.activation_post_process).__name__) == (
        fx_act,
        fx_observer,
    )
    assert type(wt).__name__ == fx_weight
    table = backend_spec.quantizer(path, qat=True).table
    (rule,) = [r for r in table["rules"] if r["label"] == "nn.Conv2d"]
    made_act = make_spec(table["specs"][rule["input"]])
    made_weight = make_spec(table["specs"][rule["weight"]])
    assert made_act.observer_or_fake_quant_ctr.p.func.__name__ == pt2e_act
    assert made_weight.observer_or_fake_quant_ctr.p.func.__name__ == pt2e_weight
    # The pt2e spec observes exactly what the FX fake-quantize's observer does.
    assert table["specs"][rule["input"]]["observer"] == fx_observer
    assert made_act.dtype == torch.uint8 and made_weight.dtype == torch.int8


def two_convs() -> tuple[torch.nn.Module, tuple]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Conv2d(4, 4, 3))
    return model, (torch.randn(2, 3, 8, 8),)


@pytest.mark.parametrize("row", KINDS, ids=lambda row: row[2])
def test_fake_quant_kinds_train_alike(tmp_path: Path, row: tuple) -> None:
    """Training-mode forward passes through FX QAT and pt2e QAT: same qparams and outputs."""
    path = write_spec(tmp_path, row[0], row[1])
    table = backend_spec.quantizer(path, qat=True).table
    made = qat.compare_qat(
        "two_convs", backend_spec.load(path), lambda: TableQuantizer(table), two_convs
    )
    assert len(made.pt2e.qparams) == 3
    assert made.fx.qparams == made.pt2e.qparams
    assert made.identical, made.max_diff


def test_ptq_tables_have_no_fake_quant(tmp_path: Path) -> None:
    path = write_spec(tmp_path, ", fake_quant: fused_moving_avg", "")
    table = backend_spec.quantizer(path).table
    assert all("fake_quant" not in spec for spec in table["specs"].values())


def test_per_channel_learnable_weight_is_refused_with_the_reason(tmp_path: Path) -> None:
    path = write_spec(tmp_path, "", ", fake_quant: learnable, granularity: per_channel")
    (entry, *_rest) = choose(backend_spec.load(path), qat=True)
    assert entry.qconfig is None
    assert "weight fake_quant learnable" in entry.reason
    assert "channel count" in entry.reason
    # PTQ is unaffected by a QAT-only key.
    assert next(iter(choose(backend_spec.load(path)))).qconfig is not None


def test_check_fails_the_qat_case_of_an_unbuildable_fake_quant(tmp_path: Path) -> None:
    from backend_spec.check.cases import build_cases, check_case

    path = write_spec(tmp_path, "", ", fake_quant: learnable, granularity: per_channel")
    cases = build_cases(backend_spec.load(path), "x86")
    (qat_case,) = [case for case in cases if case.mode == "qat"]
    result = check_case(qat_case)
    assert result.status == "fail"
    assert result.reason.startswith("no QAT QConfig: weight fake_quant learnable")


def test_conv_bn_relu_chain_stays_whole_for_qat() -> None:
    table = backend_spec.quantizer(SPECS / "x86.yaml", qat=True).table
    ptq = backend_spec.quantizer(SPECS / "x86.yaml").table
    label = "(nn.Conv2d, nn.BatchNorm2d, nn.ReLU)"
    (qat_rule,) = [r for r in table["rules"] if r["label"] == label]
    assert [alts[0] for alts in qat_rule["chain"]] == [
        "aten.conv2d.default",
        "aten.batch_norm.default",
        "aten.relu.default",
    ]
    # PTQ folds the BatchNorm first: its chain is (conv, relu)'s, so the entry is a duplicate.
    assert all(
        "aten.batch_norm.default" not in alts
        for rule in ptq["rules"]
        if rule["chain"][0] == ["aten.conv2d.default"]
        for alts in rule["chain"]
    )
    assert table["specs"][qat_rule["weight"]]["fake_quant"] == "fake_quantize"


def test_conv_bn_relu_trains_and_converts_like_fx() -> None:
    """Training-mode forward passes, convert: same output bit for bit, same qparams."""
    bc = backend_spec.load(SPECS / "x86.yaml")
    made = backend_spec.quantizer(SPECS / "x86.yaml", qat=True)
    result = qat.compare_qat(
        "conv2d_bn_relu", bc, lambda: TableQuantizer(made.table), zoo.conv2d_bn_relu
    )
    assert result.fx.qparams == result.pt2e.qparams
    assert result.identical, (result.max_diff, result.classes)
    assert result.pt2e.quantize_ops == 4


class _DropoutHead(torch.nn.Module):
    """conv -> relu -> dropout -> linear: training-mode passes draw dropout masks."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.drop = torch.nn.Conv2d(3, 4, 3), torch.nn.Dropout(0.5)
        self.fc = torch.nn.Linear(4 * 6 * 6, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.drop(torch.relu(self.conv(x))), 1))


def test_training_passes_draw_the_same_dropout_masks_whatever_ran_before() -> None:
    """Two QAT runs compared must see the same masks: torchao's conv-bn rewrite draws random
    example inputs during prepare, a spec's quantizer does not. The passes start from one
    seed, and leave the caller's generator as it was."""
    from backend_spec.check.run import forward_passes
    from backend_spec.pt2e.flows import calibration

    torch.manual_seed(0)
    model, inputs = _DropoutHead(), (torch.randn(2, 3, 8, 8),)
    batches = calibration(inputs)
    made = backend_spec.quantizer(SPECS / "x86.yaml", qat=True)
    first = qat.run_pt2e_qat(TableQuantizer(made.table), model, inputs, batches)
    torch.randn(7)  # what another quantizer's prepare might draw
    second = qat.run_pt2e_qat(TableQuantizer(made.table), model, inputs, batches)
    assert first.qparams == second.qparams and torch.equal(first.output, second.output)
    assert first.qparams  # observed: a vacuous comparison would pass too
    state = torch.random.get_rng_state()
    forward_passes(model.train(), batches)
    assert torch.equal(torch.random.get_rng_state(), state)


@pytest.mark.parametrize(
    ("layers", "unfolded"),
    [
        ((torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4)), True),
        ((torch.nn.Conv3d(2, 2, 1), torch.nn.BatchNorm3d(2)), True),
        ((torch.nn.Conv2d(2, 2, 1), torch.nn.BatchNorm2d(2)), False),
        ((torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.BatchNorm1d(4)), False),
    ],
    ids=["linear_bn", "conv3d_bn", "conv2d_bn", "linear_relu_bn"],
)
def test_unfolded_batch_norm_is_detected(layers: tuple, unfolded: bool) -> None:
    assert qat._unfolded_bn(torch.nn.Sequential(*layers)) is unfolded


def test_cli_refuses_qat_where_it_does_not_apply(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from backend_spec.cli.app import app

    spec = str(SPECS / "tutorial.yaml")
    done = CliRunner().invoke(app, ["check", spec, "--qat"])
    assert done.exit_code == 2
    assert "--qat applies to --flow pt2e or both" in done.output
    (tmp_path / "qat_models.py").write_text(
        textwrap.dedent(
            """
            import torch
            def small():
                return torch.nn.Sequential(torch.nn.Linear(4, 4)), (torch.randn(2, 4),)
            """
        )
    )
    model = f"{tmp_path / 'qat_models.py'}:small"
    done = CliRunner().invoke(app, ["explain", spec, "--model", model, "--qat"])
    assert done.exit_code == 2
    assert "--qat applies to --flow pt2e only" in done.output


def test_explain_qat_sees_the_batch_norm(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from backend_spec.cli.app import app

    (tmp_path / "qat_models.py").write_text(
        textwrap.dedent(
            """
            import torch
            def conv_bn_relu():
                torch.manual_seed(0)
                model = torch.nn.Sequential(
                    torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU()
                )
                return model, (torch.randn(2, 3, 8, 8),)
            """
        )
    )
    model = f"{tmp_path / 'qat_models.py'}:conv_bn_relu"
    args = ["explain", str(SPECS / "x86.yaml"), "--model", model, "--flow", "pt2e"]
    done = CliRunner().invoke(app, [*args, "--qat"])
    assert done.exit_code == 0, done.output
    line = "batch_norm (aten.batch_norm.default): (nn.Conv2d, nn.BatchNorm2d, nn.ReLU): annotated"
    assert line in done.output


def test_compiled_module_has_the_qat_quantizer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    from typer.testing import CliRunner

    from backend_spec.cli.app import app

    path = write_spec(tmp_path, ", fake_quant: fused_moving_avg", "")
    out = tmp_path / "kinds_quantizer.py"
    done = CliRunner().invoke(app, ["compile", str(path), "--target", "pt2e", "-o", str(out)])
    assert done.exit_code == 0, done.output
    spec = importlib.util.spec_from_file_location("kinds_quantizer", out)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "kinds_quantizer", module)  # its dataclass needs it
    spec.loader.exec_module(module)
    qat_table = module.QAT_TABLE
    assert qat_table == backend_spec.quantizer(path, qat=True).table
    trained, plain = module.get_quantizer(qat=True), module.get_quantizer()
    kinds = {s.get("fake_quant") for s in trained.table["specs"].values()}
    assert kinds == {"fused_moving_avg", "fake_quantize"}
    assert all("fake_quant" not in s for s in plain.table["specs"].values())


WEIGHT_ONLY = """\
spec_version: 6
name: weight_only
dtype_configs:
  w:
    input_dtype: float
    output_dtype: float
    weight_dtype: {{dtype: qint8, qscheme: symmetric, fake_quant: fake_quantize{ptq}}}
patterns:
  - pattern: F.conv2d
    dtype_configs: [w]
    aten: [[aten.conv2d.default]]
"""


@pytest.mark.parametrize("ptq", ["", ", ptq_fake_quant: true"], ids=["qat_only", "ptq_fake_quant"])
def test_a_weight_only_conv_before_batch_norm_prepares_for_qat(tmp_path: Path, ptq: str) -> None:
    """torchao's QAT conv-bn fold rebuilds the conv's qspec map by position (input, weight,
    bias); a weight-only rule wrote the weight alone and prepare_qat_pt2e failed (IndexError,
    Core ML's weight-only export). The float input now comes first, without a qspec."""
    from torchao.quantization.pt2e.quantize_pt2e import prepare_qat_pt2e

    spec = tmp_path / "weight_only.yaml"
    spec.write_text(WEIGHT_ONLY.format(ptq=ptq))
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)).train()
    example = (torch.randn(2, 3, 8, 8),)
    exported = torch.export.export(model, example).module()
    prepared = prepare_qat_pt2e(exported, backend_spec.quantizer(spec, qat=True))
    prepared(*example)
    (conv,) = [n for n in prepared.graph.nodes if n.target == torch.ops.aten.conv2d.default]
    observed = [arg.op == "call_module" for arg in conv.args[:2]]
    assert observed == [False, True]  # the input stays float, the weight is fake-quantized
