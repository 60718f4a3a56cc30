"""Version 8 ``customized_qrange`` (issue 30, the real Core ML quantizer): a qspec that leaves
``quant_min``/``quant_max`` unset gets an observer with no customized range, whose symmetric
uint8 zero point is 128; an observer given the full range puts it at 127. Core ML builds every
activation qspec that way (uint8, symmetric, a ``FakeQuantize`` without a range), so export
writes ``customized_qrange: false`` and the spec's quantizer builds the observer without a
range too. The real package's export is in ``tests/test_export_quantizer_coreml.py``.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torchao", reason="the pt2e extra (torchao) is not installed")

import torch  # noqa: E402
from torchao.quantization.pt2e import FakeQuantize, MovingAverageMinMaxObserver  # noqa: E402
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e  # noqa: E402
from torchao.quantization.pt2e.quantizer import (  # noqa: E402
    QuantizationAnnotation,
    QuantizationSpec,
    Quantizer,
)

import backend_spec  # noqa: E402
from backend_spec.export.quantizer import probe  # noqa: E402
from backend_spec.export.quantizer.infer import infer  # noqa: E402
from backend_spec.ir.lower import backend_of  # noqa: E402


def _qspec(dtype: torch.dtype, qscheme: torch.qscheme, qrange: tuple | None) -> QuantizationSpec:
    """Core ML's activation qspec (``AnnotationConfig.from_quantization_config``): a
    ``FakeQuantize`` around a moving-average observer, with or without a range."""
    bounds = {} if qrange is None else {"quant_min": qrange[0], "quant_max": qrange[1]}
    return QuantizationSpec(
        dtype=dtype,
        qscheme=qscheme,
        observer_or_fake_quant_ctr=FakeQuantize.with_args(
            observer=MovingAverageMinMaxObserver, dtype=dtype, qscheme=qscheme
        ),
        **bounds,
    )


_WEIGHT = QuantizationSpec(
    dtype=torch.int8,
    qscheme=torch.per_tensor_symmetric,
    observer_or_fake_quant_ctr=FakeQuantize.with_args(
        observer=MovingAverageMinMaxObserver, dtype=torch.int8, qscheme=torch.per_tensor_symmetric
    ),
)


@pytest.mark.parametrize(
    ("dtype", "qscheme", "qrange", "expected"),
    [
        (torch.uint8, torch.per_tensor_symmetric, None, False),
        (torch.uint8, torch.per_tensor_symmetric, (0, 255), None),
        (torch.uint8, torch.per_tensor_affine, None, None),
        (torch.int8, torch.per_tensor_symmetric, None, None),
    ],
    ids=["uint8_symmetric_unset", "uint8_symmetric_full_range", "affine_unset", "int8_unset"],
)
def test_export_writes_customized_qrange_false_where_an_unset_range_moves_the_zero_point(
    dtype, qscheme, qrange, expected
):
    act = probe.describe_qspec(_qspec(dtype, qscheme, qrange), None, {})
    weight = probe.describe_qspec(_WEIGHT, None, {})
    op = {
        "target": "aten.linear.default",
        "annotated": True,
        "inputs": {"0": act, "1": weight},
        "kinds": {"0": "act", "1": "param"},
        "output": act,
    }
    probed = {"alone": {"aten.linear.default": {"ops": [op], "pre": [], "post": []}}}
    inferred = infer(probed, {"aten.linear.default": ("F.linear",)}, "t")
    assert inferred.gaps == []
    (entry,) = backend_of(inferred.backend_config)
    (dtype_config,) = entry.dtype_configs
    assert dtype_config.mapping("input_dtype").get("customized_qrange") is expected
    assert dtype_config.mapping("weight_dtype").get("customized_qrange") is None


class _LinearQuantizer(Quantizer):
    """Every linear: Core ML's uint8 symmetric activations without a range, int8 weights."""

    def annotate(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
        act = _qspec(torch.uint8, torch.per_tensor_symmetric, None)
        for node in model.graph.nodes:
            if node.target == torch.ops.aten.linear.default:
                inputs = {node.args[0]: act, node.args[1]: _WEIGHT}
                node.meta["quantization_annotation"] = QuantizationAnnotation(
                    input_qspec_map=inputs, output_qspec=act, _annotated=True
                )
        return model

    def validate(self, model: torch.fx.GraphModule) -> None:
        """Nothing to check."""


def _spec(key: str) -> str:
    act = f"dtype: quint8, qscheme: symmetric, observer: moving_average_minmax{key}"
    fake = "fake_quant: fake_quantize, ptq_fake_quant: true"
    return f"""\
spec_version: 8
name: t
dtype_configs:
  a8w8:
    input_dtype: {{{act}, {fake}}}
    output_dtype: {{{act}, {fake}}}
    weight_dtype: {{dtype: qint8, qscheme: symmetric, observer: moving_average_minmax, {fake}}}
    bias_dtype: float
patterns:
  - pattern: F.linear
    aten: [[aten.linear.default]]
    dtype_configs: [a8w8]
"""


def _zero_points_and_output(quantizer: Quantizer) -> tuple[list[int], torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Linear(5, 3)).eval()
    data = torch.randn(4, 6)
    prepared = prepare_pt2e(torch.export.export(model, (data,)).module(), quantizer)
    prepared(data)
    converted = convert_pt2e(prepared)
    zero_points = [
        int(node.args[2])
        for node in converted.graph.nodes
        if node.target == torch.ops.quantized_decomposed.quantize_per_tensor.default
    ]
    return zero_points, converted(data)


@pytest.mark.parametrize(("key", "same"), [(", customized_qrange: false", True), ("", False)])
def test_the_spec_quantizer_builds_the_observer_without_a_range_as_the_qspec_did(key, same):
    """With the key the spec's quantizer matches the original (zero points 128, equal
    outputs); without it, its observers get the full range and put them at 127."""
    spec_quantizer = backend_spec.quantizer(backend_spec.loads(_spec(key)))
    expected_points, expected = _zero_points_and_output(_LinearQuantizer())
    points, output = _zero_points_and_output(spec_quantizer)
    assert set(expected_points) == {128}
    assert (points == expected_points) is same
    assert torch.equal(output, expected) is same


def test_customized_qrange_is_a_version_8_key():
    with pytest.raises(backend_spec.SpecError) as raised:
        text = _spec(", customized_qrange: false").replace("spec_version: 8", "spec_version: 7")
        backend_spec.loads(text)
    assert {d.code for d in raised.value.diagnostics} == {"BS206"}
