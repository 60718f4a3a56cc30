"""Export of pt2e Quantizers, round 2 (issue 30): a verification that exercised what the
quantizer quantizes (embeddings probed with integer indices; an empty or unexercised spec is
not "verified"), fake-quantize configs (``fake_quant`` inferred, QAT configs verified in the
QAT flow), 16-bit activations.

Fast tests feed inference hand-made probe data; the slow ones export real quantizers of
torchao and executorch through the CLI, once each.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torchao", reason="the pt2e extra (torchao) is not installed")

import torch  # noqa: E402
from _export_helpers import (  # noqa: E402
    FIXTURES,
    differences,
    export,
    fixture,
    named_models,
    needs_executorch,
    observed,
    qat_differences,
)

from backend_spec.export.quantizer import probe  # noqa: E402
from backend_spec.export.quantizer.infer import infer  # noqa: E402
from backend_spec.ir.lower import backend_of  # noqa: E402

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

ACT = observed()


def _unit(ops):
    return {"ops": ops, "pre": [], "post": []}


def _weight_only_linear(weight):
    """Probe results and unit names of an F.linear whose only qspec is ``weight``'s."""
    op = {
        "target": "aten.linear.default",
        "annotated": True,
        "inputs": {"1": weight},
        "kinds": {"0": "act", "1": "param"},
        "output": None,
    }
    return {"alone": {"aten.linear.default": _unit([op])}}, {"aten.linear.default": ("F.linear",)}


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


def _embedding_probed() -> dict:
    """Probe results of an embedding whose only qspec is EmbeddingQuantizer's on its weight."""
    op = {
        "target": "aten.embedding.default",
        "annotated": True,
        "inputs": {"0": EMBEDDING_WEIGHT},
        "kinds": {"0": "param", "1": "index"},
        "output": None,
        "weight": "0",
    }
    return {"alone": {"aten.embedding.default": _unit([op])}}


def test_an_embedding_weight_annotation_becomes_a_weight_only_embedding_entry():
    probed = _embedding_probed()
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
    from backend_spec.export.quantizer.verify import Run

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
    failed = Run({}, (), "error")
    _rest, dropped = _without_failing(
        suite, _fails_on_sigmoid, (tuple(parts.inputs), None), branches, failed, False
    )
    assert dropped == {1, 2, 4}
    from backend_spec._torch import BackendConfig

    result = QuantizerExport("", Inferred(BackendConfig("t")))
    result.left_out = [branches[i].label for i in sorted(dropped)]
    assert render_left_out(result) == (
        "note: the quantizer itself fails on models gated; 2 probes of aten.sigmoid.default "
        "(left out)\n"
    )


def test_failures_past_the_search_cap_are_reported_as_such(monkeypatch):
    """A quantizer that fails on more branches than the capped search can isolate (X86's QAT
    config with conv set to None raises in the conv-bn fold on every conv-bn probe and model):
    the error says the search gave up, not that the quantizer fails on every probe."""
    from backend_spec.export.quantizer import _without_failing, verify

    parts = probe.SuiteParts()
    branches = []
    for index in range(4):
        branch = probe.Branch(f"alone:sigmoid{index}", f"sigmoid{index}", "alone")
        parts.add(branch, torch.nn.Sigmoid(), (torch.randn(2, 4),))
        branches.append(branch)
    suite = probe.export_suite(parts).module(check_guards=False)
    monkeypatch.setattr(verify, "MAX_ISOLATION_RUNS", 1)
    failed = verify.Run({}, (), "error")
    with pytest.raises(ValueError, match=r"more probes and models than 1 runs can isolate"):
        _without_failing(
            suite, _fails_on_sigmoid, (tuple(parts.inputs), None), branches, failed, False
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


def test_a_failure_after_prepare_is_searched_among_the_calibrated_branches_only(monkeypatch):
    """A run that prepared the whole suite and failed in calibration can only fail on the
    branches it calibrated (the models): the search runs those alone, never the probes (with
    OpenVINO's quantizer a trial of the probes is a run of nncf on hundreds of them)."""
    from backend_spec.export.quantizer import _without_failing
    from backend_spec.export.quantizer import verify as verify_module

    parts = probe.SuiteParts()
    made = [
        ("mlp", torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())),
        ("normed", torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))),
        ("alone:aten.layer_norm.default", torch.nn.LayerNorm(4)),
    ]
    branches = [probe.Branch(label) for label, _ in made]
    for branch, (_, module) in zip(branches, made, strict=True):
        parts.add(branch, module, (torch.randn(2, 4),))
    suite = probe.export_suite(parts).module(check_guards=False)
    inputs, converted = tuple(parts.inputs), {0, 1}
    failed = verify_module.run(suite, _per_channel_norm_weight(), inputs, converted)
    assert failed.error and failed.after_prepare
    tried: list[set[int]] = []
    real_run = verify_module.run

    def recorded(module, *args, **kwargs):
        found = {probe.branch_of(n) for n in module.graph.nodes if n.op == "call_function"}
        tried.append({where[0] for where in found if where is not None})
        return real_run(module, *args, **kwargs)

    monkeypatch.setattr(verify_module, "run", recorded)
    _rest, dropped = _without_failing(
        suite, _per_channel_norm_weight, (inputs, converted), branches, failed, False
    )
    assert dropped == {1}
    assert tried and all(2 not in kept for kept in tried)


