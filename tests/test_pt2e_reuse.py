"""backend_spec.pt2e.reuse: torchao's pattern graphs kept per process, stand-ins for patterns
that cannot match, and observer names found without a quadratic search, each giving what
torchao itself computes (an export's spec is byte-identical with and without them)."""

from __future__ import annotations

import operator

import pytest

from backend_spec._torch import torch
from backend_spec.pt2e import reuse

qat_utils = pytest.importorskip("torchao.quantization.pt2e.qat_utils")
F = torch.nn.functional
CONV_FNS = [F.conv1d, F.conv2d, F.conv_transpose1d, F.conv_transpose2d]


def _conv_bn_graph() -> torch.fx.GraphModule:
    """A training-mode conv2d -> batch_norm, exported as prepare_qat_pt2e takes it."""
    model = torch.nn.Sequential(torch.nn.Conv2d(2, 2, 1), torch.nn.BatchNorm2d(2)).train()
    return torch.export.export(model, (torch.randn(1, 2, 3, 3),)).module()


def _example_inputs(conv_fn) -> tuple:
    shape = (1, 1, 3) if "1d" in conv_fn.__name__ else (1, 1, 3, 3)
    weight = (1, 1, 1) if "1d" in conv_fn.__name__ else (1, 1, 1, 1)
    return (torch.randn(*shape), torch.randn(*weight), *(torch.randn(1) for _ in range(5)))


def test_a_kept_pattern_is_the_graph_torchao_builds_and_each_caller_gets_its_own_copy():
    build = qat_utils._get_aten_graph_module_for_pattern
    pattern = qat_utils._get_conv_bn_pattern(F.conv2d)
    fresh = build(pattern, _example_inputs(F.conv2d))
    with reuse.reused_patterns():
        first = qat_utils._get_aten_graph_module_for_pattern(pattern, _example_inputs(F.conv2d))
        again = qat_utils._get_aten_graph_module_for_pattern(
            qat_utils._get_conv_bn_pattern(F.conv2d), _example_inputs(F.conv2d)
        )
    assert first.code == fresh.code == again.code
    assert first is not again and first.graph is not again.graph
    assert qat_utils._get_aten_graph_module_for_pattern is build  # restored on exit


@pytest.mark.parametrize("conv_fn", CONV_FNS, ids=lambda f: f.__name__)
def test_every_conv_bn_pattern_holds_a_node_has_conv_sees(conv_fn):
    """The stand-in is sound only if a graph without such a node cannot match the pattern."""
    pattern = qat_utils._get_aten_graph_module_for_pattern(
        qat_utils._get_conv_bn_pattern(conv_fn), _example_inputs(conv_fn)
    )
    assert reuse.has_conv(pattern.graph, conv_fn)


def test_a_helper_without_its_conv_leaves_the_graph_as_torchao_leaves_it():
    """conv1d patterns on a conv2d graph: the stand-ins change nothing torchao would do."""
    graph = _conv_bn_graph()
    assert not reuse.has_conv(graph.graph, F.conv1d) and reuse.has_conv(graph.graph, F.conv2d)
    inputs = (torch.randn(1, 1, 3), torch.randn(1, 1, 1), *(torch.randn(1) for _ in range(5)))
    plain = qat_utils._fuse_conv_bn_qat_helper(graph, F.conv1d, inputs, is_cuda=False).code
    with reuse.reused_patterns():
        stood_in = qat_utils._fuse_conv_bn_qat_helper(
            _conv_bn_graph(), F.conv1d, inputs, is_cuda=False
        ).code
    assert stood_in == plain


