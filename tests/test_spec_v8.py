"""Version 8 and X86InductorQuantizer's per-type overrides and dynamic config (issue 30).

``consumers: quantizable`` (X86 quantizes a flatten by its consumer's op type, also before a
Linear it leaves float) and entry order (X86 annotates a per-type config of Linear in a pass
before the global config, so its linear + add claims ``conv(x) + linear(y)`` before conv + add
can): each spec is compared with X86 itself on small nets (placement, qparams, ``torch.equal``
outputs), and the spec without the construct differs, so the comparison is not vacuous; so
is a dynamic dtype config with a quantized output (X86's dynamic qspecs through pools and cat).
The
inference is fed probe data; the slow test exports the real quantizer and matches it on
models the export never saw.
"""

from __future__ import annotations

import re

import pytest

pytest.importorskip("torchao", reason="the pt2e extra (torchao) is not installed")

import torch  # noqa: E402
from _export_helpers import FIXTURES, differences, export, fixture, observed, unseen  # noqa: E402

import backend_spec  # noqa: E402
from backend_spec.export.quantizer.infer import infer  # noqa: E402
from backend_spec.export.quantizer.probe import OVER_CONV  # noqa: E402
from backend_spec.ir.lower import backend_of  # noqa: E402
from backend_spec.pt2e.compare import compare_quantizers  # noqa: E402

ACT = "{dtype: quint8, scale_min_lower_bound: 0.000244140625, observer: histogram, qscheme: affine}"
WEIGHT = (
    "{dtype: qint8, scale_min_lower_bound: 0.000244140625, observer: minmax, qscheme: symmetric, "
    "granularity: per_channel, ch_axis: 0}"
)
FLOAT_LINEAR_ADD = """\
  - pattern: [F.linear, torch.add]
    dtype_configs: [float]
    aten: [[aten.linear.default, [aten.add.Tensor, aten.add_.Tensor]]]
    chain_input: any
"""
SPEC = f"""\
spec_version: VERSION
name: x86_float_linear
dtype_configs:
  float: {{input_dtype: float, output_dtype: float}}
  w8a8: {{input_dtype: {ACT}, output_dtype: {ACT}, weight_dtype: {WEIGHT}, bias_dtype: float}}
  act: {{input_dtype: {ACT}, output_dtype: {ACT}}}
patterns:
FIRST  - pattern: [F.conv2d, torch.add]
    dtype_configs: [w8a8]
    aten: [[aten.conv2d.default, [aten.add.Tensor, aten.add_.Tensor]]]
    output: if_consumer_quantized
    extra_inputs: quantized
    chain_input: any
LATER  - pattern: nn.Conv2d
    dtype_configs: [w8a8]
    root_module: nn.Conv2d
    reference_quantized_module: nnqr.Conv2d
    output: if_consumer_quantized
  - pattern: torch.flatten
    observation_type: output_share_observer_with_input
    dtype_configs: [act]
    aten: [[aten.flatten.using_ints]]
    quantize: if_all_inputs_quantized
    consumers: CONSUMERS
  - pattern: F.linear
    dtype_configs: [float]
    aten: [[aten.linear.default]]
"""


def _neighbours(name: str):
    return fixture("neighbours", name)


def _x86_float_linear():
    return _neighbours("x86_float_linear")()


