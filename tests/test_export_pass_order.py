"""What export reads from a quantizer that annotates in passes and keys a qspec on arguments
(Core ML's ``CoreMLQuantizer``): the order of its passes from which inputs reuse a producer's
observer, and a chain fused with other qspecs for some arguments (conv + hardtanh observed
affine only as a ReLU6 clamp). The probe data here has the shape ``probe.describe_node``
writes; the real quantizer's export is in the Core ML tests."""

from __future__ import annotations

import pytest

pytest.importorskip("torchao", reason="the pt2e extra (torchao) is not installed")

from _export_helpers import observed  # noqa: E402

from backend_spec.export.quantizer.infer import (  # noqa: E402
    annotation_stages,
    infer,
    reuse_orders,
)
from backend_spec.ir.lower import backend_of  # noqa: E402

SYMMETRIC = observed(qscheme="per_tensor_symmetric", dtype="uint8", quant_min=0, quant_max=255)
AFFINE = observed(dtype="uint8", quant_min=0, quant_max=255)
LINEAR, CONV, ADD, RELU = (
    "aten.linear.default",
    "aten.conv2d.default",
    "aten.add.Tensor",
    "aten.relu.default",
)
HARDTANH = "aten.hardtanh.default"


def _op(target, inputs, output, args=None):
    kinds = {"0": "act", "1": "param"} if target in (LINEAR, CONV) else {"0": "act", "1": "act"}
    op = {"target": target, "inputs": inputs, "kinds": kinds, "output": output}
    return {**op, "args": args or {}}


def _linear(read):
    return _op(LINEAR, {"0": read, "1": observed(qscheme="per_channel_symmetric")}, SYMMETRIC)


def _post(ops, read):
    """A ``post`` probe: the unit's ``ops``, then a Linear whose input qspec is ``read``."""
    return {"ops": ops, "pre": [], "post": [_linear(read)]}


CONV_RELU = [_op(CONV, {"0": SYMMETRIC}, None), _op(RELU, {}, AFFINE)]
ADD_RELU = [_op(ADD, {"0": SYMMETRIC, "1": SYMMETRIC}, None), _op(RELU, {}, AFFINE)]
CONV_ADD_RELU = [_op(CONV, {"0": SYMMETRIC}, SYMMETRIC), *ADD_RELU]
FLOAT = [_op("aten.abs.default", {}, None)]

#: post probes -> (orders, stages). The Linear's own qspec is the one it reads after a float op.
REUSE_CASES = {
    "reused_after_an_earlier_pass": (
        {"abs": _post(FLOAT, SYMMETRIC), "conv>relu": _post(CONV_RELU, AFFINE)},
        [[CONV, LINEAR, True]],
        {},
    ),
    "observed_again_before_a_later_pass": (
        {"abs": _post(FLOAT, SYMMETRIC), "add>relu": _post(ADD_RELU, SYMMETRIC)},
        [[ADD, LINEAR, False]],
        {ADD: 1},
    ),
    "the_pattern_of_the_last_op_decides": (  # conv, then add + relu: add's pattern
        {"abs": _post(FLOAT, SYMMETRIC), "conv>add>relu": _post(CONV_ADD_RELU, SYMMETRIC)},
        [[ADD, LINEAR, False]],
        {ADD: 1},
    ),
    "an_output_like_the_linears_own_input_tells_nothing": (
        {"abs": _post(FLOAT, SYMMETRIC), "conv": _post([_op(CONV, {}, SYMMETRIC)], SYMMETRIC)},
        [],
        {},
    ),
    "no_float_producer_no_own_qspec": ({"add>relu": _post(ADD_RELU, SYMMETRIC)}, [], {}),
}


@pytest.mark.parametrize(("post", "orders", "stages"), REUSE_CASES.values(), ids=REUSE_CASES.keys())
def test_reuse_of_a_producers_observer_orders_the_passes(post, orders, stages):
    found = reuse_orders({"post": post})
    assert found == orders
    assert annotation_stages(found) == stages