def test_a_fold_without_its_conv_leaves_the_graph_as_torchao_leaves_it():
    """convert's conv-bn fold on a prepared conv2d-bn graph, for conv1d: the stand-ins skip
    the rewrites, and the graph is torchao's."""
    from torchao.quantization.pt2e.quantize_pt2e import prepare_qat_pt2e
    from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
        X86InductorQuantizer,
        get_default_x86_inductor_quantization_config,
    )

    def prepared() -> torch.fx.GraphModule:
        quantizer = X86InductorQuantizer().set_global(
            get_default_x86_inductor_quantization_config(is_qat=True)
        )
        return prepare_qat_pt2e(_conv_bn_graph(), quantizer)

    inputs = (torch.randn(1, 1, 3), torch.randn(1, 1, 1), *(torch.randn(1) for _ in range(4)))
    plain = qat_utils._fold_conv_bn_qat_helper(prepared(), F.conv1d, inputs, is_cuda=False)
    with reuse.reused_patterns():
        stood_in = qat_utils._fold_conv_bn_qat_helper(prepared(), F.conv1d, inputs, is_cuda=False)
    assert stood_in.code == plain.code


def test_a_rewrite_of_a_stand_in_does_nothing_and_others_run_as_before():
    from torch.fx import subgraph_rewriter

    graph = _conv_bn_graph()
    before = graph.code
    original = subgraph_rewriter.replace_pattern_with_filters
    with reuse.reused_patterns():
        rewrite = qat_utils.replace_pattern_with_filters
        assert rewrite is not original
        assert rewrite(graph, reuse._stand_in(F.conv1d), reuse._stand_in(F.conv1d)) == []
        assert graph.code == before
        pattern = torch.fx.symbolic_trace(lambda x: torch.relu(x))
        assert rewrite(graph, pattern, pattern) == []  # a real pattern: torch's own run
    assert qat_utils.replace_pattern_with_filters is original


def test_observer_names_are_the_ones_torch_picks():
    from torch.ao.quantization.fx.utils import get_new_attr_name_with_prefix

    class Odd(torch.nn.Module):
        obs_3 = 1  # a class attribute: taken, seen only by hasattr

    module = Odd()
    for i in (0, 1, 2, 5):
        setattr(module, f"obs_{i}", torch.nn.Identity())
    module.register_buffer("obs_4", torch.zeros(1))
    delattr(module, "obs_1")
    expected = get_new_attr_name_with_prefix("obs_")(module)
    assert reuse.attr_name_finder("obs_")(module) == expected == "obs_1"
    module.obs_1 = torch.nn.Identity()
    assert reuse.attr_name_finder("obs_")(module) == "obs_6"
    assert reuse.attr_name_finder("a.b_")(module) == get_new_attr_name_with_prefix("a.b_")(module)


#: Steps between two asks for a name: add the name asked for (as ``_insert_obs_or_fq``
#: does), or change the module otherwise (each must send the search back to 0 or keep it
#: right).
STEPS = (
    "add",
    "add",
    "add",
    ("delete", 1),
    "add",
    "add",
    ("delete", 0),
    ("other", "x"),
    "add",
    ("buffer", 7),
    "add",
    "add",
    ("delete", 2),
    ("other", "y"),
    "add",
    "add",
    # the name asked for added, a lower one removed and another submodule added: the module
    # holds one submodule more, as after "add" alone, but its newest is not that name
    ("swap", 1, "z"),
    "add",
    "add",
)


def test_observer_names_stay_torchs_as_the_module_changes_between_asks():
    """The search after the last name handed out gives torch's name after every kind of change:
    names added as asked, removed below it, other submodules and buffers added."""
    from torch.ao.quantization.fx.utils import get_new_attr_name_with_prefix

    module = torch.nn.Module()
    find = reuse.attr_name_finder("obs_")
    names = []
    for step in STEPS:
        expected = get_new_attr_name_with_prefix("obs_")(module)
        name = find(module)
        assert name == expected, (step, names)
        names.append(name)
        if step == "add":
            setattr(module, name, torch.nn.Identity())
        elif step[0] == "delete":
            delattr(module, f"obs_{step[1]}")
        elif step[0] == "other":
            setattr(module, step[1], torch.nn.Identity())
        elif step[0] == "swap":
            setattr(module, name, torch.nn.Identity())
            delattr(module, f"obs_{step[1]}")
            setattr(module, step[2], torch.nn.Identity())
        else:
            module.register_buffer(f"obs_{step[1]}", torch.zeros(1))
    assert len(set(names)) < len(names)  # names freed by a removal were handed out again


