"""pt2e parity with the hand-written quantizers (issue 18).

The shipped ports, specs/xnnpack.yaml and specs/x86_inductor.yaml, and the natural-style XNNPACK
fixture (torch's way of writing a BackendConfig) must quantize the parity nets exactly like
XNNPACKQuantizer (executorch 1.5.1, per-channel static) and X86InductorQuantizer (torchao 0.18,
default): same q/dq placement per op, same qparams, torch.equal outputs. The unit tests pin the
two bugs the natural spec hit (B1, B2) and the version 3 keys.
"""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import pytest

import backend_spec
from backend_spec._torch import torch

pytest.importorskip("torchao")

from backend_spec.pt2e.compare import compare_quantizers  # noqa: E402
from backend_spec.pt2e.parity_nets import PARITY_NETS  # noqa: E402
from backend_spec.pt2e.table import Policy, Rule, Table  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
NATURAL = ROOT / "tests" / "fixtures" / "parity" / "xnnpack_natural.yaml"
XNNPACK_MODULE = "executorch.backends.xnnpack.quantizer.xnnpack_quantizer"

#: Nets whose scalar arithmetic (x * 0.5) XNNPACKQuantizer turns into quantized constants: a
#: torch-style spec keeps numbers as numbers (FX does), only `scalars: tensor` says otherwise.
SCALAR_NETS = {"transformer", "policies"}


def _has_executorch() -> bool:
    try:
        return importlib.util.find_spec(XNNPACK_MODULE) is not None
    except ImportError:
        return False


needs_executorch = pytest.mark.skipif(
    not _has_executorch(),
    reason="executorch is not installed (pip install --no-deps executorch==1.5.1 flatbuffers "
    "tabulate): XNNPACKQuantizer is not available",
)


def xnnpack():
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

    return XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))


def x86():
    from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
        X86InductorQuantizer,
        get_default_x86_inductor_quantization_config,
    )

    return X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config())


CASES = [
    *[("xnnpack", net) for net in PARITY_NETS],
    *[("natural", net) for net in PARITY_NETS if net not in SCALAR_NETS],
    *[("x86_inductor", net) for net in PARITY_NETS],
]
#: X86InductorQuantizer finds modules by nn_module_stack and functions by name: F.conv2d,
#: F.linear and F.relu calls are not its patterns, so that net stays float (and so must the spec's).
FLOAT = {("x86_inductor", "functional")}
SPECS = {
    "xnnpack": (ROOT / "specs" / "xnnpack.yaml", xnnpack),
    "natural": (NATURAL, xnnpack),
    "x86_inductor": (ROOT / "specs" / "x86_inductor.yaml", x86),
}


@pytest.mark.slow
@pytest.mark.parametrize(("spec", "net"), CASES, ids=[f"{s}-{n}" for s, n in CASES])
def test_spec_matches_the_hand_written_quantizer(spec: str, net: str) -> None:
    path, reference = SPECS[spec]
    if reference is xnnpack and not _has_executorch():
        pytest.skip("executorch is not installed: XNNPACKQuantizer is not available")
    [result] = compare_quantizers(
        reference, lambda: backend_spec.quantizer(path), [(net, PARITY_NETS[net])]
    )
    placement, _ = result.placement
    quantized = any(entries for entries in placement.values())
    assert quantized != ((spec, net) in FLOAT), "quantized" if quantized else "all float"
    assert result.identical, "\n".join(result.differences)


@needs_executorch
def test_compare_reports_a_placement_difference() -> None:
    """The comparison is not blind: the natural spec keeps x * 0.5 float, XNNPACK does not."""
    [result] = compare_quantizers(
        xnnpack,
        lambda: backend_spec.quantizer(NATURAL),
        [("transformer", PARITY_NETS["transformer"])],
    )
    assert not result.identical
    assert any("_tensor_constant_0" in line for line in result.differences)


def test_b1_fusion_entry_without_dtype_configs_quantizes_like_fx() -> None:
    """[nn.Linear, F.relu] with a fuser and no dtype_configs: FX fuses to nni.LinearReLU and
    quantizes it with that entry's configs, weights included; it used to be a float rule."""
    quantizer = backend_spec.quantizer(NATURAL)
    rules = {rule.label: rule for rule in quantizer.rules}
    for label in ("(nn.Linear, F.relu)", "(nn.Conv2d, F.relu)"):
        rule = rules[label]
        assert rule.reason == "", rule.reason
        assert rule.weight is not None and rule.input is not None
    # BatchNorm folds away in pt2e: conv-bn-relu is the conv-relu rule, with the same body.
    duplicates = dict(quantizer.report.duplicates)
    assert duplicates["(nn.Conv2d, nn.BatchNorm2d, F.relu)"] == "(nn.Conv2d, F.relu)"


