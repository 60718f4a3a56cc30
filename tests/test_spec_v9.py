"""Version 9 (issue 30): ``averaging_constant``, a dynamic activation's calibrating observer
(the dynamic QAT configs of XNNPACK and X86: a ``FakeQuantize`` around
``MovingAverageMinMaxObserver(averaging_constant=1)``), and each edge observed with its own
mapping's options in pt2e (Core ML's affine relu output after a symmetric input).

Each construct is checked three ways: the spec's quantizer against a hand-written original
that builds the same qspecs (observers as prepared, converted outputs), what an older
version means, and what export infers from the original's probe records.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torchao", reason="the pt2e extra (torchao) is not installed")

import torch  # noqa: E402
from torchao.quantization.pt2e import (  # noqa: E402
    FakeQuantize,
    MinMaxObserver,
    MovingAverageMinMaxObserver,
    PerChannelMinMaxObserver,
)
from torchao.quantization.pt2e.quantize_pt2e import (  # noqa: E402
    convert_pt2e,
    prepare_pt2e,
    prepare_qat_pt2e,
)
from torchao.quantization.pt2e.quantizer import (  # noqa: E402
    QuantizationAnnotation,
    QuantizationSpec,
    Quantizer,
)

import backend_spec  # noqa: E402
from backend_spec.analysis.qconfigs import qconfig_mapping  # noqa: E402
from backend_spec.export import dump  # noqa: E402
from backend_spec.export.quantizer import probe  # noqa: E402
from backend_spec.export.quantizer.infer import infer  # noqa: E402
from backend_spec.ir.lower import backend_of  # noqa: E402

# --- the originals -----------------------------------------------------------------------------


def _dynamic_qat_act() -> QuantizationSpec:
    """XNNPACK's ``get_symmetric_quantization_config(is_dynamic=True, is_qat=True)`` input."""
    return QuantizationSpec(
        dtype=torch.int8,
        quant_min=-128,
        quant_max=127,
        qscheme=torch.per_tensor_affine,
        is_dynamic=True,
        observer_or_fake_quant_ctr=FakeQuantize.with_args(
            eps=2**-12, observer=MovingAverageMinMaxObserver.with_args(averaging_constant=1)
        ),
    )


_INT8_WEIGHT = QuantizationSpec(
    dtype=torch.int8,
    quant_min=-127,
    quant_max=127,
    qscheme=torch.per_tensor_symmetric,
    observer_or_fake_quant_ctr=FakeQuantize.with_args(observer=MinMaxObserver),
)


def _observed(dtype: torch.dtype, qscheme: torch.qscheme) -> QuantizationSpec:
    return QuantizationSpec(
        dtype=dtype,
        qscheme=qscheme,
        quant_min=0,
        quant_max=255,
        observer_or_fake_quant_ctr=MinMaxObserver,
    )


_SYMMETRIC = _observed(torch.uint8, torch.per_tensor_symmetric)
_AFFINE = _observed(torch.uint8, torch.per_tensor_affine)
_CONV_WEIGHT = QuantizationSpec(
    dtype=torch.int8,
    quant_min=-128,
    quant_max=127,
    qscheme=torch.per_channel_symmetric,
    ch_axis=0,
    observer_or_fake_quant_ctr=PerChannelMinMaxObserver,
)


