"""`bespec export module:factory` for pt2e Quantizers: probe, infer, verify, write or refuse.

Fast tests cover reading annotations and inference on hand-made probe data; the slow ones
export real quantizers (executorch's XNNPACKQuantizer, torchao's X86InductorQuantizer, the
fixtures in tests/fixtures/quantizers/odd.py) through the CLI and compare the written spec's
quantizer with the original on models the export never saw.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

pytest.importorskip("torchao", reason="the pt2e extra (torchao) is not installed")

import torch  # noqa: E402
from _export_helpers import (  # noqa: E402
    FIXTURES,
    ROOT,
    bespec,
    differences,
    export,
    fixture,
    needs_executorch,
    unseen,
)
from torchao.quantization.pt2e.observer import HistogramObserver  # noqa: E402
from torchao.quantization.pt2e.quantizer import (  # noqa: E402
    FixedQParamsQuantizationSpec,
    QuantizationSpec,
    SharedQuantizationSpec,
)

from backend_spec.export.quantizer import is_quantizer, probe  # noqa: E402
from backend_spec.export.quantizer.infer import infer  # noqa: E402

ACT = QuantizationSpec(
    dtype=torch.int8,
    quant_min=-128,
    quant_max=127,
    qscheme=torch.per_tensor_affine,
    observer_or_fake_quant_ctr=HistogramObserver.with_args(eps=2**-12),
)


def _graph():
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    relu = graph.call_function(torch.ops.aten.relu.default, (x,))
    graph.output(relu)
    return x, relu


def test_observed_qspec_is_read_with_its_observer_and_arguments():
    x, relu = _graph()
    described = probe.describe_qspec(ACT, relu, {"0": x})
    assert described["kind"] == "observed"
    assert described["observer"] == "HistogramObserver"
    assert described["kwargs"] == {"eps": 2**-12}
    qrange = (described["dtype"], described["quant_min"], described["quant_max"])
    assert qrange == ("int8", -128, 127)


@pytest.mark.parametrize(
    ("qspec", "expected"),
    [
        (lambda x, relu: SharedQuantizationSpec((x, relu)), "input:0"),
        (lambda x, relu: SharedQuantizationSpec(x), "producer:0"),
        (lambda x, relu: SharedQuantizationSpec(relu), "output"),
    ],
)
def test_shared_qspecs_are_read_relative_to_the_node(qspec, expected):
    x, relu = _graph()
    described = probe.describe_qspec(qspec(x, relu), relu, {"0": x})
    assert described == {"kind": "shared", "with": expected}


def test_fixed_qspec_keeps_scale_and_zero_point():
    x, relu = _graph()
    fixed = FixedQParamsQuantizationSpec(torch.uint8, 1 / 256, 0, 0, 255, torch.per_tensor_affine)
    described = probe.describe_qspec(fixed, relu, {"0": x})
    assert (described["kind"], described["scale"], described["zero_point"]) == ("fixed", 1 / 256, 0)


def test_quantizers_are_recognised_and_backend_configs_are_not():
    from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import X86InductorQuantizer

    from backend_spec._torch import BackendConfig

    assert is_quantizer(X86InductorQuantizer())
    assert not is_quantizer(BackendConfig("x"))


@pytest.mark.parametrize(
    ("ref", "found"),
    [
        # A Quantizer class built with no arguments is a factory, like a function of none.
        ("torchao.quantization.pt2e.quantizer.x86_inductor_quantizer:X86InductorQuantizer", True),
        ("torchao.quantization.pt2e.quantizer:ComposableQuantizer", "needs arguments"),
        ("torch.ao.quantization.backend_config:BackendConfig", False),  # a BackendConfig class
        ("torch.ao.quantization.backend_config:get_native_backend_config", False),
    ],
)
def test_a_reference_names_a_quantizer_factory_or_not(ref, found):
    from backend_spec.export.quantizer.refs import quantizer_factory_of

    if isinstance(found, str):
        with pytest.raises(ValueError, match=found):
            quantizer_factory_of(ref)
        return
    factory = quantizer_factory_of(ref)
    assert (factory is not None) is found
    if found:
        assert is_quantizer(factory()) and factory() is not factory()


def _op(inputs, output, kinds):
    return {
        "target": "aten.conv2d.default",
        "annotated": True,
        "inputs": inputs,
        "kinds": kinds,
        "output": output,
    }


def _described(qspec):
    return probe.describe_qspec(qspec, None, {})


CASES = [
    # (what the quantizer wrote on a lone conv, the policy or gap expected)
    ("observed output", _described(ACT), {}, None),
    ("float output", None, {"output": "if_consumer_quantized"}, None),
    (
        "other output qspec",
        {**_described(ACT), "quant_min": -100},
        {},
        "its output qspec differs from its input's",
    ),
]


@pytest.mark.parametrize(("label", "output", "policy", "gap"), CASES, ids=[c[0] for c in CASES])
def test_inference_of_a_conv_entry(label, output, policy, gap):
    weight = {
        **_described(ACT),
        "qscheme": "per_channel_symmetric",
        "ch_axis": 0,
        "observer": "PerChannelMinMaxObserver",
    }
    kinds = {"0": "act", "1": "param", "2": "param"}
    op = _op({"0": _described(ACT), "1": weight, "2": None}, output, kinds)
    probed = {"alone": {"aten.conv2d.default": {"ops": [op], "pre": [], "post": []}}}
    inferred = infer(probed, {"aten.conv2d.default": ("F.conv2d",)}, "t")
    (config,) = inferred.backend_config.configs
    from backend_spec.ir.lower import entries_of

    entry = entries_of(inferred.backend_config)(config)
    assert entry.aten == ((("aten.conv2d.default",),),)
    assert dict(entry.policy) == policy
    (dtype_config,) = entry.dtype_configs
    assert dtype_config.mapping("weight_dtype").get("granularity") == "per_channel"
    assert dtype_config.mapping("input_dtype").get("observer") == "histogram"
    assert dtype_config.mapping("input_dtype").get("scale_min_lower_bound") == 2**-12
    assert [g.what for g in inferred.gaps] == ([gap] if gap else [])


def test_a_weight_only_annotation_becomes_a_weight_only_entry():
    """Float activation and output, an observed weight (Vulkan's default): input and output
    dtypes float, the weight's mapping from its qspec."""
    weight = {**_described(ACT), "qscheme": "per_channel_symmetric", "ch_axis": 0}
    op = _op({"1": weight}, None, {"0": "act", "1": "param"})
    op["target"] = "aten.linear.default"
    probed = {"alone": {"aten.linear.default": {"ops": [op], "pre": [], "post": []}}}
    inferred = infer(probed, {"aten.linear.default": ("F.linear",)}, "t")
    from backend_spec.ir.lower import backend_of

    (entry,) = backend_of(inferred.backend_config)
    (dtype_config,) = entry.dtype_configs
    dtypes = (dtype_config.mapping("input_dtype").dtype, dtype_config.mapping("output_dtype").dtype)
    assert dtypes == (torch.float, torch.float)
    assert dtype_config.mapping("weight_dtype").get("granularity") == "per_channel"
    assert inferred.gaps == []


def test_a_dynamic_activation_gives_a_dynamic_entry_with_a_float_output():
    """Dynamic quantization (Vulkan's is_dynamic config): the input is quantized at run time
    and the output stays float, with no consumer policy."""
    from backend_spec.ir.lower import backend_of

    dynamic = {**_described(ACT), "observer": "PlaceholderObserver", "kwargs": {}}
    dynamic["is_dynamic"] = True
    weight = {**_described(ACT), "qscheme": "per_channel_symmetric", "ch_axis": 0}
    op = _op({"0": dynamic, "1": weight}, None, {"0": "act", "1": "param"})
    op["target"] = "aten.linear.default"
    probed = {"alone": {"aten.linear.default": {"ops": [op], "pre": [], "post": []}}}
    bc = infer(probed, {"aten.linear.default": ("F.linear",)}, "t").backend_config
    (config,) = bc.configs
    (dtype_config,) = config.dtype_configs
    assert dtype_config.is_dynamic and dtype_config.output_dtype == torch.float
    assert backend_of(bc).entries[0].policy == ()


def test_unknown_observer_arguments_are_a_gap():
    odd = {**_described(ACT), "kwargs": {"eps": 2**-12, "bins": 128}}
    op = _op({"0": odd}, odd, {"0": "act"})
    probed = {"alone": {"aten.relu.default": {"ops": [op], "pre": [], "post": []}}}
    inferred = infer(probed, {"aten.relu.default": ("F.relu",)}, "t")
    assert any("['bins']" in gap.what for gap in inferred.gaps)


def _conv_relu_probes(functional_fused: bool) -> dict:
    """Probe data of conv + relu written with modules (fused: one output, on the relu) and
    with ``F.relu`` (fused alike, or conv and relu annotated on their own)."""
    weight = {**_described(ACT), "qscheme": "per_channel_symmetric", "ch_axis": 0}
    conv_kinds = {"0": "act", "1": "param"}
    conv = _op({"0": _described(ACT), "1": weight}, None, conv_kinds)
    relu = {**_op({}, _described(ACT), {"0": "act"}), "target": "aten.relu.default"}
    fused = [conv, relu]
    apart = [{**conv, "output": _described(ACT)}, {**relu, "inputs": {"0": _described(ACT)}}]
    key = "nn.Conv2d>nn.ReLU"
    units = {
        key: {"ops": fused},
        f"{key}@nn.Conv2d>F.relu": {"ops": fused if functional_fused else apart},
    }
    return {"alone": {k: {**v, "pre": [], "post": []} for k, v in units.items()}}


@pytest.mark.parametrize("functional_fused", [True, False], ids=["any_spelling", "modules_only"])
def test_a_fusion_the_quantizer_matches_by_module_is_spelled_with_modules(functional_fused):
    from backend_spec.ir.lower import entries_of

    names = {
        "nn.Conv2d>nn.ReLU": ("nn.Conv2d", "nn.ReLU"),
        "nn.Conv2d>nn.ReLU@nn.Conv2d>F.relu": ("nn.Conv2d", "F.relu"),
    }
    inferred = infer(_conv_relu_probes(functional_fused), names, "t")
    (config,) = inferred.backend_config.configs
    if functional_fused:  # the ATen chain: matched however the model writes it
        assert entries_of(inferred.backend_config)(config).aten == (
            (("aten.conv2d.default",), ("aten.relu.default", "aten.relu_.default")),
        )
    else:  # the modules only, and the conv keeps its weight quantized (a reference module)
        assert config.pattern == (torch.nn.Conv2d, torch.nn.ReLU)
        assert not entries_of(inferred.backend_config)(config).aten
        assert config.root_module is torch.nn.Conv2d


SHARED = {"kind": "shared", "with": "producer:0"}


def _unit(target, annotated):
    """Probe data of a one-input op: with its producer's qspec propagated, or left float."""
    op = {"target": target, "annotated": annotated, "inputs": {}, "kinds": {"0": "act"}}
    op.update({"inputs": {"0": SHARED}, "output": SHARED} if annotated else {"output": None})
    return {"ops": [op], "pre": [], "post": []}


PROPAGATION_CASES = [
    # (ops the quantizer propagates after a quantized producer, the entries expected:
    #  pattern -> its ATen alternatives)
    (
        "slice",
        {"aten.slice.Tensor"},
        {"operator.getitem": [[["aten.slice.Tensor"]]]},
    ),
    (
        "squeeze.dim only",
        {"aten.squeeze.dim"},
        {"torch.squeeze_copy": [[["aten.squeeze.dim"]]]},
    ),
    (
        "both squeezes",
        {"aten.squeeze.dim", "aten.squeeze.default"},
        {
            "torch.squeeze": [
                [["aten.squeeze.default", "aten.squeeze_.default", "aten.squeeze.dim"]]
            ]
        },
    ),
]


@pytest.mark.parametrize(
    ("label", "propagated", "expected"), PROPAGATION_CASES, ids=[c[0] for c in PROPAGATION_CASES]
)
def test_propagation_through_ops_outside_the_table_is_inferred(label, propagated, expected):
    """XNNPACK's propagate_annotation: an op sharing its quantized producer's qspec becomes a
    sharing entry quantized only after a quantized producer, written under a name whose own
    trace (torch.squeeze: aten.squeeze.default) is not an op the quantizer leaves float."""
    from backend_spec.ir.lower import entries_of
    from backend_spec.names.naming import resolve_name

    names = {
        "aten.relu.default": ("F.relu",),
        "aten.squeeze.default": ("torch.squeeze",),
        "aten.slice.Tensor": ("operator.getitem",),
        "aten.squeeze.dim": ("torch.squeeze",),
    }
    relu = _op({"0": _described(ACT)}, _described(ACT), {"0": "act"})
    alone = {key: _unit(key, False) for key in names}
    alone["aten.relu.default"] = {
        "ops": [{**relu, "target": "aten.relu.default"}],
        "pre": [],
        "post": [],
    }
    pre = {key: _unit(key, key in propagated) for key in names if key != "aten.relu.default"}
    inferred = infer({"alone": alone, "pre": pre}, names, "t")
    assert inferred.gaps == []
    found = {
        c.pattern: c
        for c in inferred.backend_config.configs
        if c.pattern is not torch.nn.functional.relu
    }
    assert set(found) == {resolve_name(name) for name in expected}
    for name, chains in expected.items():
        config = found[resolve_name(name)]
        entry = entries_of(inferred.backend_config)(config)
        assert [[list(alts) for alts in chain] for chain in entry.aten] == chains
        # propagate_annotation's SharedQuantizationSpec(prev_node): the producer's observer,
        # whatever its qspec (input_observer: upstream_only on a sharing entry).
        assert dict(entry.policy) == {
            "quantize": "if_input_quantized",
            "input_observer": "upstream_only",
        }
        assert config.observation_type.name == "OUTPUT_SHARE_OBSERVER_WITH_INPUT"


def test_each_extra_unit_exports_to_its_aten_op():
    """The calls of probe.EXTRA_UNITS trace to the op they are probed for (their key)."""
    for key, _names, fn, shape in probe.EXTRA_UNITS:
        exported = torch.export.export(probe._Call(fn), (torch.randn(*shape),))
        calls = [str(n.target) for n in exported.graph.nodes if n.op == "call_function"]
        assert calls == [key]


def test_probe_models_need_a_quantizer():
    done = bespec("export", "fbgemm", "--probe-models", "x.py:f")
    assert done.returncode == 2
    assert "--probe-models applies to a pt2e Quantizer" in done.stderr


def _hidden_models(*excluded: str):
    """Models the export never saw: ResNet-18 shaped, and the parity nets of issue 18."""
    from backend_spec.pt2e import parity_nets
    from backend_spec.pt2e.nets import NETS

    models = [("resnet18_net", NETS["resnet18_net"]), *parity_nets.PARITY_NETS.items()]
    return [(name, factory) for name, factory in models if name not in excluded]


class _Views(torch.nn.Module):
    """Ops outside the packaged table that XNNPACK shares qparams through: dropout, slice,
    squeeze of one dimension, a mean over everything."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.drop = torch.nn.Conv2d(3, 8, 3), torch.nn.Dropout(0.1)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        x = self.drop(self.conv(x))
        y = x[:, :4].mean((2, 3), keepdim=True).squeeze(3).squeeze(2)
        z = torch.cat([y, x.mean((2, 3))[:, 4:]], 1)
        return self.fc(z) * x.mean()


def _views():
    torch.manual_seed(0)
    return _Views().eval(), (torch.randn(2, 3, 8, 8),)


def _matches(spec: Path, original, *excluded: str, extra=()) -> list[str]:
    return differences(spec, original, [*_hidden_models(*excluded), *extra])


# --- the slow tests: one CLI export per quantizer, checked on models it never saw -----------

XNNPACK_FACTORY = """\
from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
    XNNPACKQuantizer, get_symmetric_quantization_config)