def test_b2_cat_of_a_float_and_a_quantized_input_prepares() -> None:
    """torch.cat([sigmoid(x), relu(conv(x))]) under a share-observer cat entry: prepare_pt2e
    used to assert; now the float input is observed with the quantized one's observer."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    model, args = PARITY_NETS["cat"]()
    exported = torch.export.export(model, args).module()
    prepared = prepare_pt2e(exported, backend_spec.quantizer(NATURAL))
    prepared(*args)
    converted = convert_pt2e(prepared)
    cat = next(n for n in converted.graph.nodes if n.name == "cat_1")
    sources = [arg.args[0].args[0].name for arg in cat.args[0]]
    assert sources == ["sigmoid", "relu"]  # both inputs arrive dequantized
    scales = {arg.args[1] for arg in cat.args[0]}
    assert len(scales) == 1  # one shared observer


def test_table_round_trips_as_plain_data() -> None:
    table = Table.from_data(backend_spec.quantizer(ROOT / "specs" / "x86_inductor.yaml").table)
    assert Table.from_data(table.to_data()) == table
    policies = {rule.policy for rule in table.rules}
    assert Policy(output="if_consumer_quantized", extra_inputs="quantized", chain_input="any") in (
        policies
    )
    assert all(isinstance(rule, Rule) for rule in table.rules)


def test_policy_values_are_the_formats() -> None:
    """One list of values: the spec model's Literal types are the runtime's POLICY_VALUES."""
    import typing

    from backend_spec.ir import POLICY_KEYS
    from backend_spec.pt2e.table import POLICY_VALUES
    from backend_spec.specfile.models import PatternModel

    # ``when`` (version 7) is the one policy key whose value is a mapping, and
    # ``annotation_stage`` (version 8) and ``claim_stage`` (version 10) the ones that are
    # numbers, not words
    words = [key for key in POLICY_KEYS if key not in ("when", "annotation_stage", "claim_stage")]
    assert tuple(words) == tuple(POLICY_VALUES) and len(POLICY_KEYS) == len(words) + 3
    for key, values in POLICY_VALUES.items():
        # a plain Literal: null is refused (BS217), not read as "absent"
        literal = PatternModel.model_fields[key].annotation
        assert typing.get_origin(literal) is typing.Literal, key
        assert set(typing.get_args(literal)) == set(values), key


@pytest.mark.parametrize(
    ("version", "key", "needed"),
    [
        (2, "output: never", 3),
        (1, "scalars: tensor", 3),
        (2, "quantize: if_all_inputs_quantized", 3),
        (3, "bias_qspec: derived", 4),
    ],
)
def test_version_3_keys_need_version_3(tmp_path: Path, version: int, key: str, needed: int) -> None:
    from backend_spec.diagnostics import SpecError

    path = tmp_path / "s.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            spec_version: {version}
            name: v
            patterns:
              - pattern: nn.Linear
                dtype_configs: [{{input_dtype: quint8, output_dtype: quint8}}]
                {key}
            """
        )
    )
    with pytest.raises(SpecError) as caught:
        backend_spec.load(path)
    text = str(caught.value)
    assert "BS206" in text and f"needs format version {needed}" in text
    assert f"set spec_version: {needed}" in text


DERIVED_BIAS_SPEC = """\
spec_version: 4
name: derived_bias
dtype_configs:
  w8a8:
    input_dtype: {{dtype: qint8, observer: minmax}}
    output_dtype: {{dtype: qint8, observer: minmax}}
    weight_dtype: {{dtype: qint8, qscheme: symmetric, granularity: {granularity}}}
patterns:
  - pattern: F.conv2d
    dtype_configs: [w8a8]
    bias_qspec: {bias}
"""


