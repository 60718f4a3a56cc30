"""Export of pt2e Quantizers, round 2 (issue 30): a verification that exercised what the
quantizer quantizes (embeddings probed with integer indices; an empty or unexercised spec is
not "verified"), fake-quantize configs (``fake_quant`` inferred, QAT configs verified in the
QAT flow), 16-bit activations.

Fast tests feed inference hand-made probe data; the slow ones export real quantizers of
torchao and executorch through the CLI, once each.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torchao", reason="the pt2e extra (torchao) is not installed")

import torch  # noqa: E402

from backend_spec.export.quantizer import probe  # noqa: E402
from backend_spec.export.quantizer.infer import infer  # noqa: E402
from backend_spec.ir.lower import backend_of  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "quantizers"
needs_executorch = pytest.mark.skipif(
    importlib.util.find_spec("executorch") is None, reason="executorch cannot be imported"
)

#: What EmbeddingQuantizer writes on an embedding's weight (its args[0]).
EMBEDDING_WEIGHT = {
    "kind": "observed",
    "dtype": "uint8",
    "quant_min": None,
    "quant_max": None,
    "qscheme": "per_channel_affine_float_qparams",
    "ch_axis": 0,
    "is_dynamic": False,
    "observer": "PerChannelMinMaxObserver",
    "kwargs": {"eps": 2**-12},
}

ACT = {
    "kind": "observed",
    "dtype": "int8",
    "quant_min": -128,
    "quant_max": 127,
    "qscheme": "per_tensor_affine",
    "ch_axis": None,
    "is_dynamic": False,
    "observer": "HistogramObserver",
    "kwargs": {"eps": 2**-12},
}


def _unit(ops):
    return {"ops": ops, "pre": [], "post": []}


def _embedding_graph():
    """An exported embedding (weight, integer indices) and its node."""
    model = torch.nn.Embedding(10, 4)
    exported = torch.export.export(model, (torch.randint(0, 10, (2, 3)),)).module()
    (node,) = [n for n in exported.graph.nodes if n.op == "call_function"]
    return exported, node


def test_an_embedding_is_probed_with_integer_indices_and_its_weight_found_by_name():
    """The probe suite has embedding branches (alone, and feeding a Linear); its node reads
    the weight at position 0 and integer indices, which are no activation."""
    from torchao.quantization.pt2e.quantizer import QuantizationAnnotation

    keys = {unit.key for unit in probe.units()}
    assert "aten.embedding.default" in keys
    exported, node = _embedding_graph()
    described = probe.describe_node(node)
    assert described["weight"] == "0"
    assert described["kinds"]["1"] == "index"
    node.meta["quantization_annotation"] = QuantizationAnnotation(input_qspec_map={})
    assert probe.describe_node(node)["weight"] == "0"


def test_an_embedding_weight_annotation_becomes_a_weight_only_embedding_entry():
    op = {
        "target": "aten.embedding.default",
        "annotated": True,
        "inputs": {"0": EMBEDDING_WEIGHT},
        "kinds": {"0": "param", "1": "index"},
        "output": None,
        "weight": "0",
    }
    probed = {"alone": {"aten.embedding.default": _unit([op])}}
    inferred = infer(probed, {"aten.embedding.default": ("nn.Embedding",)}, "t")
    (entry,) = backend_of(inferred.backend_config)
    (dtype_config,) = entry.dtype_configs
    assert dtype_config.mapping("input_dtype").dtype == torch.float
    weight = dtype_config.mapping("weight_dtype")
    assert (weight.dtype, weight.get("scale_min_lower_bound")) == (torch.quint8, 2**-12)
    assert inferred.gaps == []


def test_the_spec_of_a_weight_only_embedding_builds_the_embedding_quantizers_observer():
    """Float qparams, axis 0, the eps of ``scale_min_lower_bound`` and no custom range (an
    observer given one computes its qparams otherwise)."""
    import backend_spec

    text = """\
spec_version: 2
name: t
dtype_configs:
  table:
    input_dtype: float
    output_dtype: float
    weight_dtype: {dtype: quint8, scale_min_lower_bound: 0.000244140625}
patterns:
  - pattern: nn.Embedding
    dtype_configs: [table]
    root_module: nn.Embedding
    reference_quantized_module: nnqr.Embedding