class _Head(torch.nn.Module):
    """conv -> flatten -> Linear (left float), and conv(x) + linear(y)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.fc = torch.nn.Conv2d(3, 4, 1), torch.nn.Linear(64, 5)
        self.conv2, self.lin = torch.nn.Conv2d(4, 4, 1), torch.nn.Linear(8, 8)

    def forward(self, x, y):
        head = self.fc(torch.flatten(self.conv(x), 1))
        return head, self.conv2(y) + self.lin(y)


def _head():
    torch.manual_seed(0)
    return _Head().eval(), (torch.randn(2, 3, 4, 4), torch.randn(2, 4, 8, 8))


def _spec(consumers: str, linear_first: bool) -> str:
    version = "8" if consumers == "quantizable" else "5"
    text = SPEC.replace("VERSION", version).replace("CONSUMERS", consumers)
    first, later = (FLOAT_LINEAR_ADD, "") if linear_first else ("", FLOAT_LINEAR_ADD)
    return text.replace("FIRST", first).replace("LATER", later)


def _differences(spec_text: str) -> list[str]:
    spec = backend_spec.loads(spec_text, format="yaml")
    results = compare_quantizers(
        _x86_float_linear, lambda: backend_spec.quantizer(spec), [("head", _head)]
    )
    return [d for r in results for d in r.differences]


@pytest.mark.parametrize(
    ("consumers", "linear_first", "differing"),
    [
        ("quantizable", True, ()),
        ("quantizing", True, ("flatten",)),
        ("quantizable", False, ("add",)),
    ],
    ids=["v8", "consumers_quantizing", "conv_add_first"],
)
def test_x86_with_linear_left_float_needs_quantizable_consumers_and_linear_chains_first(
    consumers, linear_first, differing
):
    """X86 with set_module_type_qconfig(nn.Linear, None): the flatten before the float Linear
    is quantized (consumers: quantizable, with F.linear's float entry), and the float
    linear + add claims conv(x) + linear(y) before conv + add (its entry first)."""
    found = _differences(_spec(consumers, linear_first))
    if not differing:
        assert found == []
    for node in differing:
        assert any(line.startswith(node) for line in found), found


def test_quantizable_counts_a_float_entry_quantizing_does_not():
    """The runtime's two consumer tests on one graph: conv -> flatten -> float Linear."""
    from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

    def flatten_annotated(consumers: str) -> bool:
        model, args = _head()
        graph = torch.export.export(model, args).module()
        spec = backend_spec.loads(_spec(consumers, True), format="yaml")
        prepare_pt2e(graph, backend_spec.quantizer(spec))
        (flat,) = [n for n in graph.graph.nodes if n.name == "flatten"]
        annotation = flat.meta.get("quantization_annotation")
        return annotation is not None and bool(annotation.input_qspec_map)

    assert flatten_annotated("quantizable") and not flatten_annotated("quantizing")


DYNAMIC = (
    "{dtype: quint8, scale_min_lower_bound: 0.000244140625, observer: placeholder, qscheme: affine}"
)
DYNAMIC_SPEC = f"""\
spec_version: VERSION
name: x86_dynamic
dtype_configs:
  anchor: {{input_dtype: {DYNAMIC}, output_dtype: float, weight_dtype: {WEIGHT},
            bias_dtype: float, is_dynamic: true}}
  propagated: {{input_dtype: {DYNAMIC}, output_dtype: {DYNAMIC}, is_dynamic: true}}
patterns:
  - pattern: nn.Conv2d
    dtype_configs: [anchor]
    root_module: nn.Conv2d
    reference_quantized_module: nnqr.Conv2d
    output: if_consumer_quantized
  - pattern: F.max_pool2d
    observation_type: output_share_observer_with_input
    dtype_configs: [propagated]
    aten: [[[aten.max_pool2d.default, aten.max_pool2d_with_indices.default]]]
    quantize: if_input_quantized
  - pattern: torch.cat
    observation_type: output_share_observer_with_input
    dtype_configs: [propagated]
    aten: [[aten.cat.default]]
    quantize: if_all_inputs_quantized
  - pattern: nn.Linear
    dtype_configs: [anchor]
    root_module: nn.Linear
    reference_quantized_module: nnqr.Linear
    output: if_consumer_quantized
"""


class _Pooled(torch.nn.Module):
    """cat(pool(conv(x)), conv(x)) -> flatten -> Linear: dynamic qspecs through pool and cat."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Conv2d(3, 4, 1), torch.nn.Conv2d(3, 4, 1)
        self.fc = torch.nn.Linear(64, 5)

    def forward(self, x):
        pooled = torch.nn.functional.max_pool2d(self.a(x), 1)
        return self.fc(torch.flatten(torch.cat([pooled, self.b(x)], 1), 1))


def _pooled():
    torch.manual_seed(0)
    return _Pooled().eval(), (torch.randn(2, 3, 2, 4),)


@pytest.mark.parametrize("version", [8, 7])
def test_a_dynamic_config_with_a_quantized_output_propagates_in_version_8(version):
    """X86's dynamic config quantizes max_pool2d and cat after a dynamic conv, sharing the
    dynamic qspec with their output: a dynamic dtype config whose output is quint8, on a
    shared-observer entry, says it in version 8. The same file as version 7 keeps the
    older meaning (no QConfig satisfies the config: the pool and cat stay float)."""
    text = DYNAMIC_SPEC.replace("VERSION", str(version))
    spec = backend_spec.loads(text, format="yaml")
    results = compare_quantizers(
        _neighbours("x86_dynamic"), lambda: backend_spec.quantizer(spec), [("pooled", _pooled)]
    )
    found = [d for r in results for d in r.differences]
    if version == 8:
        assert found == []
    else:
        assert any(line.startswith("cat") for line in found), found


# --- inference from probe data ----------------------------------------------------------------

QSPEC = observed(dtype="uint8", quant_min=0, quant_max=255, kwargs={})


def _node(target, inputs=None, output=None, annotated=True):
    return {
        "target": target,
        "annotated": annotated,
        "inputs": inputs or {},
        "kinds": {"0": "act", "1": "act"},
        "output": output,
        "args": {},
    }


def _unit(ops, post=()):
    return {"ops": list(ops), "pre": [], "post": list(post)}


LINEAR = "aten.linear.default"
ADD = "aten.add.Tensor"
FLATTEN = "aten.flatten.using_ints"


@pytest.mark.parametrize("claimed", [True, False], ids=["float_linear", "quantized_linear"])
def test_a_consumer_claimed_float_makes_consumers_quantizable_and_a_float_entry(claimed):
    """flatten annotated only before a Linear: quantizable (and F.linear a float entry) when
    the Linear is annotated without a qspec, quantizing when it is quantized."""
    shared = {"kind": "shared", "with": "input:0"}
    flat = _node(FLATTEN, {"0": QSPEC}, shared)
    consumer = _node(LINEAR) if claimed else _node(LINEAR, {"0": QSPEC})
    probed = {
        "alone": {FLATTEN: _unit([_node(FLATTEN, annotated=False)])},
        "pre": {FLATTEN: _unit([_node(FLATTEN, annotated=False)])},
        "pre_post": {FLATTEN: _unit([flat], [consumer])},
    }
    names = {FLATTEN: ("torch.flatten",), LINEAR: ("F.linear",)}
    backend = backend_of(infer(probed, names, "t").backend_config)
    by_op = {entry.aten[0][0][0]: entry for entry in backend}
    assert dict(by_op[FLATTEN].policy)["consumers"] == ("quantizable" if claimed else "quantizing")
    assert (LINEAR in by_op) is claimed
    if claimed:
        (config,) = by_op[LINEAR].dtype_configs
        assert config.mapping("input_dtype").dtype == torch.float


@pytest.mark.parametrize("producer", ["dynamic", "static"])
def test_an_op_quantized_after_a_dynamic_anchor_makes_the_anchors_output_count(producer):
    """A pool, float alone, quantized statically after a Linear quantized dynamically (a
    static X86 composed after a dynamic one): the dynamic anchor's float output counts as
    quantized for it (``output: if_consumer_quantized``). After a static producer the pool
    says nothing of the dynamic anchors."""
    dynamic = {**QSPEC, "observer": "PlaceholderObserver", "is_dynamic": True}
    linear = _node(LINEAR, {"0": dynamic, "1": QSPEC})
    shared = {"kind": "shared", "with": "input:0"}
    producer_node = linear if producer == "dynamic" else _node(LINEAR, {"0": QSPEC, "1": QSPEC})
    pool = "aten.max_pool2d.default"
    probed = {
        "alone": {LINEAR: _unit([linear]), pool: _unit([_node(pool, annotated=False)])},
        "pre": {pool: {**_unit([_node(pool, {"0": QSPEC}, shared)]), "pre": [producer_node]}},
    }
    names = {LINEAR: ("F.linear",), pool: ("F.max_pool2d",)}
    backend = backend_of(infer(probed, names, "t").backend_config)
    by_op = {entry.aten[0][0][0]: entry for entry in backend}
    counts = dict(by_op[LINEAR].policy).get("output") == "if_consumer_quantized"
    assert counts is (producer == "dynamic")
    assert dict(by_op[pool].policy)["quantize"] == "if_input_quantized"


@pytest.mark.parametrize("outranks", [True, False], ids=["linear_add_first", "conv_add_claims"])
def test_linear_chains_that_claim_conv_plus_linear_come_first(outranks):
    """conv(x) + linear(y) annotated as the float linear + add probe's add (annotated, no
    qspec): the linear chain is a float entry before conv + add, linking through any
    argument. Annotated as conv + add's add: no linear chain is written."""
    conv = _node("aten.conv2d.default", {"0": QSPEC})
    conv_add = _node(ADD, {"1": QSPEC})
    over = _node(ADD) if outranks else _node(ADD, {"1": QSPEC})
    probed = {
        "alone": {
            "aten.conv2d.default": _unit([conv]),
            "nn.Conv2d>operator.add": _unit([conv, conv_add]),
            "nn.Linear>operator.add": _unit([_node(LINEAR), _node(ADD)]),
            OVER_CONV: _unit([over]),
        }
    }
    names = {
        "aten.conv2d.default": ("nn.Conv2d",),
        "nn.Conv2d>operator.add": ("nn.Conv2d", "operator.add"),
        "nn.Linear>operator.add": ("nn.Linear", "operator.add"),
    }
    backend = backend_of(infer(probed, names, "t").backend_config)
    chains = [tuple(alts[0] for alts in entry.aten[0]) for entry in backend]
    if not outranks:
        assert (LINEAR, ADD) not in chains
        return
    assert chains.index((LINEAR, ADD)) < chains.index(("aten.conv2d.default", ADD))
    (linear_add,) = [e for e in backend if e.aten[0][0][0] == LINEAR]
    assert dict(linear_add.policy) == {"chain_input": "any"}
    assert linear_add.dtype_configs[0].mapping("input_dtype").dtype == torch.float


