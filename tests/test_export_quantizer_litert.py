"""Export of LiteRT's real ``PT2EQuantizer`` (litert-torch 0.10.0; issue 30) and the bespec
fixes it needed:

- the probe suite's branches no longer see each other's ``torch_fn`` sources (source
  partitions merged ``torch.mul`` of one branch with ``a * b`` of another, and LiteRT's
  ``_annotate_mul`` annotated one of them);
- an observer instance shared by several edges counts under each of its names when prepared
  graphs are compared (it was missed under its second name);
- a pool whose output shares its producer's observer and whose input carries no qspec
  (LiteRT's max_pool2d) is the ``upstream_only`` shared-observer entry, not a gap.

The fast tests run without litert-torch (round3.py's ``litert_like`` imitates the real
annotations; a test checks the imitation against the package when it is installed); the
slow ones export the real configs through the CLI and compare each spec with the original on
models the export never saw.
"""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("torchao", reason="the pt2e extra (torchao) is not installed")

import torch  # noqa: E402
from _export_helpers import (  # noqa: E402
    FIXTURES,
    differences,
    export,
    fixture,
    observed,
    unseen,
)

from backend_spec.export.quantizer import probe  # noqa: E402
from backend_spec.export.quantizer.infer import infer  # noqa: E402
from backend_spec.export.quantizer.verify import observers  # noqa: E402
from backend_spec.ir.lower import backend_of  # noqa: E402

needs_litert = pytest.mark.skipif(
    importlib.util.find_spec("litert_torch") is None, reason="litert-torch is not installed"
)
nn = torch.nn


class _TorchMul(nn.Module):
    def forward(self, x, y):
        return torch.mul(x, y)


class _OperatorMul(nn.Module):
    def forward(self, x, y):
        return x * y


def _mul_suite():
    parts = probe.SuiteParts()
    for index in range(3):
        for module in (_TorchMul(), _OperatorMul()):
            parts.add(probe.Branch(f"b{index}{type(module).__name__}"), module, _pair())
    return probe.export_suite(parts).module(check_guards=False)


def _pair():
    return (torch.randn(2, 4), torch.randn(2, 4))


def test_each_suite_branch_numbers_its_sources_as_if_exported_alone():
    """torch.export counts ``torch_fn`` ids per function over the whole export: ``torch.mul``'s
    ``mul_1`` and ``Tensor.mul``'s ``mul_1`` (another branch) were one source partition. Each
    branch now counts from 1 under ids no other branch has, so every mul is a partition of
    its own."""
    from torch.fx.passes.utils.source_matcher_utils import get_source_partitions

    suite = _mul_suite()
    sources = [n.meta["torch_fn"] for n in suite.graph.nodes if n.op == "call_function"]
    assert len(sources) == 6 and len({fqn for fqn, _function in sources}) == 6
    assert all(fqn.endswith(".mul_1") for fqn, _function in sources)
    partitions = get_source_partitions(suite.graph, ["mul"])["mul"]
    assert sorted(len(p.output_nodes) for p in partitions) == [1] * 6


def test_a_quantizer_annotating_a_partitions_first_output_quantizes_every_branch():
    """What LiteRT's ``_annotate_mul`` does (``partition.output_nodes[0]``), on the suite."""
    import itertools

    from torch.fx.passes.utils.source_matcher_utils import get_source_partitions
    from torchao.quantization.pt2e.quantizer import QuantizationAnnotation

    suite = _mul_suite()
    found = get_source_partitions(suite.graph, ["mul"])
    for partition in itertools.chain(*found.values()):
        node = partition.output_nodes[0]
        node.meta["quantization_annotation"] = QuantizationAnnotation(_annotated=True)
    muls = [n for n in suite.graph.nodes if n.op == "call_function"]
    assert all("quantization_annotation" in n.meta for n in muls)