def _chain(args, output):
    conv = _op(CONV, {"0": SYMMETRIC, "1": observed(qscheme="per_channel_symmetric")}, None)
    return {"ops": [conv, _op(HARDTANH, {}, output, args)], "pre": [], "post": []}


def test_a_chain_fused_with_other_qspecs_for_its_arguments_gets_a_conditional_twin():
    """conv + ReLU6 and conv + Hardtanh are one ATen chain, both fused; the ReLU6 one (not at
    hardtanh's default arguments) observes its output affine. It gets an entry of its own,
    tried first, matched through the ATen chain where the arguments are ReLU6's; the
    Hardtanh chain keeps the general entry, without a condition."""
    relu6 = {"min_val": 0.0, "max_val": 6.0}
    defaults = {"min_val": -1.0, "max_val": 1.0}
    probed = {
        "alone": {
            "nn.Conv2d>nn.ReLU6": _chain(relu6, AFFINE),
            "nn.Conv2d>nn.Hardtanh": _chain(defaults, SYMMETRIC),
        }
    }
    names = {
        "nn.Conv2d>nn.ReLU6": ("nn.Conv2d", "nn.ReLU6"),
        "nn.Conv2d>nn.Hardtanh": ("nn.Conv2d", "nn.Hardtanh"),
    }
    entries = backend_of(infer(probed, names, "t").backend_config).entries
    chains = [e for e in entries if len(e.aten[0] if e.aten else ()) == 2]
    assert len(chains) == 2
    twin, general = chains
    assert dict(twin.policy)["when"] == (("min_val", 0.0), ("max_val", 6.0))
    assert "when" not in dict(general.policy)
    assert twin.dtype_configs[0].mapping("output_dtype").get("qscheme") == "affine"
    assert general.dtype_configs[0].mapping("output_dtype").get("qscheme") == "symmetric"


def test_chains_of_one_aten_chain_fused_alike_get_no_condition():
    """conv + ReLU6 and conv + Hardtanh fused with the same qspecs (XNNPACK): one entry for
    the ATen chain, whatever the arguments."""
    probed = {
        "alone": {
            "nn.Conv2d>nn.ReLU6": _chain({"min_val": 0.0, "max_val": 6.0}, SYMMETRIC),
            "nn.Conv2d>nn.Hardtanh": _chain({"min_val": -1.0, "max_val": 1.0}, SYMMETRIC),
        }
    }
    names = {
        "nn.Conv2d>nn.ReLU6": ("nn.Conv2d", "nn.ReLU6"),
        "nn.Conv2d>nn.Hardtanh": ("nn.Conv2d", "nn.Hardtanh"),
    }
    entries = backend_of(infer(probed, names, "t").backend_config).entries
    assert len(entries) == 1 and "when" not in dict(entries[0].policy)


def test_an_observer_nothing_reads_is_not_compared():
    """Core ML's add pattern matches the in-place BatchNorm counter update in training mode and
    observes its output, which no op reads: that observer changes no output and convert_pt2e
    drops it, so the prepared graphs are compared without it. An observer that is read stays."""
    import torch
    from torchao.quantization.pt2e.observer import MinMaxObserver

    from backend_spec.export.quantizer.verify import observers

    class Model(torch.nn.Module):
        def forward(self, x):
            torch.abs(x)  # a value nothing reads
            return torch.relu(x)

    module = torch.fx.symbolic_trace(Model())
    exported = torch.fx.symbolic_trace(Model())
    for index, node in enumerate(list(module.graph.nodes)):
        if node.op == "call_function":
            name = f"observer_{index}"
            module.add_submodule(name, MinMaxObserver())
            with module.graph.inserting_after(node):
                observer = module.graph.call_module(name, (node,))
            for user in [u for u in node.users if u is not observer]:
                user.replace_input_with(node, observer)
    module.recompile()
    found = observers(module, exported)
    (dead,) = [name for name in found if name.startswith("abs")]
    assert found[dead] == []
    assert [entry[0] for entry in found["relu"]] == ["out"]