def make():
    q = XNNPACKQuantizer()
    q.set_global(get_symmetric_quantization_config(is_per_channel={per_channel}))
    return q
"""

X86_FACTORY = """\
from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
    X86InductorQuantizer, get_default_x86_inductor_quantization_config)

def make():
    q = X86InductorQuantizer()
    q.set_global(get_default_x86_inductor_quantization_config())
    return q
"""


def _factory_module(folder: Path, source: str):
    """The factory file written and imported (the original the spec is compared with)."""
    path = folder / "factory.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"factory_{folder.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return path, module


def _export_factory(folder: Path, source: str):
    """(CLI result, spec path, the original's factory) of exporting ``source``'s ``make``."""
    path, module = _factory_module(folder, source)
    done, out = export(folder, f"{path}:make")
    return done, out, module.make


@pytest.mark.slow
def test_own_quantizer_with_fixed_and_shared_qspecs_round_trips(tmp_path):
    """A linear after the fixed-qparams sigmoid observes its input again, as torchao does with
    the quantizer's own qspecs: export writes ``input_sharing: qspec`` (version 5)."""
    odd = fixture("odd")
    done, out = export(
        tmp_path,
        f"{FIXTURES / 'odd.py'}:odd_quantizer",
        "--probe-models",
        f"{FIXTURES / 'odd.py'}:tiny_model",
    )
    assert done.returncode == 0, done.stderr
    assert "verified:" in done.stderr
    text = out.read_text()
    assert "scale_exact_match" in text and "output_share_observer_with_input" in text
    assert "input_sharing: qspec" in text
    assert _matches(out, odd.odd_quantizer, *ODD_GAP_MODELS) == []


#: The unseen models on which the own quantizer's spec still differs (the next test says why).
ODD_GAP_MODELS = ("resnet18_net", "policies")


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="OddQuantizer annotates add and relu but not their in-place twins (add_, relu_), "
    "which the probes do not write apart (resnet18_net's residual adds); and a max_pool2d "
    "after its fixed-qparams sigmoid joins the fixed group through its SharedQuantizationSpec, "
    "where the spec's sharing rule observes anew (policies): no probe puts a sharing op after "
    "a fixed one",
)
def test_the_own_quantizers_known_gaps(tmp_path):
    from backend_spec.export.quantizer import export_quantizer

    odd = _odd()
    result = export_quantizer(odd.odd_quantizer, name="odd")
    assert result.ok
    out = tmp_path / "odd.yaml"
    out.write_text(result.text, encoding="utf-8")
    others = [name for name, _ in _hidden_models(*ODD_GAP_MODELS)]
    assert _matches(out, odd.odd_quantizer, *others) == []