# --- slow: one CLI export per quantizer ----------------------------------------------------


def _original(name: str):
    return fixture("round2", name)


@pytest.mark.slow
@needs_executorch
def test_an_embedding_and_xnnpack_composition_exports_both_parts(tmp_path):
    """ComposableQuantizer([EmbeddingQuantizer(), XNNPACK]): the embedding's weight-only entry
    is written beside XNNPACK's entries, and the spec matches on models with an embedding
    that the export never saw."""
    from backend_spec.export.quantizer.models import MODELS

    done, out = export(tmp_path, f"{FIXTURES / 'round2.py'}:embedding_and_xnnpack")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "verified:" in done.stderr
    text = out.read_text()
    assert "aten: [[aten.embedding.default]]" in text and "dtype: quint8" in text
    unseen = [("embedding", MODELS["embedding"]), *named_models("x86_net", "transformer")]
    assert differences(out, _original("embedding_and_xnnpack"), unseen) == []
    alone = differences(out, _original("embedding_only"), [("embedding", MODELS["embedding"])])
    assert alone  # the composition quantizes more than the embedding alone: not vacuous


@pytest.mark.parametrize("qat", [True, False], ids=["qat", "ptq"])
def test_a_plain_weight_observer_in_the_qat_flow_is_kept_as_the_observer(qat):
    """EmbeddingQuantizer's PerChannelMinMaxObserver read in the QAT flow becomes
    ``fake_quant: observer`` (version 10); read in PTQ it is the plain mapping it always was."""
    probed = _embedding_probed()
    inferred = infer(probed, {"aten.embedding.default": ("nn.Embedding",)}, "t", qat=qat)
    (entry,) = backend_of(inferred.backend_config)
    weight = entry.dtype_configs[0].mapping("weight_dtype")
    assert weight.get("fake_quant") == ("observer" if qat else None)


OBSERVER_IN_QAT_SPEC = """\
spec_version: 10
name: t
dtype_configs:
  table:
    input_dtype: float
    output_dtype: float
    weight_dtype: {{dtype: quint8, granularity: per_channel, ch_axis: 0, fake_quant: {kind}}}
patterns:
  - pattern: nn.Embedding
    dtype_configs: [table]
    root_module: nn.Embedding
    reference_quantized_module: nnqr.Embedding
"""


@pytest.mark.parametrize(
    ("kind", "built"),
    [("observer", "PerChannelMinMaxObserver"), ("fake_quantize", "FakeQuantize")],
)
def test_fake_quant_observer_keeps_the_observer_in_both_qat_flows(kind, built):
    """``fake_quant: observer``: the QAT QConfig (FX) and the QAT quantizer's spec (pt2e) observe
    the weight with the observer itself; any other kind wraps it in its fake-quantize."""
    from torch.ao.quantization import QConfigMapping

    import backend_spec

    spec = backend_spec.loads(OBSERVER_IN_QAT_SPEC.format(kind=kind), format="yaml")
    mapping: QConfigMapping = backend_spec.qconfig_mapping(spec, qat=True)
    qconfig = mapping.object_type_qconfigs[torch.nn.Embedding]
    assert type(qconfig.weight()).__name__ == built
    (table_spec,) = backend_spec.quantizer(spec, qat=True).table["specs"].values()
    assert table_spec.get("fake_quant") == (None if kind == "observer" else kind)