ELU = "aten.elu.default"


def _elu_after(producer_target):
    """A ``pre`` probe: the producer with no output qspec, then elu observed on its output
    alone (one pattern with the producer)."""
    producer = _op(producer_target, {"0": SYMMETRIC}, None)
    return {"ops": [_op(ELU, {}, SYMMETRIC)], "pre": [producer], "post": []}


def test_an_activation_fused_after_a_linear_is_probed_after_a_conv_and_becomes_a_chain():
    """Core ML fuses conv and Linear with the same activations, but the main suite probes
    conv chains only for some: an op fused with the Linear before it and with no probed conv
    chain is probed after a conv, and a conv fusion found there becomes a chain entry."""
    from backend_spec.export.quantizer.infer import conv_fusion_keys

    names = {ELU: ("F.elu",), "nn.Conv2d>nn.ReLU": ("nn.Conv2d", "nn.ReLU")}
    probed = {"alone": {ELU: {"ops": [_op(ELU, {}, None)], "pre": [], "post": []}}}
    probed["pre"] = {ELU: _elu_after(LINEAR)}
    assert conv_fusion_keys(probed, names) == {ELU}

    def chains():
        entries = backend_of(infer(probed, names, "t").backend_config).entries
        return {tuple(step[0] for step in e.aten[0]) for e in entries if len(e.aten[0]) > 1}

    assert chains() == {(LINEAR, ELU)}
    probed["conv_pre"] = {ELU: _elu_after(CONV)}
    assert chains() == {(LINEAR, ELU), (CONV, ELU)}


def test_an_op_fused_with_the_linear_before_it_gets_no_order_probe():
    """An op annotated after a Linear only as one pattern with it (Core ML's linear + gelu) is
    not annotated after a quantized producer: it is not placed by order probes, which would
    read its float after another op as an order and contradict the real ones."""
    from backend_spec.export.quantizer.infer import order_pairs

    alone_float = {"ops": [_op(ELU, {}, None)], "pre": [], "post": []}
    shared = {"kind": "shared", "with": "producer:0"}
    after = {"ops": [_op(ELU, {"0": shared}, shared)], "pre": [_linear(SYMMETRIC)], "post": []}
    relu = {"ops": [_op(RELU, {}, AFFINE)], "pre": [_linear(SYMMETRIC)], "post": []}
    conditional = {"alone": {ELU: alone_float}, "pre": {ELU: after, RELU: relu}}
    fused = {"alone": {ELU: alone_float}, "pre": {ELU: _elu_after(LINEAR), RELU: relu}}
    assert (RELU, ELU) in order_pairs(conditional)
    assert not [pair for pair in order_pairs(fused) if pair[1] == ELU]


def _alone(ops):
    return {"ops": ops, "pre": [], "post": []}


MUL = "aten.mul.Tensor"


def _sharing_probed(add_reads, mul_reads):
    """Core ML-like probes: conv + relu fused with an affine output; add and mul alone with
    symmetric inputs; after conv + relu, add and mul read ``add_reads`` / ``mul_reads``."""
    alone = {
        "nn.Conv2d>nn.ReLU": _alone(CONV_RELU),
        ADD: _alone([_op(ADD, {"0": SYMMETRIC, "1": SYMMETRIC}, SYMMETRIC)]),
        MUL: _alone([_op(MUL, {"0": SYMMETRIC, "1": SYMMETRIC}, SYMMETRIC)]),
        "aten.abs.default": _alone(FLOAT),
    }
    sharing = {
        key: _alone([*CONV_RELU, _op(key, {"0": read}, SYMMETRIC)])
        for key, read in ((ADD, add_reads), (MUL, mul_reads))
    }
    return {"alone": alone, "sharing": sharing}