def _odd():
    return fixture("odd")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("factory", "written", "version"),
    [
        ("inputs_quantizer", "graph_inputs: ", 5),
        ("upstream_quantizer", "input_observer: upstream", 5),
        ("join_quantizer", "producers: join", 5),
        ("fixed_observer_quantizer", "scale_exact_match: 0.00390625", 2),
        ("borrowed_input_quantizer", "input_observer: upstream_only", 5),
        ("borrowed_input_quantizer", "1: output_use_different_observer_as_input", 5),
    ],
)
def test_enn_style_quantizers_export_and_match_unseen_models(tmp_path, factory, written, version):
    """Each EnnQuantizer habit of odd.py exports to its key (version 5 for the new ones) and
    the spec matches the quantizer on models the export never saw."""
    done, out = export(tmp_path, f"{FIXTURES / 'odd.py'}:{factory}")
    assert done.returncode == 0, done.stderr[-2000:]
    text = out.read_text()
    assert written in text and f"spec_version: {version}\n" in text
    assert _matches(out, getattr(_odd(), factory)) == []


@pytest.mark.slow
def test_a_quantizer_the_format_cannot_express_is_refused_naming_the_ops(tmp_path):
    done, out = export(tmp_path, f"{FIXTURES / 'odd.py'}:odd_bias_quantizer")
    assert done.returncode == 1
    assert "aten.conv2d.default" in done.stderr
    assert "its bias is quantized (derived qspec, int32 [-32768, 32767]" in done.stderr
    assert "nothing was written" in done.stderr
    assert not out.exists()