"""
    quantizer = backend_spec.quantizer(backend_spec.loads(text, format="yaml"))
    (spec,) = quantizer.table["specs"].values()
    assert spec["qscheme"] == "per_channel_affine_float_qparams" and spec["ch_axis"] == 0
    assert (spec["quant_min"], spec["quant_max"]) == (None, None)
    assert spec["observer_kwargs"] == {"eps": 2**-12}


FUSED = {
    **ACT,
    "observer": "FusedMovingAvgObsFakeQuantize",
    "kwargs": {"eps": 2**-12},
}
FUSED_PER_CHANNEL = {
    **ACT,
    "qscheme": "per_channel_symmetric",
    "quant_min": -127,
    "ch_axis": 0,
    "observer": "FusedMovingAvgObsFakeQuantize",
    "kwargs": {
        "eps": 2**-12,
        "observer": {"class": "MovingAveragePerChannelMinMaxObserver", "kwargs": {}},
    },
}


def test_a_fake_quantize_qspec_becomes_fake_quant_and_the_observer_it_wraps():
    kinds = {"0": "act", "1": "param"}
    op = {
        "target": "aten.linear.default",
        "annotated": True,
        "inputs": {"0": FUSED, "1": FUSED_PER_CHANNEL},
        "kinds": kinds,
        "output": FUSED,
    }
    probed = {"alone": {"aten.linear.default": _unit([op])}}
    inferred = infer(probed, {"aten.linear.default": ("F.linear",)}, "t")
    assert inferred.gaps == []
    (entry,) = backend_of(inferred.backend_config)
    (dtype_config,) = entry.dtype_configs
    act, weight = dtype_config.mapping("input_dtype"), dtype_config.mapping("weight_dtype")
    assert (act.get("fake_quant"), act.get("observer")) == (
        "fused_moving_avg",
        "moving_average_minmax",
    )
    assert (weight.get("fake_quant"), weight.get("granularity")) == (
        "fused_moving_avg",
        "per_channel",
    )
    assert act.get("ptq_fake_quant") is weight.get("ptq_fake_quant") is True


def test_a_fake_quantizes_channel_axis_is_its_observers_not_the_qspecs():
    """torchao's prepare passes a qspec's ch_axis only to "PerChannel" classes: XNNPACK's QAT
    conv_transpose weight (qspec axis 1) is fake-quantized on axis 0, and so must the spec's."""
    weight = {**FUSED_PER_CHANNEL, "ch_axis": 1}
    op = {
        "target": "aten.conv_transpose2d.input",
        "inputs": {"0": FUSED, "1": weight},
        "kinds": {"0": "act", "1": "param"},
        "output": FUSED,
    }
    probed = {"alone": {"aten.conv_transpose2d.input": _unit([op])}}
    inferred = infer(probed, {"aten.conv_transpose2d.input": ("F.conv_transpose2d",)}, "t")
    (entry,) = backend_of(inferred.backend_config)
    (dtype_config,) = entry.dtype_configs
    assert dtype_config.mapping("weight_dtype").get("ch_axis") == 0


@pytest.mark.parametrize("qat", [False, True], ids=["ptq", "qat"])
def test_ptq_fake_quant_makes_the_ptq_quantizer_fake_quantize_as_the_qat_one_does(qat):
    """Version 6: a mapping with ``ptq_fake_quant`` observes with its fake-quantize in PTQ as
    well (Core ML's PTQ config of fake-quantizes); one without keeps its observer in PTQ."""
    import backend_spec

    def spec(ptq: str) -> str:
        fake = f"observer: moving_average_minmax, fake_quant: fused_moving_avg{ptq}"
        return f"""\
spec_version: 6
name: t
dtype_configs:
  w8a8:
    input_dtype: {{dtype: qint8, {fake}}}
    output_dtype: {{dtype: qint8, {fake}}}
    weight_dtype: {{dtype: qint8, qscheme: symmetric, {fake}}}
patterns:
  - pattern: F.linear
    dtype_configs: [w8a8]
"""

    with_key = backend_spec.quantizer(backend_spec.loads(spec(", ptq_fake_quant: true")), qat=qat)
    without = backend_spec.quantizer(backend_spec.loads(spec("")), qat=qat)
    kinds = {data.get("fake_quant") for data in with_key.table["specs"].values()}
    assert kinds == {"fused_moving_avg"}
    plain = {data.get("fake_quant") for data in without.table["specs"].values()}
    assert plain == ({"fused_moving_avg"} if qat else {None})