# --- slow: the real quantizer, exported and matched on unseen models -------------------------


#: (fixture, what its spec must say): X86's per-type overrides and its dynamic config, and
#: XNNPACK's dynamic config (its depthwise and one-channel convs left float).
EXPORTS = [
    ("x86_float_linear", ("spec_version: 8", "consumers: quantizable")),
    ("x86_reduce_range_linear", ("quant_max_upper_bound: 127", "input_sharing: qspec")),
    ("x86_dynamic", ("spec_version: 8", "is_dynamic: true", "output: if_consumer_quantized")),
    ("xnnpack_dynamic", ("spec_version: 8", "when: {weight.shape.1: 1}")),
]


class _LinearPooled(torch.nn.Module):
    """cat(pool(fc(x)), conv(x)) -> flatten -> Linear: pools and cat after a dynamic Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.fc, self.conv = torch.nn.Linear(4, 4), torch.nn.Conv2d(3, 3, 1)
        self.head = torch.nn.Linear(192, 5)

    def forward(self, x):
        pooled = torch.nn.functional.max_pool2d(self.fc(x), 1)
        merged = torch.cat([torch.nn.functional.avg_pool2d(pooled, 1), self.conv(x)], 1)
        return self.head(torch.flatten(merged, 1))


def _linear_pooled():
    torch.manual_seed(0)
    return _LinearPooled().eval(), (torch.randn(2, 3, 8, 4),)


@pytest.mark.slow
def test_a_static_x86_composed_after_a_dynamic_linear_exports_and_matches(tmp_path):
    """The composition quantizes statically the pools and cat after a dynamic Linear: the
    exported spec's dynamic anchors say ``output: if_consumer_quantized``, and it matches
    the original on a net of its own and the unseen models."""
    done, out = export(tmp_path, f"{FIXTURES / 'neighbours.py'}:x86_dynamic_linear_then_static")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "verified:" in done.stderr
    assert "output: if_consumer_quantized" in out.read_text()
    models = [("linear_pooled", _linear_pooled), *unseen()]
    assert differences(out, _neighbours("x86_dynamic_linear_then_static"), models) == []


@pytest.mark.slow
@pytest.mark.parametrize(("fixture", "written"), EXPORTS, ids=[e[0] for e in EXPORTS])
def test_x86_variants_export_and_match_unseen_models(tmp_path, fixture, written):
    """Each exports, verifies, and matches the original on models the export never saw
    (the parity nets, tests/fixtures/quantizers/unseen.py, among them MobileNet-style
    depthwise convs, and the nets above)."""
    from backend_spec.pt2e import parity_nets

    done, out = export(tmp_path, f"{FIXTURES / 'neighbours.py'}:{fixture}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "verified:" in done.stderr
    text = out.read_text()
    assert all(part in text for part in written), text
    if fixture.startswith("x86_") and fixture != "x86_dynamic":  # linear + add first
        linear_add = re.search(r"- pattern: \[(F\.linear|nn\.Linear), (torch|operator)\.add", text)
        conv_add = re.search(r"- pattern: \[(F\.conv2d|nn\.Conv2d), (torch|operator)\.add", text)
        assert linear_add and conv_add and linear_add.start() < conv_add.start(), text
    # Not resnet18_net: X86 itself raises on it (one ReLU module called twice).
    models = [*parity_nets.PARITY_NETS.items(), *unseen(), ("head", _head), ("thin", _thin)]
    assert differences(out, _neighbours(fixture), models) == []


# --- when on a tensor's size: dynamic XNNPACK's depthwise and one-channel convs ------------

THIN_SPEC = """\
spec_version: VERSION
name: xnnpack_dynamic
dtype_configs:
  dynamic:
    input_dtype: {dtype: qint8, scale_min_lower_bound: 0.000244140625, observer: placeholder,
                  qscheme: affine}
    output_dtype: float
    weight_dtype: {dtype: qint8, quant_min_lower_bound: -127,
                   scale_min_lower_bound: 0.000244140625, observer: minmax, qscheme: symmetric}
    bias_dtype: float
    is_dynamic: true
  float: {input_dtype: float, output_dtype: float}
