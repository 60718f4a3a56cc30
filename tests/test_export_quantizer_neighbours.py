"""Export of pt2e Quantizers that leave Linear float or dynamic (issue 30, "probes with the
right neighbour"): the ops whose policy the Linear probes left undetermined are probed again
with convolutions as their neighbours, in a small suite of their own.

Fast tests build that suite and read what a real quantizer writes on it; the slow one exports
XNNPACK with ``set_module_type(nn.Linear, None)`` through the CLI and compares the spec with
the original on models the export never saw.
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
)

from backend_spec.export.quantizer import _static, _undetermined, probe  # noqa: E402
from backend_spec.export.quantizer.infer import infer  # noqa: E402
from backend_spec.export.quantizer.verify import run  # noqa: E402
from backend_spec.ir.lower import backend_of  # noqa: E402

ACT = observed(dtype="uint8", quant_min=0, quant_max=255, kwargs={})


def _fixture(name: str):
    return fixture("neighbours", name)


def _op(target, inputs, output=None):
    return {"target": target, "inputs": inputs, "kinds": {"0": "act"}, "output": output}


def _unit(ops):
    return {"ops": ops, "pre": [], "post": []}


@pytest.mark.parametrize(
    ("first_input", "static"),
    [(ACT, True), ({**ACT, "is_dynamic": True}, False), (None, False)],
    ids=["static", "dynamic", "float"],
)
def test_a_neighbour_is_static_only_with_an_observed_non_dynamic_input(first_input, static):
    probed = {
        "alone": {"aten.linear.default": _unit([_op("aten.linear.default", {"0": first_input})])}
    }
    assert _static(probed, "aten.linear.default") is static


def test_the_undetermined_units_are_the_single_ops_annotated_in_no_context():
    annotated = _unit([_op("aten.max_pool2d.default", {"0": ACT})])
    bare = _unit([_op("aten.max_pool2d.default", {})])
    probed = {
        "alone": {
            "aten.max_pool2d.default": bare,
            "aten.cat.default": _unit([_op("aten.cat.default", {})]),
            "nn.Conv2d>nn.ReLU": _unit([_op("aten.conv2d.default", {})]),
            "aten.add.Tensor#scalar": _unit([_op("aten.add.Tensor", {})]),
        },
        "pre": {"aten.max_pool2d.default": annotated, "aten.cat.default": _unit([])},
    }
    assert _undetermined(probed) == {"aten.cat.default"}


def test_the_neighbour_suite_puts_convolutions_around_the_units_asked_for():
    """Conv2d producers of 4-D inputs, a Conv2d consumer of a 4-D output, a Linear consumer
    of a flattened one; no ``alone`` probes (they do not depend on a neighbour), and
    ``pre_post`` only for one-input units."""
    keys = {"aten.max_pool2d.default", "aten.cat.default", "aten.flatten.using_ints"}
    parts = probe.neighbour_parts(keys)
    by_label = dict(zip([b.label for b in parts.branches], parts.modules, strict=True))
    assert {b.unit for b in parts.branches} == keys
    assert {b.context for b in parts.branches} <= set(probe.NEIGHBOUR_CONTEXTS)
    assert all(label.startswith("conv:") for label in by_label)
    assert "conv:pre_post:aten.cat.default" not in by_label
    pool = by_label["conv:pre_post:aten.max_pool2d.default"]
    assert isinstance(pool.pre[0], torch.nn.Conv2d) and isinstance(pool.post, torch.nn.Conv2d)
    flat = by_label["conv:pre_post:aten.flatten.using_ints"]
    assert isinstance(flat.post, torch.nn.Linear)
    assert len(by_label["conv:pre:aten.cat.default"].pre) == 2


def test_conv_neighbours_show_the_pool_policy_a_float_linear_hides():
    """X86 with Linear None: after a Linear, max_pool2d stays float; after a conv it shares
    its input's observer, so its entry is a share entry quantized after a quantized producer."""
    parts = probe.neighbour_parts({"aten.max_pool2d.default"})
    suite = probe.export_suite(parts).module(check_guards=False)
    recorder = probe.recording(_fixture("x86_float_linear")())
    assert not run(suite, recorder, tuple(parts.inputs), set()).error
    probed = probe.by_context(recorder.snapshot, parts.branches)
    probed["alone"]["aten.max_pool2d.default"] = _unit([_op("aten.max_pool2d.default", {})])
    names = {"aten.max_pool2d.default": ("F.max_pool2d",)}
    (entry,) = backend_of(infer(probed, names, "t").backend_config)
    assert dict(entry.policy) == {"quantize": "if_input_quantized"}
    assert entry.get("observation_type").name == "OUTPUT_SHARE_OBSERVER_WITH_INPUT"


# --- slow: one CLI export ------------------------------------------------------------------


