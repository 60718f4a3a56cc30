"""QAT conv -> batch_norm -> add [-> relu] as one unit (X86's and Arm-inductor's QAT configs).

``prepare_qat_pt2e`` annotates the training graph before folding, and torchao's X86 and
Arm-inductor quantizers annotate conv-bn-add(-relu) as one fused unit there. Four ops are more
than torch's forward ``pattern`` takes, so the chain is written in torch's complex format
(``(relu, (add, (bn, conv), MatchAllNode))``, as torch's onednn backend writes it), which the
pt2e runtime traces as a chain (batch_norm kept in QAT, folded in PTQ). Fast tests run the
runtime on a hand-written spec and inference on a few probes; slow ones export the configs
and compare them with the originals on models the export never saw."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from _export_helpers import FIXTURES, export, fixture, named_models, qat_differences

nn = torch.nn

SPEC = """\
spec_version: 8
name: conv_bn_add
dtype_configs:
  weighted:
    input_dtype: {dtype: quint8, observer: histogram, reduce_range: false}
    output_dtype: {dtype: quint8, observer: histogram, reduce_range: false}
    weight_dtype: {dtype: qint8, granularity: per_channel, ch_axis: 0, qscheme: symmetric}
    bias_dtype: float
patterns:
  - pattern_complex_format: [nn.ReLU, [operator.add, [nn.BatchNorm2d, nn.Conv2d], MatchAllNode]]
    dtype_configs: [weighted]
    root_module: nn.Conv2d
    reference_quantized_module: nnqr.Conv2d
    root_node_getter: _conv_bn_add_relu_root_node_getter_left
    extra_inputs_getter: _conv_bn_add_relu_extra_inputs_getter_left
    extra_inputs: quantized
    chain_input: any
  - pattern: [nn.Conv2d, nn.BatchNorm2d, operator.add]
    dtype_configs: [weighted]
    root_module: nn.Conv2d
    reference_quantized_module: nnqr.Conv2d
    extra_inputs: quantized
    chain_input: any
"""


class _Block(nn.Module):
    """``bn(conv(x)) + x`` (or ``x + bn(conv(x))``), then relu or not."""

    def __init__(self, right: bool, relu: bool) -> None:
        super().__init__()
        self.conv, self.bn = nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4)
        self.right, self.relu = right, nn.ReLU() if relu else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bn(self.conv(x))
        return self.relu(x + y if self.right else y + x)


def _annotations(quantizer, model: nn.Module) -> dict[str, tuple]:
    """Node -> (ATen op, input qspec kinds by position, output qspec kind), as ``quantizer``
    annotates the training-mode graph of ``model`` (``None``: not quantized)."""
    from backend_spec.export.quantizer import probe

    graph = torch.export.export(model.train(), (torch.randn(2, 4, 8, 8),)).module()
    quantizer.annotate(graph)
    found = {}
    for node in graph.graph.nodes:
        if node.op == "call_function" and not probe._integer_valued(node):
            seen = probe.describe_node(node)
            inputs = {k: v["kind"] for k, v in seen["inputs"].items() if v is not None}
            found[node.name] = (str(node.target), inputs, (seen["output"] or {}).get("kind"))
    return found


def _spec(tmp_path: Path) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC)
    return path


@pytest.mark.parametrize(
    ("right", "relu"), [(False, True), (True, True), (False, False), (True, False)]
)
def test_the_spec_annotates_qat_conv_bn_add_where_x86_does(tmp_path, right, relu):
    """The complex-format entry (and the three-op one) annotate the training graph node for
    node as X86's QAT config: input and weight on the conv, the add's other input, the
    output on the last op, batch_norm and the link left alone; the conv on either side."""
    import backend_spec

    torch.manual_seed(0)
    model = _Block(right, relu)
    original = _annotations(fixture("qat_conv_bn_add", "x86_qat")(), model)
    spec = _annotations(backend_spec.quantizer(_spec(tmp_path), qat=True), model)
    assert spec == original
    assert original["conv2d"][1] == {"0": "observed", "1": "observed"}  # not vacuous


@pytest.mark.parametrize(
    ("qat", "chains"),
    [
        (True, ["conv2d>batch_norm>add>relu", "conv2d>batch_norm>add"]),
        (False, ["conv2d>add>relu", "conv2d>add"]),
    ],
)
def test_the_complex_chain_keeps_batch_norm_in_qat_and_folds_it_in_ptq(tmp_path, qat, chains):
    """``prepare_pt2e`` folds BN before annotating, ``prepare_qat_pt2e`` does not: the traced
    chain of the complex-format entry follows, as the forward pattern's does."""
    import backend_spec
    from backend_spec.pt2e.rules import compile_rules

    table, _report = compile_rules(backend_spec.load(_spec(tmp_path)).backend, qat=qat)
    found = [">".join(alts[0].split(".")[1] for alts in rule.chain) for rule in table.rules]
    assert found == chains