@pytest.mark.slow
@needs_executorch
def test_an_embedding_beside_a_qat_config_exports_and_trains_alike(tmp_path):
    """ComposableQuantizer([EmbeddingQuantizer(), XNNPACK QAT]) verifies in the QAT flow with
    the table's weight observed, not fake-quantized (``fake_quant: observer``), and trains like
    the original on an embedding model the export never saw (two tables, a LayerNorm, a cat)."""
    done, out = export(tmp_path, f"{FIXTURES / 'round2.py'}:embedding_and_xnnpack_qat")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "in the QAT flow" in done.stderr
    assert "fake_quant: observer" in out.read_text()
    unseen = [m for m in fixture("unseen2").UNSEEN2 if m[0] == "embed_bag"]
    assert len(unseen) == 1
    assert qat_differences(out, _original("embedding_and_xnnpack_qat"), unseen) == []


@pytest.mark.slow
@needs_executorch
def test_a_16_bit_activation_config_exports_and_matches(tmp_path):
    """Arm-style a16w8 (int16 symmetric activations, int8 per-channel weights) exports with
    int16 dtype mappings and matches on unseen models."""
    done, out = export(tmp_path, f"{FIXTURES / 'round2.py'}:a16w8")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "{dtype: int16, quant_min_lower_bound: -32767" in out.read_text()
    assert differences(out, _original("a16w8"), named_models("resnet18_net", "functional")) == []


@pytest.mark.slow
@needs_executorch
def test_xnnpacks_qat_config_is_verified_in_the_qat_flow(tmp_path):
    """get_symmetric_quantization_config(is_qat=True): every qspec is a fake-quantize, so export
    verifies in the QAT flow by itself; the spec writes fused_moving_avg with ptq_fake_quant
    (version 6), and its QAT quantizer trains like the original on unseen models."""
    done, out = export(tmp_path, f"{FIXTURES / 'round2.py'}:xnnpack_qat")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "in the QAT flow" in done.stderr
    text = out.read_text()
    assert "spec_version: 6\n" in text
    assert "fake_quant: fused_moving_avg" in text and "ptq_fake_quant: true" in text
    models = named_models("conv_bn_relu")  # (the export verified on every parity net)
    assert qat_differences(out, _original("xnnpack_qat"), models) == []


@pytest.mark.slow
@needs_executorch
def test_xnnpacks_dynamic_qat_config_is_verified_in_the_qat_flow(tmp_path):
    """get_symmetric_quantization_config(is_dynamic=True, is_qat=True): the activation is a
    FakeQuantize flagged dynamic around MovingAverageMinMaxObserver(averaging_constant=1),
    which version 9 says (a calibrating observer on a dynamic mapping, averaging_constant);
    before, export refused it ("averaging_constant, which no spec key sets")."""
    done, out = export(tmp_path, f"{FIXTURES / 'round2.py'}:xnnpack_dynamic_qat")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "in the QAT flow" in done.stderr
    text = out.read_text()
    assert "spec_version: 9\n" in text and "is_dynamic: true" in text
    assert "observer: moving_average_minmax" in text and "averaging_constant: 1" in text
    models = named_models("transformer")  # dynamic linears
    assert qat_differences(out, _original("xnnpack_dynamic_qat"), models) == []


@pytest.mark.slow
def test_x86s_dynamic_qat_config_is_verified_in_the_qat_flow(tmp_path):
    """X86's is_dynamic=True, is_qat=True: its QAT conv-bn + activation chains observe the
    activation's output with the input's dynamic fake-quantize, which version 9 says (a
    dynamic config with a quantized output, on any entry); before, the spec left it float."""
    done, out = export(tmp_path, f"{FIXTURES / 'round2.py'}:x86_dynamic_qat")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "in the QAT flow" in done.stderr
    text = out.read_text()
    assert "spec_version: 9\n" in text and "averaging_constant: 1" in text
    # An unseen net with conv-bn-relu and a residual add (the export verified on the parity
    # nets; X86's own QAT annotation fails on resnet18_net).
    models = [m for m in fixture("unseen", "UNSEEN") if m[0] == "resblock"]
    assert qat_differences(out, _original("x86_dynamic_qat"), models) == []


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
    done, out = export(tmp_path, f"{FIXTURES / 'odd.py'}:reader_side_quantizer")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "verified" in done.stderr
    from tests.fixtures.quantizers.odd import reader_side_quantizer

    unseen = named_models("resnet18_net", "functional")
    assert differences(out, reader_side_quantizer, unseen) == []


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