class _DynamicLinear(Quantizer):
    """Every linear, dynamically quantized with a fake-quantized input (dynamic QAT)."""

    def annotate(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
        for node in model.graph.nodes:
            if node.target == torch.ops.aten.linear.default:
                inputs = {node.args[0]: _dynamic_qat_act(), node.args[1]: _INT8_WEIGHT}
                node.meta["quantization_annotation"] = QuantizationAnnotation(
                    input_qspec_map=inputs, _annotated=True
                )
        return model

    def validate(self, model: torch.fx.GraphModule) -> None:
        """Nothing to check."""


class _ConvReluAffine(Quantizer):
    """Core ML's conv + relu: a symmetric input, an affine relu output."""

    def annotate(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
        for node in model.graph.nodes:
            if node.target != torch.ops.aten.relu.default:
                continue
            conv = node.args[0]
            inputs = {conv.args[0]: _SYMMETRIC, conv.args[1]: _CONV_WEIGHT}
            conv.meta["quantization_annotation"] = QuantizationAnnotation(
                input_qspec_map=inputs, _annotated=True
            )
            node.meta["quantization_annotation"] = QuantizationAnnotation(
                output_qspec=_AFFINE, _annotated=True
            )
        return model

    def validate(self, model: torch.fx.GraphModule) -> None:
        """Nothing to check."""


# --- the specs ---------------------------------------------------------------------------------

_DYNAMIC = """\
spec_version: {version}
name: t
dtype_configs:
  dynamic:
    input_dtype: {{dtype: qint8, scale_min_lower_bound: 0.000244140625,
                  observer: moving_average_minmax, {constant}fake_quant: fake_quantize}}
    output_dtype: float
    weight_dtype: {{dtype: qint8, quant_min_lower_bound: -127, qscheme: symmetric}}
    bias_dtype: float
    is_dynamic: true
patterns:
  - pattern: F.linear
    aten: [[aten.linear.default]]
    dtype_configs: [dynamic]
"""

_CONV_RELU = """\
spec_version: {version}
name: t
dtype_configs:
  relu_out:
    input_dtype: {{dtype: quint8, qscheme: symmetric}}
    output_dtype: {{dtype: quint8, qscheme: affine}}
    weight_dtype: {{dtype: qint8, qscheme: symmetric, granularity: per_channel}}
    bias_dtype: float
patterns:
  - pattern: [F.conv2d, F.relu]
    aten: [[aten.conv2d.default, aten.relu.default]]
    dtype_configs: [relu_out]
"""


def _observers(prepared: torch.fx.GraphModule) -> list[tuple[str, object, object]]:
    """Each activation observer or fake-quantize of a prepared model: its class and the
    arguments that tell two apart (qscheme, the dynamic flag, the averaging constant)."""
    found = []
    for name, module in prepared.named_modules():
        if not name.startswith("activation_post_process"):
            continue
        inner = getattr(module, "activation_post_process", module)
        found.append(
            (
                type(module).__name__,
                inner.qscheme,
                (bool(getattr(module, "is_dynamic", False)), inner.averaging_constant)
                if hasattr(inner, "averaging_constant")
                else None,
            )
        )
    return found


def _linear_run(quantizer: Quantizer) -> tuple[list, torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    data = [torch.randn(4, 6) for _ in range(3)]
    prepared = prepare_qat_pt2e(torch.export.export(model, (data[0],)).module(), quantizer)
    for batch in data:
        prepared(batch)
    observers = _observers(prepared)
    return observers, convert_pt2e(prepared)(data[0])


def _conv_run(quantizer: Quantizer) -> tuple[list, torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()
    data = torch.randn(2, 3, 8, 8)
    prepared = prepare_pt2e(torch.export.export(model, (data,)).module(), quantizer)
    prepared(data)
    observers = _observers(prepared)
    return observers, convert_pt2e(prepared)(data)


# --- the spec's quantizer against the original ---------------------------------------------------


def test_a_dynamic_qat_spec_fake_quantizes_as_the_original():
    """A fake-quantize flagged dynamic around a moving average of constant 1, in QAT; the same
    converted outputs (the activation quantized at run time)."""
    spec = _DYNAMIC.format(version=9, constant="averaging_constant: 1, ")
    quantizer = backend_spec.quantizer(backend_spec.loads(spec), qat=True)
    expected_observers, expected = _linear_run(_DynamicLinear())
    observers, output = _linear_run(quantizer)
    dynamic = ("FakeQuantize", torch.per_tensor_affine, (True, 1.0))
    assert expected_observers.count(dynamic) == 2  # the two linears' inputs
    assert observers == expected_observers
    assert torch.equal(output, expected)


def test_a_dynamic_moving_average_takes_1_the_only_constant_torch_accepts():
    """Unset, it is 1; another is BS218 (torch's observer would refuse it in prepare)."""
    spec = _DYNAMIC.format(version=9, constant="")
    observers, _output = _linear_run(backend_spec.quantizer(backend_spec.loads(spec), qat=True))
    assert ("FakeQuantize", torch.per_tensor_affine, (True, 1.0)) in observers
    with pytest.raises(backend_spec.SpecError) as raised:
        backend_spec.loads(_DYNAMIC.format(version=9, constant="averaging_constant: 0.5, "))
    assert {d.code for d in raised.value.diagnostics} == {"BS218"}


def test_before_version_9_a_dynamic_activation_observes_with_a_placeholder():
    """An older file's ``observer`` on a dynamic mapping keeps its old meaning (none)."""
    spec = _DYNAMIC.format(version=8, constant="")
    observers, _output = _linear_run(backend_spec.quantizer(backend_spec.loads(spec), qat=True))
    assert [kind for kind, _qscheme, _extra in observers].count("PlaceholderObserver") == 2


def test_each_edge_is_observed_with_its_own_mappings_options():
    quantizer = backend_spec.quantizer(backend_spec.loads(_CONV_RELU.format(version=9)))
    expected_observers, expected = _conv_run(_ConvReluAffine())
    observers, output = _conv_run(quantizer)
    assert sorted(str(qscheme) for _kind, qscheme, _ in expected_observers) == [
        "torch.per_channel_symmetric",
        "torch.per_tensor_affine",
        "torch.per_tensor_symmetric",
    ]
    assert observers == expected_observers
    assert torch.equal(output, expected)


def test_before_version_9_input_and_output_share_one_observers_options():
    quantizer = backend_spec.quantizer(backend_spec.loads(_CONV_RELU.format(version=8)))
    observers, _output = _conv_run(quantizer)
    assert torch.per_tensor_affine not in {qscheme for _kind, qscheme, _ in observers}


def test_fx_builds_the_averaging_constant_and_the_fused_fake_quantize_takes_it():
    spec = backend_spec.loads(
        """\
spec_version: 9
name: t
dtype_configs:
  a8:
    input_dtype: {dtype: quint8, observer: moving_average_minmax, averaging_constant: 0.25}
    output_dtype: {dtype: quint8, observer: moving_average_minmax, averaging_constant: 0.25}
  fused:
    input_dtype: &f {dtype: quint8, fake_quant: fused_moving_avg, averaging_constant: 0.5}
    output_dtype: *f
patterns:
  - pattern: F.relu
    dtype_configs: [a8]
  - pattern: F.hardtanh
    dtype_configs: [fused]
"""
    )
    ptq = qconfig_mapping(spec).object_type_qconfigs[torch.nn.functional.relu]
    assert ptq.activation().averaging_constant == 0.25
    qat = qconfig_mapping(spec, qat=True).object_type_qconfigs[torch.nn.functional.hardtanh]
    fake = qat.activation()
    assert type(fake).__name__ == "FusedMovingAvgObsFakeQuantize"
    assert fake.activation_post_process.averaging_constant == 0.5


def test_averaging_constant_is_a_version_9_key():
    text = _DYNAMIC.format(version=8, constant="averaging_constant: 1, ")
    with pytest.raises(backend_spec.SpecError) as raised:
        backend_spec.loads(text)
    assert {d.code for d in raised.value.diagnostics} == {"BS206"}


@pytest.mark.parametrize("value", ["0", "1.5", "-1"])
def test_averaging_constant_outside_0_to_1_is_an_error(value):
    text = _DYNAMIC.format(version=9, constant=f"averaging_constant: {value}, ")
    with pytest.raises(backend_spec.SpecError):
        backend_spec.loads(text)


# --- what export infers ------------------------------------------------------------------------


def _probed(target: str, inputs: dict, output: object, kinds: dict) -> dict:
    op = {"target": target, "annotated": True, "inputs": inputs, "kinds": kinds, "output": output}
    return {"alone": {target: {"ops": [op], "pre": [], "post": []}}}


def test_export_infers_a_dynamic_fake_quantize_and_writes_version_9():
    act = probe.describe_qspec(_dynamic_qat_act(), None, {})
    weight = probe.describe_qspec(_INT8_WEIGHT, None, {})
    probed = _probed(
        "aten.linear.default", {"0": act, "1": weight}, None, {"0": "act", "1": "param"}
    )
    inferred = infer(probed, {"aten.linear.default": ("F.linear",)}, "t")
    assert inferred.gaps == []
    (entry,) = backend_of(inferred.backend_config)
    (dtype_config,) = entry.dtype_configs
    mapping = dtype_config.mapping("input_dtype")
    assert mapping.get("observer") == "moving_average_minmax"
    assert mapping.get("averaging_constant") == 1.0
    assert dtype_config.is_dynamic
    assert "spec_version: 9" in dump(inferred.backend_config, "yaml", name="t")


def test_export_infers_an_output_observed_otherwise_than_its_input():
    weight = probe.describe_qspec(_CONV_WEIGHT, None, {})
    probed = _probed(
        "aten.linear.default",
        {"0": probe.describe_qspec(_SYMMETRIC, None, {}), "1": weight},
        probe.describe_qspec(_AFFINE, None, {}),
        {"0": "act", "1": "param"},
    )
    inferred = infer(probed, {"aten.linear.default": ("F.linear",)}, "t")
    assert inferred.gaps == []
    (entry,) = backend_of(inferred.backend_config)
    (dtype_config,) = entry.dtype_configs
    assert dtype_config.mapping("input_dtype").get("qscheme") == "symmetric"
    assert dtype_config.mapping("output_dtype").get("qscheme") == "affine"
    assert "spec_version: 9" in dump(inferred.backend_config, "yaml", name="t")


def test_an_output_of_another_dtype_is_still_a_gap():
    weight = probe.describe_qspec(_CONV_WEIGHT, None, {})
    other = _observed(torch.int8, torch.per_tensor_affine)
    probed = _probed(
        "aten.linear.default",
        {"0": probe.describe_qspec(_SYMMETRIC, None, {}), "1": weight},
        probe.describe_qspec(other, None, {}),
        {"0": "act", "1": "param"},
    )
    inferred = infer(probed, {"aten.linear.default": ("F.linear",)}, "t")
    assert [gap.what for gap in inferred.gaps] == ["its output qspec differs from its input's"]


# --- a claimed float conv before a BatchNorm in QAT -------------------------------------------


@pytest.mark.parametrize("float_conv", ["float", "weight_only"])
def test_a_conv_the_spec_leaves_float_survives_the_qat_conv_bn_fold(float_conv):
    """prepare_qat_pt2e's conv-bn rewrite reads a conv's qspec map by position (input, weight,
    bias): a conv claimed by a float rule, with an empty map, failed there (IndexError)."""
    configs = {
        "float": "{input_dtype: float, output_dtype: float}",
        "weight_only": "{input_dtype: float, output_dtype: float, weight_dtype: qint8}",
    }
    spec = backend_spec.loads(
        f"""\
spec_version: 8
name: t
dtype_configs:
  chosen: {configs[float_conv]}
patterns:
  - pattern: F.conv2d
    aten: [[aten.conv2d.default]]
    dtype_configs: [chosen]
"""
    )
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    data = torch.randn(2, 3, 8, 8)
    exported = torch.export.export(model.train(), (data,)).module()
    prepared = prepare_qat_pt2e(exported, backend_spec.quantizer(spec, qat=True))
    prepared(data)
    convert_pt2e(prepared)(data)


# --- a dynamic output on any entry --------------------------------------------------------------

_DYNAMIC_OUTPUT = """\
spec_version: {version}
name: t
dtype_configs:
  dynamic_out:
    input_dtype: quint8
    output_dtype: quint8
    weight_dtype: {{dtype: qint8, qscheme: symmetric}}
    bias_dtype: float
    is_dynamic: true
patterns:
  - pattern: [F.linear, F.relu]
    aten: [[aten.linear.default, aten.relu.default]]
    dtype_configs: [dynamic_out]
"""


@pytest.mark.parametrize(("version", "observed"), [(9, True), (8, False)])
def test_a_dynamic_quantized_output_is_observed_on_any_entry_from_version_9(version, observed):
    """X86's QAT conv-bn + activation chains observe the activation's output with the dynamic
    fake-quantize of their input; version 8 did so only on shared-observer entries."""
    spec = backend_spec.loads(_DYNAMIC_OUTPUT.format(version=version))
    quantizer = backend_spec.quantizer(spec, qat=True)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU())
    data = torch.randn(4, 6)
    prepared = prepare_qat_pt2e(torch.export.export(model, (data,)).module(), quantizer)
    relu = next(n for n in prepared.graph.nodes if n.target == torch.ops.aten.relu.default)
    readers = [getattr(prepared, str(user.target), None) for user in relu.users]
    dynamic = [m for m in readers if m is not None and getattr(m, "is_dynamic", False)]
    assert bool(dynamic) is observed


@pytest.mark.parametrize(
    ("observation", "version"),
    [("output_use_different_observer_as_input", 9), ("output_share_observer_with_input", 8)],
)
def test_a_dynamic_output_needs_version_9_only_on_an_unshared_entry(observation, version):
    """dump (export's writer) writes the oldest version that means the config."""
    text = f"""\
spec_version: 9
name: t
dtype_configs:
  dynamic_out:
    input_dtype: quint8
    output_dtype: quint8
    weight_dtype: qint8
    is_dynamic: true
patterns:
  - pattern: F.relu
    observation_type: {observation}
    dtype_configs: [dynamic_out]
"""
    written = dump(backend_spec.loads(text), "yaml", name="t")
    assert f"spec_version: {version}\n" in written