def test_the_sharing_probes_follow_a_conv_chain_observed_otherwise_than_the_inputs():
    from backend_spec.export.quantizer import probe
    from backend_spec.export.quantizer.infer import sharing_probe

    producer, consumers = sharing_probe(_sharing_probed(SYMMETRIC, AFFINE))
    assert producer == "nn.Conv2d>nn.ReLU" and consumers == {ADD, MUL}
    labels = [b.label for b in probe.sharing_parts(producer, consumers).branches]
    assert labels == [f"sharing:nn.Conv2d>nn.ReLU>{ADD}", f"sharing:nn.Conv2d>nn.ReLU>{MUL}"]
    same = _sharing_probed(SYMMETRIC, SYMMETRIC)
    same["alone"]["nn.Conv2d>nn.ReLU"] = _alone([CONV_RELU[0], _op(RELU, {}, SYMMETRIC)])
    assert sharing_probe(same) is None  # one qspec for both: nothing to tell apart


def test_an_op_that_observes_the_chains_output_again_gets_input_sharing_qspec():
    """add reads the affine relu output with its own symmetric qspec (observed again), mul
    reuses it: add's entry says ``input_sharing: qspec``, mul's nothing."""
    from backend_spec.export.quantizer.infer import observed_again

    probed = _sharing_probed(SYMMETRIC, AFFINE)
    assert observed_again(probed) == {ADD}
    names = {
        ADD: ("torch.add",),
        MUL: ("torch.mul",),
        "nn.Conv2d>nn.ReLU": ("nn.Conv2d", "nn.ReLU"),
    }
    entries = backend_of(infer(probed, names, "t").backend_config).entries
    sharing = {e.aten[0][0][0]: dict(e.policy).get("input_sharing") for e in entries if e.aten}
    assert sharing[ADD] == "qspec" and sharing[MUL] is None


POOL = "aten.max_pool2d.default"


@pytest.mark.parametrize(
    ("conv_reads", "order"),
    [
        (SYMMETRIC, [POOL, CONV, False]),
        ({"kind": "shared", "with": "producer:0"}, [POOL, CONV, True]),
    ],
    ids=["own_qspec_conv_first", "through_the_pool_pool_first"],
)
def test_a_conv_after_a_pool_after_the_chain_orders_the_two(conv_reads, order):
    """Core ML annotates convs before pools: a conv after conv + relu -> max_pool2d reads the
    pool's output with its own symmetric qspec, not through the pool's (the relu's) observer:
    the pool's stage is a later one."""
    shared = {"kind": "shared", "with": "producer:0"}
    ops = [*CONV_RELU, _op(POOL, {}, shared), _op(CONV, {"0": conv_reads}, SYMMETRIC)]
    probed = {
        "alone": {CONV: _alone([_op(CONV, {"0": SYMMETRIC}, SYMMETRIC)])},
        "sharing_post": {POOL: _alone(ops)},
    }
    found = reuse_orders(probed)
    assert found == [order]
    assert annotation_stages(found) == ({} if order[2] else {POOL: 1})


def test_an_op_left_float_after_a_conv_gets_no_entry_sharing_its_producer():
    """An activation fused with the Linear before it but left float after a conv (a quantizer
    that fuses linear + elu only): the conv-producer probe shows it, so the op gets no entry
    of its own sharing its producer's observer, which would quantize it after the conv."""
    names = {ELU: ("F.elu",)}
    probed = {"alone": {ELU: {"ops": [_op(ELU, {}, None)], "pre": [], "post": []}}}
    probed["pre"] = {ELU: _elu_after(LINEAR)}

    def singles():
        entries = backend_of(infer(probed, names, "t").backend_config).entries
        return [e for e in entries if e.aten and len(e.aten[0]) == 1]

    assert singles()  # after a Linear alone, the op is taken to share other producers too
    conv = _op(CONV, {"0": SYMMETRIC}, SYMMETRIC)
    probed["conv_pre"] = {ELU: {"ops": [_op(ELU, {}, None)], "pre": [conv], "post": []}}
    assert not singles()