@pytest.mark.slow
@needs_executorch
@pytest.mark.parametrize("per_channel", [True], ids=["per_channel"])
def test_xnnpack_quantizer_exports_and_matches_unseen_models(tmp_path, per_channel):
    """One export (the slow part): XNNPACK's propagate_annotation (qparams shared through
    slice, squeeze.dim, mean... after a quantized producer) is inferred, and the spec matches
    on models the export never saw. Per channel only: the per-tensor global config is the one
    the slow override exports run (tests/test_export_overrides.py), on the same models."""
    done, out, original = _export_factory(tmp_path, XNNPACK_FACTORY.format(per_channel=per_channel))
    assert done.returncode == 0, done.stderr
    assert "verified: 10/10 models" in done.stderr
    assert "aten: [[aten.slice.Tensor]]" in out.read_text()
    assert _matches(out, original, extra=[("views", _views), *unseen()]) == []


@pytest.mark.slow
def test_x86_inductor_quantizer_exports_and_matches_unseen_models(tmp_path):
    done, out, original = _export_factory(tmp_path, X86_FACTORY)
    assert done.returncode == 0, done.stderr
    assert "verified: 10/10 models" in done.stderr
    # X86InductorQuantizer itself raises on resnet18_net (one ReLU module called twice).
    assert _matches(out, original, "resnet18_net", extra=unseen()) == []
    # The shipped port and this fresh export are spelled differently, and behave alike.
    same = bespec("diff", str(ROOT / "specs" / "x86_inductor.yaml"), str(out), "--behaviour")
    assert same.returncode == 0, same.stdout + same.stderr
    # Every probe of the suite (its size grows with the probes; ~800 of them).
    compared = re.search(r"quantize identically \(pt2e: 10 models and (\d+) probes", same.stdout)
    assert compared and int(compared[1]) >= 700, same.stdout