patterns:
TWIN  - pattern: F.conv2d
    dtype_configs: [dynamic]
    aten: [[aten.conv2d.default]]
"""
TWIN = """\
  - pattern: nn.Conv2d
    dtype_configs: [float]
    aten: [[aten.conv2d.default]]
    when: {weight.shape.1: 1}
"""


class _Thin(torch.nn.Module):
    """A conv, a depthwise conv and a conv of a one-channel input."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 4, 1)
        self.depthwise = torch.nn.Conv2d(4, 4, 3, padding=1, groups=4)
        self.gray = torch.nn.Conv2d(1, 4, 3, padding=1)

    def forward(self, x, y):
        return self.depthwise(self.conv(x)), self.gray(y)


def _thin():
    torch.manual_seed(0)
    return _Thin().eval(), (torch.randn(2, 4, 8, 8), torch.randn(2, 1, 8, 8))


@pytest.mark.parametrize("twin", [True, False], ids=["v8_twin", "without"])
def test_a_condition_on_the_weights_size_leaves_dynamic_xnnpacks_thin_convs_float(twin):
    """Dynamic XNNPACK quantizes a conv but leaves float one whose weight has one input
    channel per group (depthwise, or a one-channel input): a float entry with ``when:
    {weight.shape.1: 1}`` before the conv's own says it; without it both are quantized."""
    pytest.importorskip("executorch", reason="executorch cannot be imported")
    text = THIN_SPEC.replace("VERSION", "8").replace("TWIN", TWIN if twin else "")
    spec = backend_spec.loads(text, format="yaml")
    results = compare_quantizers(
        _neighbours("xnnpack_dynamic"), lambda: backend_spec.quantizer(spec), [("thin", _thin)]
    )
    found = [d for r in results for d in r.differences]
    if twin:
        assert found == []
    else:
        assert any(line.startswith("conv2d_1") for line in found), found
        assert any(line.startswith("conv2d_2") for line in found), found