class _FunctionalConv(torch.nn.Module):
    """A conv written with ``F.conv2d`` (what the spec's pattern names)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(4, 3, 3, 3))
        self.bias = torch.nn.Parameter(torch.randn(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.conv2d(x, self.weight, self.bias)


@pytest.mark.parametrize("granularity", ["per_channel", "per_tensor"])
@pytest.mark.parametrize(
    ("bias", "quant_min"), [("derived", -(2**31)), ("derived_narrow", 1 - 2**31)]
)
def test_a_derived_bias_is_int32_at_input_scale_times_weight_scale(
    tmp_path: Path, granularity: str, bias: str, quant_min: int
) -> None:
    """``bias_qspec: derived``: the conv's bias is quantized to int32, zero point 0, with the
    scale of the input times the weight's (per channel when the weight is)."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    path = tmp_path / "s.yaml"
    path.write_text(DERIVED_BIAS_SPEC.format(bias=bias, granularity=granularity))
    torch.manual_seed(0)
    model, x = _FunctionalConv().eval(), torch.randn(1, 3, 8, 8)
    exported = torch.export.export(model, (x,)).module()
    prepared = prepare_pt2e(exported, backend_spec.quantizer(path))
    prepared(x)
    converted = convert_pt2e(prepared, fold_quantize=False)
    quantizes = [n for n in converted.graph.nodes if "quantize_per" in str(n.target)]
    qparams = {str(n.args[0]): n.args[1:] for n in quantizes if "dequantize" not in str(n.target)}

    def value(arg):
        return getattr(converted, arg.target) if isinstance(arg, torch.fx.Node) else arg

    x_scale = value(next(v for k, v in qparams.items() if "weight" not in k and "bias" not in k)[0])
    weight_args = next(v for k, v in qparams.items() if "weight" in k)
    bias_args = next(v for k, v in qparams.items() if "bias" in k)
    weight_scale = value(weight_args[0])
    per_channel = granularity == "per_channel"
    offset = 1 if per_channel else 0  # quantize_per_channel's axis follows the zero points
    assert torch.equal(
        torch.as_tensor(value(bias_args[0])), torch.as_tensor(x_scale * weight_scale).float()
    )
    assert torch.count_nonzero(torch.as_tensor(value(bias_args[1]))) == 0
    assert bias_args[2 + offset : 5 + offset] == (quant_min, 2**31 - 1, torch.int32)


NORM_SPEC = """\
spec_version: 2
name: norm_weights
dtype_configs:
  w8a8:
    input_dtype: {dtype: qint8, observer: minmax}
    output_dtype: {dtype: qint8, observer: minmax}
    weight_dtype: {dtype: qint8, qscheme: symmetric, granularity: per_channel}
patterns:
  - pattern: F.group_norm
    dtype_configs: [w8a8]
"""