def test_an_observer_shared_by_two_edges_is_read_under_each_name():
    """A pool sharing its producer's observer: torchao inserts the producer's instance again
    after the pool (a second module name, one instance); the pool's output and its consumer's
    input are observed by it, and the comparison must see that."""
    from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

    model = nn.Sequential(nn.Linear(8, 8), nn.MaxPool2d(2), nn.Linear(4, 4)).eval()
    exported = torch.export.export(model, (torch.randn(1, 2, 8, 8),)).module()
    prepared = prepare_pt2e(exported, fixture("round3", "litert_like")())
    found = observers(prepared, exported)
    (pool,) = [name for name in found if name.startswith("max_pool2d")]
    (out,) = [entry for entry in found[pool] if entry[0] == "out"]
    assert out[1][1] == ("linear", pool)  # one group: the producer's output and the pool's
    consumer = [entry for entry in found["linear_1"] if entry[0] == "in" and entry[1] == 0]
    assert consumer and consumer[0][2] == pool


ACT = observed()


def _pool(context, output):
    op = {
        "target": "aten.max_pool2d.default",
        "inputs": {},
        "kinds": {"0": "act"},
        "output": output,
        "args": {},
    }
    linear = {
        "target": "aten.linear.default",
        "inputs": {"0": ACT},
        "kinds": {"0": "act", "1": "param"},
        "output": ACT,
    }
    return {"ops": [op], "pre": [linear] if context != "alone" else [], "post": []}


@pytest.mark.parametrize(
    ("output", "borrowed"),
    [
        ({"kind": "shared", "with": "producer:0"}, True),
        ({"kind": "shared", "with": "other"}, False),
    ],
    ids=["shares_its_producer", "shares_elsewhere"],
)
def test_a_pool_with_only_its_output_shared_with_its_producer_borrows_its_input(output, borrowed):
    """LiteRT's max_pool2d: annotated only after an annotated producer, with an output
    ``SharedQuantizationSpec(producer)`` and no input qspec. That is the shared-observer entry
    with ``input_observer: upstream_only`` and ``quantize: if_input_quantized``; an output
    shared with anything else stays a gap."""
    linear = {
        "target": "aten.linear.default",
        "inputs": {"0": ACT},
        "kinds": {"0": "act", "1": "param"},
        "output": ACT,
    }
    probed = {
        "alone": {
            "aten.max_pool2d.default": _pool("alone", None),
            "aten.linear.default": {"ops": [linear], "pre": [], "post": []},
        },
        "pre": {"aten.max_pool2d.default": _pool("pre", output)},
    }
    names = {"aten.max_pool2d.default": ("nn.MaxPool2d",), "aten.linear.default": ("F.linear",)}
    inferred = infer(probed, names, "t")
    entries = [
        e
        for e in backend_of(inferred.backend_config).entries
        if "max_pool2d" in repr(e.aten) + repr(e.get("pattern"))
    ]
    if not borrowed:
        assert entries == [] and inferred.gaps
        return
    assert inferred.gaps == []
    (entry,) = entries
    policy = dict(entry.policy)
    assert (policy["input_observer"], policy["quantize"]) == ("upstream_only", "if_input_quantized")
    assert entry.get("observation_type").name == "OUTPUT_SHARE_OBSERVER_WITH_INPUT"


# --- the real package ----------------------------------------------------------------------