def _conv(inputs, args=None):
    return {
        "target": "aten.conv2d.default",
        "annotated": bool(inputs),
        "inputs": inputs,
        "kinds": {"0": "act", "1": "param"},
        "output": None,
        "args": args or {},
    }


@pytest.mark.parametrize("thin_float", [True, False], ids=["dynamic_xnnpack", "static"])
def test_thin_conv_probes_left_float_give_the_conv_a_float_twin(thin_float):
    int8 = {**QSPEC, "dtype": "int8", "quant_min": -128, "quant_max": 127}
    dynamic = {**int8, "observer": "PlaceholderObserver", "is_dynamic": True}
    weight = {**int8, "qscheme": "per_tensor_symmetric", "observer": "MinMaxObserver"}
    quantized = {"0": dynamic, "1": weight}
    variant = {} if thin_float else quantized
    probed = {
        "alone": {
            "aten.conv2d.default": _unit([_conv(quantized)]),
            "aten.conv2d.default#depthwise": _unit([_conv(variant, {"groups": 4})]),
            "aten.conv2d.default#one_channel": _unit([_conv(variant)]),
        }
    }
    names = {"aten.conv2d.default": ("F.conv2d",)}
    inferred = infer(probed, names, "t").backend_config
    backend = backend_of(inferred)
    whens = [dict(entry.policy).get("when") for entry in backend]
    if not thin_float:
        assert whens == [None]
        return
    assert whens == [(("weight.shape.1", 1),), None]  # the float twin first
    assert backend.entries[0].dtype_configs[0].mapping("input_dtype").dtype == torch.float
    text = backend_spec.dump(inferred, "yaml", name="t")  # the version it needs, and loads
    assert "spec_version: 8" in text
    assert len(backend_of(backend_spec.loads(text, format="yaml"))) == 2