def test_fused_complex_entries_still_have_no_chain():
    """A complex-format entry with a fuser (onednn's conv-add) is quantized through its fused
    module in FX, which no traced chain says: it keeps its skip reason."""
    from torch.ao.quantization.utils import MatchAllNode

    from backend_spec.pt2e.rules import skip_reason, traceable_complex

    left = (nn.ReLU, (torch.add, (nn.BatchNorm2d, nn.Conv2d), MatchAllNode))
    right = (torch.add, MatchAllNode, (nn.BatchNorm2d, nn.Conv2d))
    assert traceable_complex(left, fused=False)
    assert not traceable_complex(left, fused=True)
    assert not traceable_complex(right, fused=False)  # the chain must be the first argument
    assert "no chain matcher" in skip_reason(None, left)
    assert skip_reason(None, left, fused=False) is None


def test_inference_writes_a_four_op_qat_chain_in_the_complex_format():
    """Probes of X86's QAT config on conv-bn-add-relu (modules, and relu as a function, which
    X86 does not fuse): the entry is the complex format with torch's onednn getters, spelled
    with its modules, and its QAT rule is the four-op chain."""
    from backend_spec.export.quantizer import probe
    from backend_spec.export.quantizer.infer import infer
    from backend_spec.ir.lower import backend_of
    from backend_spec.pt2e.rules import compile_rules

    names = ("nn.Conv2d", "nn.BatchNorm2d", "operator.add", "nn.ReLU")
    units = [probe.Unit(names, ">".join(names))]
    spelled = probe.functional_tail(names)
    units.append(probe.Unit(spelled, f"{units[0].key}@{'>'.join(spelled)}", True))
    parts, unit_names = probe.SuiteParts(), {}
    for unit in units:
        _unit, model, inputs, output = probe._build(unit)
        unit_names[unit.key] = unit.names
        widths = [probe._width(t) for t in inputs]
        made = probe.Probe(model, widths, probe._width(output), "alone")
        parts.add(probe.Branch(f"alone:{unit.key}", unit.key, "alone"), made, inputs)
    suite = probe.export_suite(parts, train=True).module(check_guards=False)
    fixture("qat_conv_bn_add", "x86_qat")().annotate(suite)
    probed = probe.by_context(probe.read_annotations(suite), parts.branches)
    backend = backend_of(infer(probed, unit_names, "t").backend_config)
    (entry,) = [e for e in backend if e.get("pattern_complex_format") is not None]
    assert entry.pattern is None and entry.aten == ()  # spelled with its modules
    assert (
        entry.get("root_node_getter").function.__name__ == "_conv_bn_add_relu_root_node_getter_left"
    )
    table, _report = compile_rules(backend, qat=True)
    chains = [[alts[0] for alts in rule.chain] for rule in table.rules]
    assert [
        "aten.conv2d.default",
        "aten.batch_norm.default",
        "aten.add.Tensor",
        "aten.relu.default",
    ] in chains