class _Net(nn.Module):
    """The ops LiteRT treats apart: linear, conv + relu, max pool, sigmoid, mul, view."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.pool(self.relu(self.conv(x)))
        z = self.fc(y)
        return torch.sigmoid(z) * z, self.fc(torch.sigmoid(z)).view(-1)


def _annotations(quantizer):
    torch.manual_seed(0)
    exported = torch.export.export(_Net().eval(), (torch.randn(1, 3, 8, 8),)).module()
    quantizer.annotate(quantizer.transform_for_annotation(exported))
    found = {}
    for node in exported.graph.nodes:
        if node.op == "call_function" and node.target in _IMITATED:
            described = probe.describe_node(node)
            # A None qspec (LiteRT's float bias) is no annotation: leave it out.
            inputs = {k: v for k, v in described["inputs"].items() if v is not None}
            found[node.name] = (inputs, described["output"])
    return found


_IMITATED = (
    torch.ops.aten.max_pool2d.default,
    torch.ops.aten.sigmoid.default,
    torch.ops.aten.conv2d.default,
    torch.ops.aten.relu.default,
)


@needs_litert
def test_the_litert_imitation_annotates_pools_and_sigmoids_as_the_real_package():
    """round3.py's ``litert_like`` (what CI runs without litert-torch) writes what the real
    quantizer writes on the constructs it imitates."""
    real = fixture("litert", "per_tensor")()
    imitation = fixture("round3", "litert_like")()
    assert _annotations(imitation) == _annotations(real)


def _export(tmp_path: Path, config: str) -> tuple[subprocess.CompletedProcess, Path]:
    return export(tmp_path, f"{FIXTURES / 'litert.py'}:{config}")


@pytest.mark.slow
@needs_litert
def test_the_real_litert_dynamic_config_exports_verifies_and_matches_unseen_models(tmp_path):
    """``is_dynamic=True`` quantizes conv and linear weights only (no activation qspec): a
    weight-only spec, verified, and alike on eleven models the export never saw."""
    done, out = _export(tmp_path, "dynamic")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "verified:" in done.stderr
    assert "in_float_out_float_w_qint8" in out.read_text()
    assert differences(out, fixture("litert", "dynamic"), unseen()) == []


@pytest.mark.slow
@needs_litert
@pytest.mark.parametrize("config", ["per_tensor", "per_channel"])
def test_the_real_litert_static_configs_export_in_stages_verify_and_match_unseen_models(
    tmp_path, config
):
    """LiteRT annotates in passes: max_pool2d shares its producer's observer only when an
    earlier pass (linear, conv, adaptive_avg_pool2d) annotated that producer, and the ops it
    propagates (hardtanh, mean with or without dims, views) come last. In graph order the
    spec differs on a pool after a hardtanh; with ``annotation_stage`` (version 8) it
    verifies, and is alike on eleven models the export never saw and a pool after a mul."""
    done, out = _export(tmp_path, config)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "verified:" in done.stderr
    text = out.read_text()
    assert "spec_version: 8" in text and "annotation_stage: 2" in text
    models = [*unseen(), ("mul_pool", _mul_pool)]
    assert differences(out, fixture("litert", config), models) == []


def _mul_pool():
    """A pool after a mul: LiteRT annotates mul after its pools, so the pool stays float
    (placed by the order probe of a two-input producer)."""

    class MulPool(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.pool = torch.nn.Conv2d(3, 4, 3), torch.nn.MaxPool2d(2)

        def forward(self, x):
            y = self.conv(x)
            return self.pool(y * y)

    return MulPool(), (torch.randn(1, 3, 8, 8),)


@pytest.mark.slow
@needs_litert
def test_the_real_litert_qat_config_is_reported_as_failing_by_itself(tmp_path):
    """``is_qat=True`` fails in every ``annotate`` under torchao 0.18 (its conv-bn annotator
    passes a function where torchao now wants a module): the export says so at once."""
    done, out = _export(tmp_path, "qat")
    assert done.returncode != 0 and not out.exists()
    assert "fails on any model, even one without ops" in done.stderr


def _always_fails():
    from torchao.quantization.pt2e.quantizer import Quantizer

    class Fails(Quantizer):
        def annotate(self, model):
            raise ValueError("Expected `mod` to be an instance of `torch.nn.Module`")

        def validate(self, model):
            """Nothing to check."""

    return Fails()


def test_a_quantizer_failing_on_a_graph_without_ops_is_not_bisected(monkeypatch):
    """LiteRT's QAT config fails in every ``annotate`` (its conv-bn patterns call an API that
    torchao 0.18 changed): one run on a graph without ops says so, instead of dozens of
    halving runs that end in the same error."""
    from backend_spec.export.quantizer import _without_failing, verify
    from backend_spec.export.quantizer.verify import Run

    runs = []
    real_run = verify.run
    monkeypatch.setattr(verify, "run", lambda *a, **k: runs.append(1) or real_run(*a, **k))
    parts = probe.SuiteParts()
    branches = [probe.Branch(f"m{i}") for i in range(4)]
    for branch in branches:
        parts.add(branch, nn.ReLU(), (torch.randn(2, 4),))
    suite = probe.export_suite(parts).module(check_guards=False)
    with pytest.raises(ValueError, match="fails on any model, even one without ops"):
        _without_failing(
            suite, _always_fails, (tuple(parts.inputs), set()), branches, Run({}, (), "e"), False
        )
    assert runs == []  # the bisection (verify.run) never started