def test_the_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(reuse, "MAX_PATTERNS", 0)
    monkeypatch.setattr(reuse, "_patterns", {})
    with reuse.reused_patterns():
        qat_utils._get_aten_graph_module_for_pattern(
            qat_utils._get_conv_bn_pattern(F.conv2d), _example_inputs(F.conv2d)
        )
    assert reuse._patterns == {}


def test_a_pattern_holding_a_tensor_is_not_kept():
    held = torch.ones(1)
    assert reuse.pattern_key(lambda x: x + held, (torch.ones(1),), False, {}) is None

    def add(x):
        return x + 1.0

    key = reuse.pattern_key(add, (torch.ones(1),), False, {})
    assert key is not None and key == reuse.pattern_key(add, (torch.zeros(1),), False, {})
    assert key != reuse.pattern_key(add, (torch.ones(2),), False, {})
    assert key != reuse.pattern_key(add, (torch.ones(1),), True, {})


def test_the_originals_come_back_when_the_last_user_leaves():
    import importlib

    prepare = importlib.import_module("torch.ao.quantization.fx.prepare")  # not fx.prepare()
    original = prepare.get_new_attr_name_with_prefix
    with reuse.reused_patterns():
        with reuse.reused_patterns():
            assert prepare.get_new_attr_name_with_prefix is reuse.attr_name_finder
        assert prepare.get_new_attr_name_with_prefix is reuse.attr_name_finder
    assert prepare.get_new_attr_name_with_prefix is original