def _observer_classes():
    """An observer converting itself (like nncf's INT8WeightObserver: ``convert`` puts a module
    of its own in the weight's place), and one that does not; neither has a spec value."""
    from torchao.quantization.pt2e.observer import PerChannelMinMaxObserver

    class SelfConverting(PerChannelMinMaxObserver):
        def convert(self, model, observer_node):
            """Replaces the observer node with a module of its own."""

    class Plain(PerChannelMinMaxObserver):
        pass

    return SelfConverting, Plain, PerChannelMinMaxObserver


@pytest.mark.parametrize(
    ("which", "kwargs", "expected", "absent"),
    [
        (
            0,
            {"wc_param": 3},
            "its weight observer SelfConverting (built with wc_param) has no spec value: "
            "SelfConverting.convert replaces the observed tensor itself",
            "which no spec key sets",
        ),
        (1, {}, "its weight observer Plain has no spec value", "convert"),
        (2, {"wc_param": 3}, "its weight observer takes ['wc_param'], which no spec key sets", "="),
    ],
    ids=["converts-itself", "unknown-class", "known-class-odd-argument"],
)
def test_a_weight_observer_the_format_cannot_name_is_refused_with_the_reason(
    which, kwargs, expected, absent
):
    """One gap per observer the format lacks, saying why: an unknown class with its arguments,
    and when it converts itself, that no spec observer gives its converted graph; the
    arguments of a known class are named on their own."""
    from torchao.quantization.pt2e.quantizer import QuantizationSpec

    observer = _observer_classes()[which]
    qspec = QuantizationSpec(
        dtype=torch.int8,
        observer_or_fake_quant_ctr=observer.with_args(**kwargs),
        quant_min=-128,
        quant_max=127,
        qscheme=torch.per_channel_symmetric,
        ch_axis=0,
    )
    weight = probe.describe_qspec(qspec, None, {})
    assert weight.get("converts", False) is (which == 0)
    gaps = [gap.what for gap in infer(*_weight_only_linear(weight), "t").gaps]
    assert len(gaps) == 1
    assert expected in gaps[0] and absent not in gaps[0]


def test_the_suite_folds_batch_norms_once_as_prepare_would():
    """Folding conv-bn and linear-bn once (one dead-code pass) gives the graph and weights that
    prepare_pt2e's own folding gives, and leaves that folding nothing to do."""
    import copy

    from torchao.quantization.pt2e.utils import _fuse_conv_bn_, _fuse_linear_bn_

    parts = probe.SuiteParts()
    conv_bn = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    linear_bn = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    for label, module, shape in [("c", conv_bn, (1, 3, 6, 6)), ("l", linear_bn, (2, 4))]:
        for child in module.children():
            if isinstance(child, torch.nn.modules.batchnorm._BatchNorm):
                child.running_mean.uniform_(-1, 1)
                child.running_var.uniform_(0.5, 2)
        parts.add(probe.Branch(label), module.eval(), (torch.randn(*shape),))
    suite = probe.export_suite(parts).module(check_guards=False)
    expected = copy.deepcopy(suite)
    _fuse_conv_bn_(expected)
    _fuse_linear_bn_(expected)
    folded = probe.fold_batch_norms(copy.deepcopy(suite))
    assert folded.code == expected.code != suite.code
    state = dict(folded.state_dict())
    assert state.keys() == expected.state_dict().keys()
    assert all(torch.equal(v, expected.state_dict()[k]) for k, v in state.items())
    again = copy.deepcopy(folded)
    _fuse_conv_bn_(again)
    _fuse_linear_bn_(again)
    assert again.code == folded.code
    leaves = torch.utils._pytree.tree_leaves
    pairs = zip(leaves(folded(*parts.inputs)), leaves(suite(*parts.inputs)), strict=True)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in pairs)


def _conv_op(observer: str, qscheme: str, ch_axis: int | None) -> dict:
    activation = {
        "kind": "observed",
        "dtype": "uint8",
        "quant_min": 0,
        "quant_max": 255,
        "qscheme": qscheme,
        "ch_axis": ch_axis,
        "is_dynamic": False,
        "observer": observer,
        "kwargs": {},
    }
    return {
        "target": "aten.conv2d.default",
        "annotated": True,
        "inputs": {"0": activation},
        "kinds": {"0": "act", "1": "param"},
        "output": None,
    }


_PER_TENSOR = ("HistogramObserver", "per_tensor_affine", None)
_PER_CHANNEL = ("PerChannelMinMaxObserver", "per_channel_affine", 1)