def test_a_refusal_names_each_differing_op_and_the_gaps():
    from backend_spec._torch import BackendConfig
    from backend_spec.cli.render.quantizer_export import render_refusal
    from backend_spec.export.quantizer import QuantizerExport
    from backend_spec.export.quantizer.infer import Gap, Inferred
    from backend_spec.export.quantizer.verify import BranchResult

    gap = Gap("aten.conv2d.default", "its bias is quantized")
    weights = [
        Gap(f"aten.op{i}.default", "its weight observer W has no spec value") for i in range(8)
    ]
    inferred = Inferred(BackendConfig("t"), gaps=[gap, *weights])
    model = BranchResult("mlp", {"aten.linear.default": ["linear: out[0.1,3] vs float"]})
    probe_result = BranchResult("alone:aten.cat.default", outputs_equal=False)
    result = QuantizerExport("text", inferred, models=[model], probes=[probe_result])
    assert not result.ok and result.matched == 0
    text = render_refusal(result)
    assert "cannot express the quantizer on 2 ops: aten.linear.default, (outputs)" in text
    assert "mlp: linear: out[0.1,3] vs float" in text
    assert "aten.conv2d.default: its bias is quantized" in text
    # One line per reason, its ops listed together (six, the rest counted).
    shown = ", ".join(f"aten.op{i}.default" for i in range(6))
    assert f"  {shown} and 2 more: its weight observer W has no spec value\n" in text
    assert text.endswith("nothing was written\n")


