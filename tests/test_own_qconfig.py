"""Version 11 ``qconfig: own`` (issue 30): a chain quantized with its own dtype config's
QConfig, not its first op's. A static XNNPACK composed after a dynamic one quantizes a lone
conv dynamically but conv + relu (whose conv the dynamic part skips) statically, and the
depthwise convs the dynamic part leaves float statically too. The runtime cases are data; the
inference is fed probe data; the slow test exports the real composition and matches it on
models the export never saw (MobileNet-shaped ones among them)."""

from __future__ import annotations

import pytest

pytest.importorskip("torchao", reason="the pt2e extra (torchao) is not installed")

import torch  # noqa: E402
from _export_helpers import FIXTURES, differences, export, fixture, observed, unseen  # noqa: E402

import backend_spec  # noqa: E402
from backend_spec.export.quantizer.infer import infer  # noqa: E402
from backend_spec.ir.lower import backend_of  # noqa: E402
from backend_spec.pt2e.rules import compile_rules  # noqa: E402

SPEC = """\
spec_version: VERSION
name: dynamic_then_static
dtype_configs:
  dynamic:
    input_dtype: {dtype: qint8, observer: placeholder}
    output_dtype: float
    weight_dtype: {dtype: qint8, qscheme: symmetric, granularity: per_channel}
    bias_dtype: float
    is_dynamic: true
  static:
    input_dtype: {dtype: qint8, observer: histogram}
    output_dtype: {dtype: qint8, observer: histogram}
    weight_dtype: {dtype: qint8, qscheme: symmetric, granularity: per_channel}
    bias_dtype: float
patterns:
  - pattern: [F.conv2d, F.relu]
    dtype_configs: [static]
    aten: [[aten.conv2d.default, [aten.relu.default, aten.relu_.default]]]
QCONFIG  - pattern: F.conv2d
    dtype_configs: [dynamic]
    aten: [[aten.conv2d.default]]
"""