class _TwoBlocks(nn.Module):
    """A ResNet-like net none of export's models is: a conv-bn-relu stem, then two basic
    blocks, one adding the shortcut on the right (``x + bn(conv(x))``), each with ReLU
    modules of its own (X86 refuses a module called twice), then pool and a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.convs = nn.ModuleList(nn.Conv2d(8, 8, 3, padding=1) for _ in range(4))
        self.bns = nn.ModuleList(nn.BatchNorm2d(8) for _ in range(4))
        self.relus = nn.ModuleList(nn.ReLU() for _ in range(4))
        self.pool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        y = self.relus[0](self.bns[0](self.convs[0](x)))
        x = self.relus[1](self.bns[1](self.convs[1](y)) + x)
        y = self.relus[2](self.bns[2](self.convs[2](x)))
        x = self.relus[3](x + self.bns[3](self.convs[3](y)))
        return self.fc(torch.flatten(self.pool(x), 1))


def _two_blocks() -> tuple[nn.Module, tuple]:
    torch.manual_seed(0)
    return _TwoBlocks().eval(), (torch.randn(2, 3, 16, 16),)


class _ConvBnPlusLinear(nn.Module):
    """``relu(bn(conv(x)) + fc(x))`` then ``bn(conv(x)) + x``: an add both a conv-bn chain and a
    Linear chain end at (the Linear on the last dimension), and one only conv-bn does."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.bn = nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4)
        self.conv2, self.bn2 = nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4)
        self.fc, self.relu = nn.Linear(8, 8), nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.bn(self.conv(x)) + self.fc(x))
        return self.bn2(self.conv2(x)) + x


def _conv_bn_plus_linear() -> tuple[nn.Module, tuple]:
    torch.manual_seed(0)
    return _ConvBnPlusLinear().eval(), (torch.randn(2, 4, 8, 8),)


#: Two unseen nets only (two ResNet blocks, and the parity net ``residual``): each QAT convert
#: re-exports torchao's conv-bn patterns, a minute or more per model on two cores, and the
#: export's own QAT verification already runs every conv-bn unit (conv-bn-add, conv-bn +
#: ReLU6, ...) in training mode. (resblock and mobilenetish matched by hand at stop 35.)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("factory", "written", "models"),
    [
        # X86 annotates conv-bn-add-relu as one unit: four ops, the complex format.
        ("x86_qat", "pattern_complex_format: [nn.ReLU, [operator.add, [nn.BatchNorm2d,", ()),
        # Arm-inductor annotates conv-bn-add and leaves the relu to itself: three ops, a
        # forward pattern, matched from a conv module as Arm leaves a called conv float.
        ("arm_inductor_qat", "- pattern: [nn.Conv2d, nn.BatchNorm2d, operator.add]\n", ()),
        # Its per-type Linear pass claims Linear + add before conv-bn-add: claim stages, on
        # the model where both chains end at one add (the one that tells them apart).
        ("x86_qat_linear_float", "claim_stage: 0", ("conv_bn_plus_linear",)),
    ],
)
def test_a_qat_config_fusing_conv_bn_add_exports_and_matches(tmp_path, factory, written, models):
    """X86's and Arm-inductor's QAT configs export, verified in the QAT flow, with their
    conv-bn-add chain (and X86's per-type Linear pass claiming first), and train like the
    originals on models the export never saw (``models``; by default two ResNet blocks and
    the parity net ``residual``)."""
    done, out = export(tmp_path, f"{FIXTURES / 'qat_conv_bn_add.py'}:{factory}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "in the QAT flow" in done.stderr
    assert written in out.read_text()
    unseen = {
        "two_blocks": _two_blocks,
        "residual": dict(named_models("residual"))["residual"],
        "conv_bn_plus_linear": _conv_bn_plus_linear,
    }
    models = [(name, unseen[name]) for name in models or ("two_blocks", "residual")]
    assert qat_differences(out, fixture("qat_conv_bn_add", factory), models) == []


def test_an_inferred_spec_that_does_not_compile_is_reported_as_bespecs_bug(monkeypatch):
    """Inference writing what torch refuses (a four-op forward pattern, before the complex
    format: "Expected a tuple with 2 or 3 elements") is a refusal that says it is bespec's
    bug, not a bare error, and nothing is written."""
    from types import SimpleNamespace

    import backend_spec.export.quantizer as exporting
    from backend_spec.cli.render.quantizer_export import render_refusal

    def refused(*_args, **_kwargs):
        raise ValueError("Expected a tuple with 2 or 3 elements")

    monkeypatch.setattr(exporting, "infer", refused)
    flow = SimpleNamespace(
        branches=[], fmt="yaml", name="t", qat=True, probed={}, unit_names={},
        recorder=SimpleNamespace(pipeline=None, graph_inputs=[]),
    )  # fmt: skip
    flow.inferred = lambda **options: exporting._Flow.inferred(flow, **options)
    result = exporting._Flow.verify(flow, [])
    assert not result.ok and result.text == ""
    shown = render_refusal(result)
    assert "bespec bug: the inferred spec does not compile: ValueError: Expected a tuple" in shown