def _two_linears():
    """A suite of two one-Linear branches (exported) and its inputs."""
    parts = probe.SuiteParts()
    torch.manual_seed(0)
    for label in ("probe", "model"):
        parts.add(probe.Branch(label), torch.nn.Linear(4, 4), (torch.randn(2, 4),))
    return probe.export_suite(parts), tuple(parts.inputs)


def _x86():
    from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
        X86InductorQuantizer,
        get_default_x86_inductor_quantization_config,
    )

    return X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config())


def _float_quantizer():
    """A quantizer that annotates nothing."""
    from torchao.quantization.pt2e.quantizer import Quantizer

    class Float(Quantizer):
        def annotate(self, model):
            return model

        def validate(self, model):
            pass

    return Float()


def test_only_the_chosen_branches_are_converted_the_others_compared_as_prepared():
    from backend_spec.export.quantizer.verify import compare_runs, run

    exported, inputs = _two_linears()
    suite = exported.module(check_guards=False)
    quantized, floating = (run(suite, q, inputs, {1}) for q in (_x86(), _float_quantizer()))
    assert quantized.outputs[0] is None and isinstance(quantized.outputs[1], torch.Tensor)
    assert "linear" not in quantized.placement and "linear_1" in quantized.placement
    assert [entry[0] for entry in quantized.observers["linear"]] == ["in", "in"]  # input, weight
    probe_result, model_result = compare_runs(suite, ["probe", "model"], quantized, floating)
    (line,) = probe_result.differences["aten.linear.default"]
    assert line.endswith("(as prepared)") and "in0<-flat_0[HistogramObserver]" in line
    assert "vs float" in line
    assert "(as prepared)" not in model_result.differences["aten.linear.default"][0]
    same = compare_runs(suite, ["probe", "model"], quantized, run(suite, _x86(), inputs, {1}))
    assert all(result.identical for result in same)


def _derived_bias(quant_min, source="input:1"):
    return {
        "kind": "derived",
        "dtype": "int32",
        "quant_min": quant_min,
        "quant_max": 2**31 - 1,
        "qscheme": "per_channel_symmetric",
        "ch_axis": 0,
        "from": ["input:0", source],
        "fn": "f",
    }


BIAS_CASES = [
    # (the bias qspec a conv got, the bias_qspec inferred, whether it is a gap)
    ("float", None, None, False),
    ("int32 full range", _derived_bias(-(2**31)), "derived", False),
    ("int32 narrow range", _derived_bias(-(2**31) + 1), "derived_narrow", False),
    ("16-bit range", _derived_bias(-(2**15)), None, True),
    ("from the output", _derived_bias(-(2**31), "output"), None, True),
]