class _ConvRelu(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Conv2d(3, 4, 3), torch.nn.Conv2d(4, 4, 1)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def _prepared(text: str):
    from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

    torch.manual_seed(0)
    model, inputs = _ConvRelu().eval(), (torch.randn(1, 3, 8, 8),)
    quantizer = backend_spec.quantizer(backend_spec.loads(text, format="yaml"))
    return prepare_pt2e(torch.export.export(model, inputs).module(), quantizer)


def _observers_of(prepared, name: str) -> list[str]:
    """The observer classes on the activation input of node ``name``."""
    node = next(n for n in prepared.graph.nodes if n.name == name)
    arg = node.args[0]
    return [type(getattr(prepared, arg.target)).__name__] if arg.op == "call_module" else []


@pytest.mark.parametrize(
    ("qconfig", "first_conv"),
    [
        ("    qconfig: own\n", ["HistogramObserver"]),  # conv + relu static, as the chain says
        ("    qconfig: first_op\n", []),  # F.conv2d's dynamic QConfig: the chain stays float
        ("", []),  # the default is FX's rule
    ],
    ids=["own", "first_op", "default"],
)
def test_a_chain_takes_its_own_qconfig_only_when_it_says_so(qconfig, first_conv):
    text = SPEC.replace("VERSION", "11").replace("QCONFIG", qconfig)
    prepared = _prepared(text)
    assert _observers_of(prepared, "conv2d") == first_conv
    assert _observers_of(prepared, "conv2d_1") == ["PlaceholderObserver"]  # the lone conv


def test_qconfig_needs_version_11():
    text = SPEC.replace("VERSION", "10").replace("QCONFIG", "    qconfig: own\n")
    with pytest.raises(backend_spec.SpecError) as raised:
        backend_spec.loads(text, format="yaml")
    assert "BS206" in str(raised.value) and "11" in str(raised.value)


# --- inference from probe data ----------------------------------------------------------------

CONV, RELU = "aten.conv2d.default", "aten.relu.default"
STATIC = observed(dtype="int8", quant_min=-128, quant_max=127, kwargs={})
DYNAMIC = {**STATIC, "observer": "PlaceholderObserver", "is_dynamic": True}
WEIGHT = {
    **STATIC,
    "qscheme": "per_channel_symmetric",
    "ch_axis": 0,
    "quant_min": -127,
    "observer": "PerChannelMinMaxObserver",
}


def _op(target, inputs=None, output=None):
    return {
        "target": target,
        "annotated": bool(inputs or output),
        "inputs": inputs or {},
        "kinds": {"0": "act", "1": "param"} if target == CONV else {"0": "act"},
        "output": output,
        "args": {},
        "weight": "1",
    }


def _unit(*ops):
    return {"ops": list(ops), "pre": [], "post": []}


@pytest.mark.parametrize("chain_static", [True, False], ids=["chain_static", "chain_dynamic"])
def test_export_writes_own_where_the_first_ops_qconfig_misses_the_chain(chain_static):
    """conv alone dynamic; conv + relu fused statically: the chain's entry says ``qconfig:
    own``. A chain quantized as its first op alone needs no key."""
    lone = _op(CONV, {"0": DYNAMIC, "1": WEIGHT})
    if chain_static:
        chain = [_op(CONV, {"0": STATIC, "1": WEIGHT}), _op(RELU, output=STATIC)]
    else:
        chain = [_op(CONV, {"0": DYNAMIC, "1": WEIGHT}), _op(RELU, output=None)]
        chain[1]["annotated"] = True
    probed = {"alone": {CONV: _unit(lone), "nn.Conv2d>nn.ReLU": _unit(*chain)}}
    names = {CONV: ("F.conv2d",), "nn.Conv2d>nn.ReLU": ("nn.Conv2d", "nn.ReLU")}
    backend = backend_of(infer(probed, names, "t").backend_config)
    owned = [e.aten[0] for e in backend if dict(e.policy).get("qconfig") == "own"]
    assert owned == ([((CONV,), (RELU, "aten.relu_.default"))] if chain_static else [])


def test_a_thin_chain_fused_otherwise_gets_a_twin_and_the_first_op_only_chain_none():
    """conv + relu6 probed: the conv dynamic and the relu6 float (the chain only repeats the
    lone conv); with a conv of one input channel per group, fused statically. The spec has
    no dynamic chain entry (it would claim the thin conv), and a static twin of the chain
    under ``when: {weight.shape.1: 1}`` that the rule table quantizes."""
    hardtanh = "aten.hardtanh.default"
    key = "nn.Conv2d>nn.ReLU6"
    lone = _op(CONV, {"0": DYNAMIC, "1": WEIGHT})
    floating = _op(hardtanh)
    floating["annotated"] = False
    thin = [_op(CONV, {"0": STATIC, "1": WEIGHT}), _op(hardtanh, output=STATIC)]
    probed = {
        "alone": {
            CONV: _unit(lone),
            key: _unit(_op(CONV, {"0": DYNAMIC, "1": WEIGHT}), floating),
            f"{key}#thin": _unit(*thin),
        }
    }
    names = {CONV: ("F.conv2d",), key: ("nn.Conv2d", "nn.ReLU6")}
    backend = backend_of(infer(probed, names, "t").backend_config)
    chains = [e for e in backend if len(e.aten[0] if e.aten else ()) == 2]
    assert len(chains) == 1, chains
    (twin,) = chains
    assert dict(twin.policy)["when"] == (("weight.shape.1", 1),)
    assert twin.dtype_configs[0].mapping("output_dtype").dtype == torch.qint8  # static
    # Quantized by the rule table, with its own QConfig or its first op's (the twin's first
    # op is spelled apart from the lone conv's, so that op's QConfig may be its own).
    table, _report = compile_rules(infer(probed, names, "t").backend_config)
    (rule,) = [r for r in table.rules if len(r.chain) == 2 and "when" in str(r.policy)][:1]
    assert rule.reason == "" and rule.input is not None


# --- slow: the real composition, exported and matched on unseen models -----------------------


@pytest.mark.slow
def test_dynamic_then_static_xnnpack_exports_and_matches_unseen_models(tmp_path):
    done, out = export(tmp_path, f"{FIXTURES / 'neighbours.py'}:xnnpack_dynamic_then_static")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "verified:" in done.stderr
    text = out.read_text()
    assert "qconfig: own" in text and "when: {weight.shape.1: 1}" in text, text
    original = fixture("neighbours", "xnnpack_dynamic_then_static")
    models = [m for m in unseen() if m[0] in ("mobilenetish", "seish", "resblock", "unetish")]
    assert differences(out, original, models) == []