@pytest.mark.parametrize(
    ("depthwise", "one_channel", "gap"),
    [
        (
            _PER_CHANNEL,
            _PER_TENSOR,
            "a depthwise conv (groups = input channels) has its input observed "
            "per_channel_affine by PerChannelMinMaxObserver, ch_axis 1, a conv of a one-channel "
            "input observed per_tensor_affine by HistogramObserver",
        ),
        (_PER_TENSOR, _PER_TENSOR, None),
        # Float inputs, weights observed per node (nncf's weight-only modes): not this gap.
        ("float", "float", None),
    ],
    ids=["openvino-depthwise-per-channel", "alike", "weights-differ-only"],
)
def test_a_depthwise_conv_annotated_unlike_a_one_channel_conv_is_named(depthwise, one_channel, gap):
    """OpenVINO observes a depthwise conv's input per channel and a one-channel conv's per
    tensor: `when: {weight.shape.1: 1}` matches both, so the gap says what differs."""
    variants = []
    for index, made in enumerate((depthwise, one_channel)):
        op = _conv_op(*(made if made != "float" else _PER_TENSOR))
        if made == "float":
            weight = {**op["inputs"]["0"], "kwargs": {"wc_param": f"node {index}"}}
            op["inputs"] = {"1": weight}
        variants.append(op)
    alone = {
        "aten.conv2d.default": _unit([_conv_op(*_PER_TENSOR)]),
        "aten.conv2d.default#depthwise": _unit([variants[0]]),
        "aten.conv2d.default#one_channel": _unit([variants[1]]),
    }
    names = {"aten.conv2d.default": ("nn.Conv2d",)}
    found = [g.what for g in infer({"alone": alone}, names, "t").gaps if "depthwise" in g.what]
    assert found == ([] if gap is None else [found[0]])
    assert gap is None or gap in found[0]


@pytest.mark.parametrize(
    ("differences", "certain", "expected"),
    [
        ({"aten.linear.default": ["x"]}, True, True),
        ({"aten.linear.default": ["x"], "aten.add.Tensor": ["y"]}, True, False),
        ({"aten.linear.default": ["x"]}, False, False),
        ({}, True, False),  # outputs differ with no op to blame: not explained by the gap
    ],
    ids=["all-on-the-gap", "another-op-differs", "gap-not-certain", "outputs-only"],
)
def test_alternatives_are_skipped_only_when_every_difference_is_a_certain_gap(
    differences, certain, expected
):
    """A refusal is certain (no input sharing or stage tried) only when every differing
    branch differs on ops whose observer no spec can state (nncf's self-converting one)."""
    from backend_spec.export.quantizer import _only_certain
    from backend_spec.export.quantizer.infer import Gap
    from backend_spec.export.quantizer.verify import BranchResult

    differing = BranchResult("mlp", differences, outputs_equal=False)
    compared = [BranchResult("same"), differing]
    gaps = [Gap("aten.linear.default@nn.Linear", "its weight observer ...", certain)]
    assert _only_certain(compared, gaps) is expected


@pytest.mark.parametrize(
    ("quant_min", "quant_max", "gap"),
    [
        (0, 255, "its weight qspec says int8 with the range [0, 255], outside the dtype's"),
        (-127, 127, None),
    ],
    ids=["uint8-range-on-int8", "narrow-int8"],
)
def test_a_weight_range_outside_its_dtype_is_a_gap_and_the_spec_still_loads(
    tmp_path, quant_min, quant_max, gap
):
    """nncf's asymmetric weight qspec says int8 with [0, 255]: written as bounds, the spec
    was invalid (BS212) and export crashed; it is a gap, and the spec loads."""
    import backend_spec
    from backend_spec.export import dump

    weight = {
        "kind": "observed",
        "dtype": "int8",
        "quant_min": quant_min,
        "quant_max": quant_max,
        "qscheme": "per_channel_affine",
        "ch_axis": 0,
        "is_dynamic": False,
        "observer": "PerChannelMinMaxObserver",
        "kwargs": {},
    }
    inferred = infer(*_weight_only_linear(weight), "t")
    ranges = [g.what for g in inferred.gaps if "outside the dtype" in g.what]
    assert len(ranges) == (gap is not None)
    assert gap is None or gap in ranges[0]
    path = tmp_path / "spec.yaml"
    path.write_text(dump(inferred.backend_config, "yaml", name="t"), encoding="utf-8")
    backend_spec.load(path)