@pytest.mark.parametrize(
    ("label", "bias", "policy", "gap"), BIAS_CASES, ids=[c[0] for c in BIAS_CASES]
)
def test_inference_of_a_derived_bias(label, bias, policy, gap):
    from backend_spec.ir.lower import entries_of

    weight = {**_described(ACT), "qscheme": "per_channel_symmetric", "ch_axis": 0}
    kinds = {"0": "act", "1": "param", "2": "param"}
    op = _op({"0": _described(ACT), "1": weight, "2": bias}, _described(ACT), kinds)
    probed = {"alone": {"aten.conv2d.default": {"ops": [op], "pre": [], "post": []}}}
    inferred = infer(probed, {"aten.conv2d.default": ("F.conv2d",)}, "t")
    (config,) = inferred.backend_config.configs
    assert dict(entries_of(inferred.backend_config)(config).policy).get("bias_qspec") == policy
    assert any("its bias is quantized" in g.what for g in inferred.gaps) == gap


#: Why each delegate's export is refused today (what its report names), by fixture factory.
DELEGATE_REFUSALS = {
    "qnn": "QnnQuantizer observes its int32 bias on its own (MinMaxObserver), quantizes "
    "layer_norm's weight and leaky_relu's slope, and shares cat/chunk groups the spec splits",
    "samsung": "EnnQuantizer (8 ops left): observes embedding's weight with the activation "
    "qspec, stops sharing add after add or dropout, observes layer_norm's and group_norm's "
    "weights, and observes sigmoid's input after a float op with "
    "the activation qspec while its fixed-qparams output (a plain QuantizationSpec) joins a "
    "mul's group",
    "arm_tosa": "TOSAQuantizer decomposes ops in transform_for_annotation, which a spec "
    "cannot do (its derived int32 bias is bias_qspec: derived_narrow)",
    "cortex_m": "CortexMQuantizer fails on the cat model by itself and annotates beyond what "
    "the spec infers",
}


def _delegate_factory(name: str):
    delegates = fixture("delegates")
    missing = [m for m in delegates.NEEDS[name] if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{name} needs {', '.join(missing)} (pip install tosa-tools)")
    return getattr(delegates, name)


@pytest.mark.slow
@needs_executorch
@pytest.mark.parametrize("name", [*sorted(DELEGATE_REFUSALS), "vulkan", "vulkan_dynamic"])
def test_executorch_delegate_quantizers_export_or_are_refused_naming_ops(tmp_path, name):
    """Each delegate's quantizer either exports and then matches on models the export never
    saw, or (those of DELEGATE_REFUSALS) is refused cleanly: exit 1, the differing ATen ops
    named, no traceback, nothing written (then an expected failure, with the reason)."""
    factory = _delegate_factory(name)
    done, out = export(tmp_path, f"{FIXTURES / 'delegates.py'}:{name}")
    assert "Traceback" not in done.stderr
    if done.returncode != 0 and name in DELEGATE_REFUSALS:
        assert done.returncode == 1, done.stderr[-2000:]
        assert "error: the spec cannot express the quantizer on" in done.stderr
        assert "aten." in done.stderr and "nothing was written" in done.stderr
        assert not out.exists()
        pytest.xfail(DELEGATE_REFUSALS[name])
    assert done.returncode == 0, done.stderr[-2000:]
    assert "verified: 10/10 models" in done.stderr
    assert _matches(out, factory) == []


def _failing_quantizer(target):
    """A quantizer class with a bug on one op: it raises when the graph has ``target``."""
    from torchao.quantization.pt2e.quantizer import Quantizer

    class FailsOn(Quantizer):
        def annotate(self, model):
            if any(node.target == target for node in model.graph.nodes):
                raise RuntimeError(f"cannot annotate {target}")
            return model

        def validate(self, model):
            """Nothing to check."""

    return FailsOn


def _three_branch_suite():
    parts = probe.SuiteParts()
    for label, module in (
        ("relu", torch.nn.ReLU()),
        ("sigmoid", torch.nn.Sigmoid()),
        ("tanh", torch.nn.Tanh()),
    ):
        parts.add(probe.Branch(label), module, (torch.randn(2, 4),))
    return probe.export_suite(parts).module(check_guards=False), tuple(parts.inputs)


def test_the_branches_a_quantizer_fails_on_are_found_and_left_out():
    from backend_spec.export.quantizer.verify import failing_branches, run, without

    suite, inputs = _three_branch_suite()
    factory = _failing_quantizer(torch.ops.aten.sigmoid.default)
    assert run(suite, factory(), inputs).error
    assert failing_branches(suite, factory, inputs, 3) == {1}
    rest = run(without(suite, {1}), factory(), inputs)
    assert not rest.error and rest.outputs[1] is None
    assert torch.equal(rest.outputs[2], torch.tanh(inputs[2]))


def test_a_suite_without_branches_is_what_dead_code_elimination_leaves_and_shares_tensors():
    """``without`` copies only the nodes that stay, as ``eliminate_dead_code`` on a deep copy
    would leave them: the other branches' nodes and the impure ones (a training-mode
    BatchNorm's counter update) with what they use. The suite itself is untouched, and the
    copy shares its tensors rather than copying them (run's prepare copies what it changes)."""
    import copy

    from backend_spec.export.quantizer.verify import without

    parts = probe.SuiteParts()
    for label in ("a", "b", "c"):
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 3, 1), torch.nn.BatchNorm2d(3))
        parts.add(probe.Branch(label), model, (torch.randn(2, 3, 4, 4),))
    suite = probe.export_suite(parts, train=True).module(check_guards=False)
    before = suite.code
    reference = copy.deepcopy(suite)
    output = next(node for node in reference.graph.nodes if node.op == "output")
    leaves = list(output.args[0])
    leaves[1] = None
    output.args = (tuple(leaves),)
    reference.graph.eliminate_dead_code()
    reference.recompile()

    pruned = without(suite, {1})
    assert pruned.code == reference.code and suite.code == before
    assert sum(n.target == torch.ops.aten.add_.Tensor for n in pruned.graph.nodes) == 3
    tensors = {t.data_ptr() for t in suite.state_dict().values()}
    assert {t.data_ptr() for t in pruned.state_dict().values()} <= tensors
    assert without(suite, set()) is suite