class _Chains(torch.nn.Module):
    """Conv -> batch_norm -> add -> relu chains, some broken (an add of two convs, a relu
    reading a conv), so that partitions of each type connect to some and not others."""

    def __init__(self) -> None:
        super().__init__()
        self.convs = torch.nn.ModuleList(torch.nn.Conv2d(2, 2, 1) for _ in range(4))
        self.bns = torch.nn.ModuleList(torch.nn.BatchNorm2d(2) for _ in range(4))
        self.relus = torch.nn.ModuleList(torch.nn.ReLU() for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.relus[0](self.bns[0](self.convs[0](x)) + x)
        b = self.relus[1](x + self.bns[1](self.convs[1](a)))
        c = self.bns[2](self.convs[2](b)) + self.bns[3](self.convs[3](b))
        return self.relus[2](c) + self.relus[3](self.convs[0](c))


def _named(found: list) -> list[tuple]:
    return [tuple(tuple(n.name for n in part.nodes) for part in chain) for chain in found]


@pytest.mark.parametrize(
    "kinds",
    [
        [torch.nn.Conv2d, torch.nn.BatchNorm2d, operator.add, torch.nn.ReLU],
        [torch.nn.Conv2d, torch.nn.BatchNorm2d],
        [operator.add, torch.nn.ReLU],
        [torch.nn.ReLU],
        [],
    ],
    ids=lambda kinds: "-".join(getattr(k, "__name__", str(k)) for k in kinds) or "none",
)
def test_the_sequential_partition_search_finds_torchaos_chains_in_its_order(kinds):
    graph_utils = pytest.importorskip("torchao.quantization.pt2e.graph_utils")
    original = graph_utils.find_sequential_partitions
    graph = torch.export.export(_Chains().train(), (torch.randn(1, 2, 3, 3),)).module()
    expected = original(graph, kinds)
    found = reuse.sequential_partitions(original)(graph, kinds)
    assert _named(found) == _named(expected)
    assert len(kinds) < 2 or 0 < len(expected) < 64  # connections were judged, both ways
    with pytest.raises(ValueError, match="must be unique"):
        reuse.sequential_partitions(original)(graph, [torch.nn.ReLU, torch.nn.ReLU])


def test_the_partition_search_is_rebound_where_a_quantizer_imported_it_and_restored():
    x86 = pytest.importorskip("torchao.quantization.pt2e.quantizer.x86_inductor_quantizer")
    graph_utils = pytest.importorskip("torchao.quantization.pt2e.graph_utils")
    original = graph_utils.find_sequential_partitions
    assert x86.find_sequential_partitions is original
    with reuse.reused_patterns():
        assert x86.find_sequential_partitions is not original
        assert x86.find_sequential_partitions is graph_utils.find_sequential_partitions
    assert x86.find_sequential_partitions is original is graph_utils.find_sequential_partitions


def test_a_quantizers_own_binding_of_the_pattern_builder_is_rebound_and_restored():
    """executorch's XNNPACK utilities import the builder by name: their calls are kept too."""
    utils = pytest.importorskip("executorch.backends.xnnpack.quantizer.xnnpack_quantizer_utils")
    original = utils._get_aten_graph_module_for_pattern
    assert original is qat_utils._get_aten_graph_module_for_pattern
    with reuse.reused_patterns():
        rebound = utils._get_aten_graph_module_for_pattern
        assert rebound is not original and rebound is qat_utils._get_aten_graph_module_for_pattern
    assert utils._get_aten_graph_module_for_pattern is original


def _module_pattern(act, base=torch.nn.Module):
    """A pattern as coremltools writes one: a local module class whose forward closes over
    the functions it calls."""

    class Pattern(base):
        def forward(self, x):
            return act(self.helper(x))

        def helper(self, x):
            return x * 2

    return Pattern()


def test_a_stateless_module_pattern_is_keyed_by_its_code_and_closure():
    inputs = (torch.ones(2),)
    key = reuse.pattern_key(_module_pattern(torch.relu), inputs, False, {})
    assert key is not None
    assert key == reuse.pattern_key(_module_pattern(torch.relu), inputs, False, {})
    assert key != reuse.pattern_key(_module_pattern(torch.sigmoid), inputs, False, {})
    assert key != reuse.pattern_key(_module_pattern(torch.relu).eval(), inputs, False, {})


class _Tripled(torch.nn.Module):
    def helper(self, x):
        return x * 3


def test_a_module_pattern_with_state_or_other_code_is_not_confused():
    inputs = (torch.ones(2),)
    plain = reuse.pattern_key(_module_pattern(torch.relu), inputs, False, {})
    # an inherited helper that differs: the base's methods are part of the key
    other = reuse.pattern_key(_module_pattern(torch.relu, _Tripled), inputs, False, {})
    assert other is not None and other != plain
    weighted = _module_pattern(torch.relu)
    weighted.scale = torch.nn.Parameter(torch.ones(1))
    assert reuse.pattern_key(weighted, inputs, False, {}) is None
    tagged = _module_pattern(torch.relu)
    tagged.factor = 2  # an attribute of its own, read by nothing the key sees
    assert reuse.pattern_key(tagged, inputs, False, {}) is None
    hooked = _module_pattern(torch.relu)
    hooked.register_forward_hook(lambda *_: None)
    assert reuse.pattern_key(hooked, inputs, False, {}) is None


def test_a_kept_module_pattern_is_the_graph_torch_builds():
    utils = pytest.importorskip("torchao.quantization.pt2e.utils")
    inputs = (torch.randn(2, 3),)
    fresh = utils._get_aten_graph_module_for_pattern(_module_pattern(torch.relu), inputs)
    with reuse.reused_patterns():
        first = utils._get_aten_graph_module_for_pattern(_module_pattern(torch.relu), inputs)
        again = utils._get_aten_graph_module_for_pattern(_module_pattern(torch.relu), inputs)
        other = utils._get_aten_graph_module_for_pattern(_module_pattern(torch.tanh), inputs)
    assert first.code == fresh.code == again.code != other.code
    assert first is not again
    assert reuse.pattern_key(_module_pattern(torch.relu), inputs, False, {}) in reuse._patterns