class _GroupNorm(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(4) + 0.5)
        self.bias = torch.nn.Parameter(torch.randn(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.group_norm(x, 2, self.weight, self.bias)


def test_a_norms_affine_weight_is_never_observed(tmp_path: Path) -> None:
    """FX's NON_QUANTIZABLE_WEIGHT_OPS: group_norm's 1-D weight stays float even when the
    entry has a per-channel weight dtype (whose observer would fail on it)."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    path = tmp_path / "s.yaml"
    path.write_text(NORM_SPEC)
    x = torch.randn(2, 4, 3, 3)
    exported = torch.export.export(_GroupNorm().eval(), (x,)).module()
    prepared = prepare_pt2e(exported, backend_spec.quantizer(path))
    prepared(x)
    converted = convert_pt2e(prepared, fold_quantize=False)
    quantized = [str(n.args[0]) for n in converted.graph.nodes if "quantize_per" in str(n.target)]
    assert quantized and not any("weight" in name for name in quantized)


def test_check_flow_both_names_the_placement_class() -> None:
    """FX does not read the policy keys: the FX/pt2e difference of the X86 port is the
    documented class, not a translation bug."""
    from backend_spec.pt2e import flows, nets

    path = ROOT / "specs" / "x86_inductor.yaml"
    result = flows.compare(
        "tutorial_net",
        backend_spec.load(path),
        lambda: backend_spec.quantizer(path),
        nets.tutorial_net,
    )
    assert not result.identical
    assert "pt2e_placement" in result.classes


ATEN_SPEC = """\
spec_version: 2
name: aten_ops
patterns:
  - pattern: aten.addmm.default
    dtype_configs: [{input_dtype: quint8, output_dtype: quint8}]
  - pattern: [aten.add.Tensor, aten.relu.default]
    dtype_configs: [{input_dtype: quint8, output_dtype: quint8}]
"""


def test_aten_overloads_are_pattern_ops(tmp_path: Path) -> None:
    """``pattern: aten.addmm.default`` names the ATen graph's own node target (torch's
    registry, no import): it loads, and its pt2e rule matches that overload however written."""
    path = tmp_path / "aten.yaml"
    path.write_text(ATEN_SPEC)
    backend = backend_spec.load(path)
    assert backend.configs[0].pattern is torch.ops.aten.addmm.default
    rules = {rule.label: rule for rule in backend_spec.quantizer(path).rules}
    assert rules["aten.addmm.default"].chain == (("aten.addmm.default",),)
    assert rules["(aten.add.Tensor, aten.relu.default)"].where == (None, None)
    from backend_spec.names.naming import object_name

    assert object_name(torch.ops.aten.addmm.default) == "aten.addmm.default"


def test_unknown_aten_overload_is_reported(tmp_path: Path) -> None:
    from backend_spec.diagnostics import SpecError

    path = tmp_path / "aten.yaml"
    path.write_text(ATEN_SPEC.replace("aten.addmm.default", "aten.addmm.nosuch"))
    with pytest.raises(SpecError) as caught:
        backend_spec.load(path)
    assert "BS300" in str(caught.value) and "aten.addmm.nosuch" in str(caught.value)


def test_qnnpack_pt2e_config_exports_but_its_pooling_getter() -> None:
    """torch's get_qnnpack_pt2e_backend_config: its ATen-op entries and the integer literal of
    (operator.getitem, aten.max_pool2d_with_indices.default, 0) are writable now; only the
    pooling entry's root_node_getter, a closure with no importable name, is refused."""
    from torch.ao.quantization.backend_config._qnnpack_pt2e import (
        get_qnnpack_pt2e_backend_config,
    )

    from backend_spec.diagnostics import SpecError
    from backend_spec.export.document import build_document

    with pytest.raises(SpecError) as caught:
        build_document(get_qnnpack_pt2e_backend_config())
    [problem] = caught.value.diagnostics
    assert "root_node_getter is a local function" in problem.message


LITERAL_SPEC = """spec_version: {version}
name: literal
patterns:
  - pattern_complex_format: [operator.getitem, aten.max_pool2d_with_indices.default, 0]
    observation_type: OUTPUT_SHARE_OBSERVER_WITH_INPUT
    dtype_configs: [{{input_dtype: quint8, output_dtype: quint8}}]
"""


def test_integer_literal_in_a_complex_pattern_round_trips(tmp_path: Path) -> None:
    import operator

    from backend_spec.diagnostics import SpecError

    path = tmp_path / "literal.yaml"
    path.write_text(LITERAL_SPEC.format(version=3))
    backend = backend_spec.load(path)
    expected = (operator.getitem, torch.ops.aten.max_pool2d_with_indices.default, 0)
    assert backend.configs[0]._pattern_complex_format == expected
    again = tmp_path / "again.yaml"
    again.write_text(backend_spec.dump(backend))
    assert "spec_version: 3" in again.read_text()
    assert backend_spec.load(again).configs[0]._pattern_complex_format == expected
    path.write_text(LITERAL_SPEC.format(version=2))
    with pytest.raises(SpecError, match="needs format version 3"):
        backend_spec.load(path)


class _CatOrders(torch.nn.Module):
    """A cat whose observed root comes after another input in graph order (the inner cat), and
    a cat of a conv's output next to its own max-pool: the runtime's shared specs used to point
    forward (prepare_pt2e asserted) or around a cycle (RecursionError)."""

    def __init__(self) -> None:
        super().__init__()
        nn = torch.nn
        self.a, self.b, self.c = nn.Conv2d(3, 4, 1), nn.Conv2d(3, 4, 1), nn.Conv2d(3, 8, 1)
        self.d, self.e, self.pool = nn.Conv2d(3, 4, 1), nn.Conv2d(3, 4, 1), nn.MaxPool2d(1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.cat([self.a(x), self.b(x)], 1)
        z = torch.cat([self.c(x), y], 1)
        w = self.e(x)
        return z, torch.cat([self.d(x), w, self.pool(w)], 1)


@pytest.mark.parametrize("spec", ["xnnpack", "natural", "x86_inductor"])
def test_cat_share_groups_prepare_in_any_order(spec: str) -> None:
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    model = _CatOrders().eval()
    prepared = prepare_pt2e(
        torch.export.export(model, (x,)).module(), backend_spec.quantizer(SPECS[spec][0])
    )
    prepared(x)
    converted = convert_pt2e(prepared)
    assert [tuple(out.shape) for out in converted(x)] == [(2, 16, 8, 8), (2, 12, 8, 8)]


def test_cat_share_group_extends_through_propagated_producers() -> None:
    """XNNPACK propagates hardtanh / max_pool2d qparams from the conv before them; a cat of
    that max-pool shares one observer with the whole chain (torchao's implicit sharing), so the
    conv's output observer is the cat's. An FX-style spec (no quantize policy) splits there."""
    from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

    model, args = PARITY_NETS["cat_groups"]()
    exported = torch.export.export(model, args).module()
    prepared = prepare_pt2e(exported, backend_spec.quantizer(SPECS["xnnpack"][0]))

    def observer_after(name: str) -> int:
        node = next(n for n in prepared.graph.nodes if n.name == name)
        [user] = node.users
        return id(getattr(prepared, user.target))

    assert observer_after("conv2d_1") == observer_after("cat")