@pytest.mark.slow
@needs_executorch
def test_xnnpack_with_linear_left_float_exports_and_matches_unseen_models(tmp_path):
    """XNNPACK with set_module_type(nn.Linear, None): no nn.Linear probe shows a quantized
    producer, the conv probes show that pools share their input's observer after a quantized
    producer, and the spec matches the original on models the export never saw. (Without
    the conv probes the export is refused: max_pool2d, cat, adaptive_avg_pool2d, flatten...
    differ on the verification models.)"""
    done, out = export(tmp_path, f"{FIXTURES / 'neighbours.py'}:xnnpack_float_linear")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "verified:" in done.stderr
    text = out.read_text()
    assert "pattern: F.max_pool2d" in text and "quantize: if_input_quantized" in text
    # set_module_type matches the module only: nn.Linear gets a float entry, written before
    # the call's entry, which keeps the global config for every other spelling (its aten).
    module, call = text.index("  - pattern: nn.Linear\n"), text.index("  - pattern: F.linear\n")
    assert module < call
    assert text[module:].split("\n")[1] == "    dtype_configs: [in_float_out_float]"
    assert text[call:].split("\n")[2] == "    aten: [[aten.linear.default]]"
    models = named_models("resnet18_net", "functional", "transformer", "pool_act", "cat_groups")
    assert differences(out, _fixture("xnnpack_float_linear"), models) == []


def test_the_cat_neighbour_suite_puts_a_cat_of_one_tensor_around_any_rank():
    """Where the quantizer quantizes neither Linear nor conv but cat: a cat of the tensor
    alone (its shape kept) before the unit and after it, for units of any rank."""
    keys = {"aten.slice.Tensor", "aten.flatten.using_ints", "aten.max_pool2d.default"}
    parts = probe.neighbour_parts(keys, "cat")
    assert {b.unit for b in parts.branches} == keys
    assert all(b.label.startswith("cat:") for b in parts.branches)
    suite = probe.export_suite(parts).module(check_guards=False)
    cats = [n for n in suite.graph.nodes if n.target == torch.ops.aten.cat.default]
    assert cats and all(len(n.args[0]) == 1 for n in cats)
    for node in cats:
        assert node.meta["val"].shape == node.args[0][0].meta["val"].shape


@pytest.mark.slow
@needs_executorch
def test_xnnpack_quantizing_only_cat_exports_with_what_propagates_after_it(tmp_path):
    """XNNPACK with only set_module_type(nn.Conv2d, ...): cat is the one op it quantizes, and
    slice, pools and flatten after a cat share its observer. Only the cat probes show that
    (without them the export was refused on elu, slice, adaptive_avg_pool2d, flatten and
    linear); the spec then matches the original on models the export never saw."""
    done, out = export(tmp_path, f"{FIXTURES / 'neighbours.py'}:xnnpack_conv_type_only")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "verified:" in done.stderr
    text = out.read_text()
    pool = text.index("  - pattern: F.adaptive_avg_pool2d\n")
    assert "quantize: if_input_quantized" in text[pool:].split("\n\n")[0]
    models = [m for m in _fixture_models() if m[0] in ("chunk_split", "pool_head", "decoder")]
    models += named_models("cat_groups", "x86_net")
    assert differences(out, _fixture("xnnpack_conv_type_only"), models) == []


def _fixture_models():
    return fixture("unseen2").UNSEEN2


# --- dynamic propagation --------------------------------------------------------------------

DYNAMIC = {**ACT, "observer": "PlaceholderObserver", "is_dynamic": True}
WEIGHT = {
    **ACT,
    "dtype": "int8",
    "quant_min": -128,
    "quant_max": 127,
    "qscheme": "per_channel_symmetric",
    "ch_axis": 0,
    "observer": "PerChannelMinMaxObserver",
}


@pytest.mark.parametrize("propagates", [True, False], ids=["x86_dynamic", "anchors_only"])
def test_dynamic_propagation_through_a_pool_is_a_dynamic_config_with_a_quantized_output(
    propagates,
):
    """X86's dynamic config quantizes a pool after a dynamic conv with the dynamic qspec (its
    output shared): version 8's dynamic dtype config with a quantized output, on a shared
    observer entry quantized after a quantized producer, and the conv's float output counts
    as quantized (output: if_consumer_quantized). A quantizer that quantizes nothing after a
    dynamic anchor (dynamic XNNPACK) writes neither."""
    conv = {
        "target": "aten.conv2d.default",
        "inputs": {"0": DYNAMIC, "1": WEIGHT},
        "kinds": {"0": "act", "1": "param"},
        "output": None,
    }
    pool = _op("aten.max_pool2d.default", {"0": DYNAMIC} if propagates else {})
    if propagates:
        pool["output"] = {"kind": "shared", "with": "input:0"}
    probed = {
        "alone": {
            "aten.conv2d.default": _unit([conv]),
            "aten.max_pool2d.default": _unit([_op("aten.max_pool2d.default", {})]),
        },
        "pre": {"aten.max_pool2d.default": _unit([pool])},
    }
    names = {"aten.conv2d.default": ("nn.Conv2d",), "aten.max_pool2d.default": ("F.max_pool2d",)}
    inferred = infer(probed, names, "t")
    assert inferred.gaps == []
    by_op = {entry.aten[0][0][0]: entry for entry in backend_of(inferred.backend_config)}
    conv_policy = dict(by_op["aten.conv2d.default"].policy)
    assert conv_policy == ({"output": "if_consumer_quantized"} if propagates else {})
    assert ("aten.max_pool2d.default" in by_op) is propagates
    if propagates:
        (config,) = by_op["aten.max_pool2d.default"].dtype_configs
        assert config.is_dynamic and config.mapping("output_dtype").dtype == torch.quint8
        assert dict(by_op["aten.max_pool2d.default"].policy) == {"quantize": "if_input_quantized"}