@pytest.mark.parametrize(
    ("observers", "qat"),
    [
        (["FusedMovingAvgObsFakeQuantize", "FakeQuantize"], True),
        (["FusedMovingAvgObsFakeQuantize", "HistogramObserver"], False),
        ([], False),
    ],
    ids=["all_fake_quantize", "mixed", "nothing"],
)
def test_a_quantizer_of_fake_quantizes_only_is_a_qat_config(observers, qat):
    ops = [
        {"inputs": {"0": {**ACT, "observer": name}}, "output": None, "kinds": {}}
        for name in observers
    ]
    assert probe.only_fake_quants({0: {"ops": ops, "pre": [], "post": []}}) is qat


@needs_executorch
@pytest.mark.parametrize(
    ("factory", "qat"),
    [("xnnpack_qat", True), ("x86_qat", True), ("a16w8", False), ("embedding_only", False)],
)
def test_qat_configs_are_recognised_before_probing(factory, qat):
    """The QAT flow is chosen from the qspecs a quantizer's configs hold (or, holding none,
    writes on two small models), before the suite is probed."""
    from backend_spec.export.quantizer import _fake_quants_only

    assert _fake_quants_only(_original(factory)()) is qat


def test_an_empty_spec_or_an_op_the_probes_never_ran_is_not_verified():
    """An empty spec matches a quantizer that quantized nothing on the suite; an op the
    quantizer declares (get_supported_operators) that no probe ran is left out unseen."""
    from torchao.quantization.pt2e.quantizer.embedding_quantizer import EmbeddingQuantizer

    from backend_spec._torch import BackendConfig
    from backend_spec.export.quantizer import _unexercised
    from backend_spec.export.quantizer.infer import Inferred

    exported, _node = _embedding_graph()
    empty = Inferred(BackendConfig("t"))
    assert _unexercised(EmbeddingQuantizer(), exported, empty)[0].startswith(
        "the quantizer quantized nothing"
    )
    linear = torch.export.export(torch.nn.Linear(4, 4), (torch.randn(2, 4),)).module()
    (why,) = _unexercised(EmbeddingQuantizer(), linear, _embedding_inferred())
    assert "declares ops no probe or model exercised" in why and "nn.Embedding" in why
    assert _unexercised(EmbeddingQuantizer(), exported, _embedding_inferred()) == []


def _embedding_inferred():
    op = {
        "target": "aten.embedding.default",
        "inputs": {"0": EMBEDDING_WEIGHT},
        "kinds": {"0": "param", "1": "index"},
        "output": None,
        "weight": "0",
    }
    probed = {"alone": {"aten.embedding.default": _unit([op])}}
    return infer(probed, {"aten.embedding.default": ("nn.Embedding",)}, "t")


def test_spellings_annotated_with_different_qspecs_get_an_entry_each():
    """XNNPACK's set_module_type(nn.Linear, per-tensor config) matches nn.Linear only, so
    F.linear keeps the global per-channel config: one entry per spelling, nn.Linear matched
    as a module first, the call's entry by its ATen op (every other spelling: F.linear inside
    nn.MultiheadAttention keeps the global config too)."""

    def linear(weight_qscheme):
        weight = {**ACT, "qscheme": weight_qscheme, "ch_axis": 0, "observer": "MinMaxObserver"}
        return {
            "target": "aten.linear.default",
            "inputs": {"0": ACT, "1": weight},
            "kinds": {"0": "act", "1": "param"},
            "output": ACT,
        }

    def probed(module_qscheme):
        return {
            "alone": {
                "aten.linear.default": _unit([linear(module_qscheme)]),
                "aten.linear.default@F.linear": _unit([linear("per_tensor_symmetric")]),
            }
        }

    names = {"aten.linear.default": ("nn.Linear",), "aten.linear.default@F.linear": ("F.linear",)}
    apart = backend_of(infer(probed("per_channel_symmetric"), names, "t").backend_config)
    assert [bool(entry.aten) for entry in apart.entries] == [False, True]
    alike = backend_of(infer(probed("per_tensor_symmetric"), names, "t").backend_config)
    assert len(alike.entries) == 1 and alike.entries[0].aten