def test_a_quantizer_that_fails_everywhere_is_not_bisected_past_the_cap(monkeypatch):
    from backend_spec.export.quantizer import verify

    suite, inputs = _three_branch_suite()
    factory = _failing_quantizer(torch.ops.aten.tanh.default)
    monkeypatch.setattr(verify, "MAX_ISOLATION_RUNS", 1)
    assert verify.failing_branches(suite, factory, inputs, 3) is None


def test_ops_a_quantizer_rewrites_before_annotating_are_named_as_gaps():
    """A quantizer whose ``transform_for_annotation`` decomposes an op (Arm's TOSA quantizer
    rewrites many): the recording counts the change per op and inference names it."""
    from torchao.quantization.pt2e.quantizer import Quantizer

    from backend_spec.export.quantizer.infer import rewrite_gaps
    from backend_spec.export.quantizer.verify import run

    class Rewriting(Quantizer):
        def transform_for_annotation(self, model):
            for node in model.graph.nodes:
                if node.target == torch.ops.aten.tanh.default:
                    node.target = torch.ops.aten.sigmoid.default
            model.recompile()
            return model

        def annotate(self, model):
            return model

        def validate(self, model):
            """Nothing to check."""

    suite, inputs = _three_branch_suite()
    recorder = probe.recording(Rewriting())
    assert not run(suite, recorder, inputs).error
    assert recorder.rewritten == {
        "aten.sigmoid.default": (1, 2),
        "aten.tanh.default": (1, 0),
    }
    gaps = {gap.op: gap.what for gap in rewrite_gaps(recorder.rewritten)}
    assert "transform_for_annotation removes 1 of its nodes" in gaps["aten.tanh.default"]
    assert "introduces 1" in gaps["aten.sigmoid.default"]


def test_halving_runs_the_quantizer_once_per_level_when_one_branch_fails():
    """Eight branches, the sixth failing: each level runs only its first half (the second
    must then hold the failure), plus one run to clear the rest of a failing pair's sibling."""
    from backend_spec.export.quantizer.verify import failing_branches

    parts = probe.SuiteParts()
    for index in range(8):
        module = torch.nn.Sigmoid() if index == 5 else torch.nn.ReLU()
        parts.add(probe.Branch(str(index)), module, (torch.randn(2, 4),))
    suite = probe.export_suite(parts).module(check_guards=False)
    made = []
    failing_class = _failing_quantizer(torch.ops.aten.sigmoid.default)

    def factory():
        made.append(1)
        return failing_class()

    assert failing_branches(suite, factory, tuple(parts.inputs), 8) == {5}
    assert len(made) == 4