def test_a_chain_left_float_after_a_quantized_first_op_gets_a_float_entry():
    """Dynamic XNNPACK quantizes a lone conv but skips a conv whose only user is relu: the
    chain gets a float entry (longest first, it claims the conv)."""
    dynamic = {**ACT, "observer": "PlaceholderObserver", "kwargs": {}, "is_dynamic": True}
    weight = {**ACT, "qscheme": "per_channel_symmetric", "ch_axis": 0}
    conv = {
        "target": "aten.conv2d.default",
        "inputs": {"0": dynamic, "1": weight},
        "kinds": {"0": "act", "1": "param"},
        "output": None,
    }

    def bare(target):
        return {"target": target, "inputs": {}, "kinds": {"0": "act"}, "output": None}

    chain = [bare("aten.conv2d.default"), bare("aten.relu.default")]
    probed = {
        "alone": {
            "aten.conv2d.default": _unit([conv]),
            "nn.Conv2d>nn.ReLU": _unit(chain),
        }
    }
    names = {"aten.conv2d.default": ("nn.Conv2d",), "nn.Conv2d>nn.ReLU": ("nn.Conv2d", "nn.ReLU")}
    backend = backend_of(infer(probed, names, "t").backend_config)
    by_length = {len(entry.aten[0]): entry for entry in backend}
    (floating,) = by_length[2].dtype_configs
    assert floating.mapping("input_dtype").dtype == torch.float
    assert floating.mapping("weight_dtype").dtype is None
    (dynamic_config,) = by_length[1].dtype_configs
    assert dynamic_config.is_dynamic


def _fails_on_sigmoid():
    """A quantizer with a bug on one op (OpenVINO's on a LayerNorm bias): it raises when the
    graph has a sigmoid."""
    from torchao.quantization.pt2e.quantizer import Quantizer

    class FailsOn(Quantizer):
        def annotate(self, model):
            if any(node.target == torch.ops.aten.sigmoid.default for node in model.graph.nodes):
                raise RuntimeError("cannot annotate sigmoid")
            return model

        def validate(self, model):
            """Nothing to check."""

    return FailsOn()


def test_a_failing_op_is_isolated_with_all_its_probes_and_the_models_named():
    """The probes of one unit (every context) are one group, each model its own: the search
    leaves out every sigmoid probe and the model with a sigmoid, and keeps the rest; the
    report names the model and the op."""
    from backend_spec.cli.render.quantizer_export import render_left_out
    from backend_spec.export.quantizer import QuantizerExport, _without_failing
    from backend_spec.export.quantizer.infer import Inferred

    parts = probe.SuiteParts()
    made = [
        (probe.Branch("alone:aten.relu.default", "aten.relu.default", "alone"), torch.nn.ReLU()),
        (
            probe.Branch("alone:aten.sigmoid.default", "aten.sigmoid.default", "alone"),
            torch.nn.Sigmoid(),
        ),
        (
            probe.Branch("pre:aten.sigmoid.default", "aten.sigmoid.default", "pre"),
            torch.nn.Sigmoid(),
        ),
        (probe.Branch("mlp"), torch.nn.Tanh()),
        (probe.Branch("gated"), torch.nn.Sequential(torch.nn.Tanh(), torch.nn.Sigmoid())),
    ]
    for branch, module in made:
        parts.add(branch, module, (torch.randn(2, 4),))
    suite = probe.export_suite(parts).module(check_guards=False)
    branches = [branch for branch, _ in made]
    _rest, dropped = _without_failing(
        suite, _fails_on_sigmoid, (tuple(parts.inputs), None), branches, "error", False
    )
    assert dropped == {1, 2, 4}
    from backend_spec._torch import BackendConfig

    result = QuantizerExport("", Inferred(BackendConfig("t")))
    result.left_out = [branches[i].label for i in sorted(dropped)]
    assert render_left_out(result) == (
        "note: the quantizer itself fails on models gated; 2 probes of aten.sigmoid.default "
        "(left out)\n"
    )


def _per_channel_norm_weight():
    """Like OpenVINO's quantizer: a per-channel observer on layer_norm's 1-D weight, which
    annotates and prepares but raises when calibrated (``flatten(start_dim=1)`` of 1-D)."""
    from torchao.quantization.pt2e import PerChannelMinMaxObserver
    from torchao.quantization.pt2e.quantizer import (
        QuantizationAnnotation,
        QuantizationSpec,
        Quantizer,
    )

    qspec = QuantizationSpec(
        dtype=torch.int8,
        observer_or_fake_quant_ctr=PerChannelMinMaxObserver,
        quant_min=-128,
        quant_max=127,
        qscheme=torch.per_channel_symmetric,
        ch_axis=0,
    )

    class NormWeight(Quantizer):
        def annotate(self, model):
            for node in model.graph.nodes:
                if node.target == torch.ops.aten.layer_norm.default:
                    weight = node.args[2]
                    node.meta["quantization_annotation"] = QuantizationAnnotation(
                        input_qspec_map={weight: qspec}, _annotated=True
                    )
            return model

        def validate(self, model):
            """Nothing to check."""

    return NormWeight()


@pytest.mark.parametrize(
    ("converted", "expected"),
    [({0, 1}, {1}), (None, {1, 2})],
    ids=["probes-prepared-only", "all-calibrated"],
)
def test_a_branch_is_left_out_only_when_it_fails_the_run_the_export_makes(converted, expected):
    """The failure search repeats the failing run: the probes are only prepared there (not
    calibrated), so a probe whose observer fails when calibrated is kept and compared as
    prepared; only the model that failed is left out."""
    from backend_spec.export.quantizer.verify import failing_branches, run

    parts = probe.SuiteParts()
    made = [
        ("mlp", torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())),
        ("normed", torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))),
        ("alone:aten.layer_norm.default", torch.nn.LayerNorm(4)),
    ]
    for label, module in made:
        parts.add(probe.Branch(label), module, (torch.randn(2, 4),))
    suite = probe.export_suite(parts).module(check_guards=False)
    inputs = tuple(parts.inputs)
    assert run(suite, _per_channel_norm_weight(), inputs, converted).error
    found = failing_branches(suite, _per_channel_norm_weight, inputs, 3, converted=converted)
    assert found == expected


# --- slow: one CLI export per quantizer ----------------------------------------------------


def _bespec(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "backend_spec", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=900,
    )


def _export(tmp_path: Path, ref: str, *extra: str) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path / "spec.yaml"
    return _bespec("export", ref, "-o", str(out), *extra), out


def _original(name: str):
    sys.path.insert(0, str(FIXTURES))
    try:
        import round2
    finally:
        sys.path.remove(str(FIXTURES))
    return getattr(round2, name)


def _matches(spec: Path, original, models) -> list[str]:
    import backend_spec
    from backend_spec.pt2e.compare import compare_quantizers

    results = compare_quantizers(original, lambda: backend_spec.quantizer(spec), models)
    return [f"{r.name}: {d}" for r in results for d in r.differences]


def _qat_matches(spec: Path, original, models) -> list[str]:
    """The models on which the spec's QAT quantizer and the original differ after the same
    training-mode passes (outputs, activation qparams)."""
    import backend_spec
    from backend_spec.pt2e.flows import calibration
    from backend_spec.pt2e.qat import run_pt2e_qat

    differing = []
    for name, factory in models:
        model, example_inputs = factory()
        batches = calibration(example_inputs)
        first = run_pt2e_qat(original(), model, example_inputs, batches)
        second = run_pt2e_qat(
            backend_spec.quantizer(spec, qat=True), model, example_inputs, batches
        )
        if not torch.equal(first.output, second.output) or first.qparams != second.qparams:
            differing.append(name)
    return differing


def _hidden_models(*names: str):
    from backend_spec.pt2e import parity_nets
    from backend_spec.pt2e.nets import NETS

    models = {**NETS, **parity_nets.PARITY_NETS}
    return [(name, models[name]) for name in names]


@pytest.mark.slow
@needs_executorch
def test_an_embedding_and_xnnpack_composition_exports_both_parts(tmp_path):
    """ComposableQuantizer([EmbeddingQuantizer(), XNNPACK]): the embedding's weight-only entry
    is written beside XNNPACK's entries, and the spec matches on models with an embedding
    that the export never saw."""
    from backend_spec.export.quantizer.models import MODELS

    done, out = _export(tmp_path, f"{FIXTURES / 'round2.py'}:embedding_and_xnnpack")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "verified:" in done.stderr
    text = out.read_text()
    assert "aten: [[aten.embedding.default]]" in text and "dtype: quint8" in text
    unseen = [("embedding", MODELS["embedding"]), *_hidden_models("x86_net", "transformer")]
    assert _matches(out, _original("embedding_and_xnnpack"), unseen) == []
    alone = _matches(out, _original("embedding_only"), [("embedding", MODELS["embedding"])])
    assert alone  # the composition quantizes more than the embedding alone: not vacuous


@pytest.mark.slow
@needs_executorch
def test_a_16_bit_activation_config_exports_and_matches(tmp_path):
    """Arm-style a16w8 (int16 symmetric activations, int8 per-channel weights) exports with
    int16 dtype mappings and matches on unseen models."""
    done, out = _export(tmp_path, f"{FIXTURES / 'round2.py'}:a16w8")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "{dtype: int16, quant_min_lower_bound: -32767" in out.read_text()
    assert _matches(out, _original("a16w8"), _hidden_models("resnet18_net", "functional")) == []


@pytest.mark.slow
@needs_executorch
def test_xnnpacks_qat_config_is_verified_in_the_qat_flow(tmp_path):
    """get_symmetric_quantization_config(is_qat=True): every qspec is a fake-quantize, so export
    verifies in the QAT flow by itself; the spec writes fused_moving_avg with ptq_fake_quant
    (version 6), and its QAT quantizer trains like the original on unseen models."""
    done, out = _export(tmp_path, f"{FIXTURES / 'round2.py'}:xnnpack_qat")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "in the QAT flow" in done.stderr
    text = out.read_text()
    assert "spec_version: 6\n" in text
    assert "fake_quant: fused_moving_avg" in text and "ptq_fake_quant: true" in text
    models = _hidden_models("resnet18_net", "conv_bn_relu", "transformer")
    assert _qat_matches(out, _original("xnnpack_qat"), models) == []


def test_a_graph_input_observed_for_its_reader_is_read_as_the_readers_input():
    """Some graph inputs observed on their own output (those a linear reads), others not: the
    probes describe the observer as the linear's input qspec, and inference writes no gap."""
    from tests.fixtures.quantizers.odd import reader_side_quantizer

    parts = probe.SuiteParts()
    for label, module in (("lin", torch.nn.Linear(4, 4)), ("relu", torch.nn.ReLU())):
        made = probe.Probe(module, [4], 4, "alone")
        parts.add(probe.Branch(f"alone:{label}", label, "alone"), made, (torch.randn(2, 4),))
    suite = probe.export_suite(parts).module(check_guards=False)
    reader_side_quantizer().annotate(suite)
    found = probe.read_annotations(suite)
    (linear,) = found[0]["ops"]
    assert linear["inputs"]["0"]["observer"] == "MinMaxObserver"
    assert linear["inputs"]["1"]["qscheme"] == "per_channel_symmetric"
    assert [op["inputs"] for op in found[1]["ops"]] == [{}]
    inputs = probe.read_graph_inputs(suite)
    assert [q is not None for q in inputs] == [True, False]
    names = {"lin": ("nn.Linear",)}
    probed = {"alone": {"lin": found[0]}}
    assert infer(probed, names, "t", inputs).gaps == []


@pytest.mark.slow
def test_a_quantizer_observing_graph_inputs_for_their_readers_exports_and_matches(tmp_path):
    done, out = _export(tmp_path, f"{FIXTURES / 'odd.py'}:reader_side_quantizer")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "verified" in done.stderr
    from tests.fixtures.quantizers.odd import reader_side_quantizer

    unseen = _hidden_models("resnet18_net", "functional")
    assert _matches(out, reader_side_quantizer, unseen) == []


@pytest.mark.parametrize("eps", [1e-16, 2**-12])
def test_an_observer_eps_below_the_default_is_written_and_rebuilt(tmp_path, eps):
    """OpenVINO's observers take ``eps=1e-16``: the spec writes it as scale_min_lower_bound
    and its quantizer's observers get it back (before, an eps under float32's was dropped)."""
    import backend_spec
    from backend_spec.export import dump

    act = {**ACT, "kwargs": {"eps": eps}}
    weight = {**act, "qscheme": "per_channel_symmetric", "ch_axis": 0}
    weight["observer"] = "PerChannelMinMaxObserver"
    op = {
        "target": "aten.linear.default",
        "inputs": {"0": act, "1": weight},
        "kinds": {"0": "act", "1": "param"},
        "output": act,
        "weight": "1",
        "args": {},
    }
    probed = {context: {} for context in probe.CONTEXTS}
    probed["alone"]["aten.linear.default"] = _unit([op])
    inferred = infer(probed, {"aten.linear.default": ("nn.Linear",)}, "t")
    assert inferred.gaps == []
    path = tmp_path / "t.yaml"
    path.write_text(dump(inferred.backend_config, "yaml", name="t"))
    model = torch.export.export(torch.nn.Linear(4, 4).eval(), (torch.randn(2, 4),)).module()
    from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

    prepared = prepare_pt2e(model, backend_spec.quantizer(backend_spec.load(path)))
    found = {float(m.eps) for m in prepared.modules() if hasattr(m, "eps")}
    assert found == {float(torch.tensor(eps, dtype=torch.float32))}
