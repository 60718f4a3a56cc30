"""``annotation_stage`` (spec_version 8): the pt2e runtime annotates stage by stage, so a
condition on a producer sees only the producers of earlier stages, as a quantizer that
annotates in passes (LiteRT's ``PT2EQuantizer``) does. staged.py holds such a quantizer and
its spec; without the stages, the spec differs from it wherever a pool reads a hardtanh."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torchao", reason="the pt2e extra (torchao) is not installed")

import torch  # noqa: E402
from _export_helpers import fixture  # noqa: E402

import backend_spec  # noqa: E402
from backend_spec.pt2e.compare import compare_quantizers  # noqa: E402

nn = torch.nn
staged_quantizer = fixture("staged")


class _Net(nn.Module):
    def __init__(self, *layers: str):
        super().__init__()
        made = {
            "conv": lambda: nn.Conv2d(3, 3, 3, padding=1),
            "linear": lambda: nn.Linear(8, 8),
            "pool": lambda: nn.MaxPool2d(1),
            "hardtanh": nn.Hardtanh,
        }
        self.body = nn.Sequential(*(made[name]() for name in layers))

    def forward(self, x):
        return self.body(x)


#: Layers of a model -> whether the spec without stages differs from the passes quantizer.
CASES = {
    "conv_pool": (("conv", "pool"), False),
    "conv_pool_pool": (("conv", "pool", "pool"), False),
    "conv_hardtanh": (("conv", "hardtanh"), False),
    "conv_hardtanh_pool": (("conv", "hardtanh", "pool"), True),
    "linear_hardtanh_pool_linear": (("linear", "hardtanh", "pool", "linear"), True),
    "conv_pool_hardtanh_pool": (("conv", "pool", "hardtanh", "pool"), True),
}


def _spec(tmp_path: Path, staged: bool) -> Path:
    text = staged_quantizer.SPEC
    if not staged:
        text = "\n".join(line for line in text.splitlines() if "annotation_stage" not in line)
    path = tmp_path / "passes.yaml"
    path.write_text(text + "\n")
    return path


def _differences(spec: Path, layers: tuple[str, ...]) -> list[str]:
    def model():
        torch.manual_seed(0)
        return _Net(*layers).eval(), (torch.randn(1, 3, 8, 8),)

    results = compare_quantizers(
        staged_quantizer.passes_like, lambda: backend_spec.quantizer(spec), [("m", model)]
    )
    return [d for r in results for d in r.differences]


@pytest.mark.parametrize(("layers", "order_matters"), CASES.values(), ids=CASES.keys())
def test_the_staged_spec_annotates_as_the_passes_and_the_unstaged_one_in_graph_order(
    tmp_path, layers, order_matters
):
    assert _differences(_spec(tmp_path, staged=True), layers) == []
    assert bool(_differences(_spec(tmp_path, staged=False), layers)) == order_matters


POOL, CONV, HARDTANH, MUL = (
    "aten.max_pool2d.default",
    "aten.conv2d.default",
    "aten.hardtanh.default",
    "aten.mul.Tensor",
)

#: Order probes ``[producer, op, op annotated after it]`` -> the stages export writes.
STAGE_CASES = {
    "graph_order_agrees": ([[CONV, POOL, True], [HARDTANH, POOL, True]], {}),
    "litert_pool": (
        [[CONV, POOL, True], [HARDTANH, POOL, False], [MUL, POOL, False], [POOL, HARDTANH, True]],
        {HARDTANH: 1, MUL: 1},
    ),
    "one_pass_in_graph_order_both_ways": (
        [[MUL, HARDTANH, True], [HARDTANH, MUL, True], [HARDTANH, POOL, False]],
        {HARDTANH: 1, MUL: 1},
    ),
    "contradictory": ([[CONV, POOL, False], [POOL, CONV, False]], {}),
    "float_after_decides_a_contradiction": (
        [[HARDTANH, POOL, False], [MUL, HARDTANH, False], [POOL, MUL, True]],
        {HARDTANH: 1, MUL: 2},
    ),
    "no_probe": ([], {}),
}


@pytest.mark.parametrize(("orders", "stages"), STAGE_CASES.values(), ids=STAGE_CASES.keys())
def test_export_places_each_op_in_a_stage_only_when_graph_order_disagrees(orders, stages):
    from backend_spec.export.quantizer.infer import annotation_stages

    assert annotation_stages(orders) == stages


MEAN = "aten.mean.default"

#: ``(producer, op)`` -> whether an order probe is built for it: :data:`.probe.EXTRA_UNITS`
#: (torch.mean without dims) are placed as well as the packaged table's units, producers of
#: several inputs too (mul reads the Linear's output twice), each pair only where the op has
#: one input and takes the producer's output.
ORDER_CASES = {
    "packaged_units": ((CONV, POOL), True),
    "extra_unit_after_a_packaged_one": ((HARDTANH, MEAN), True),
    "packaged_unit_after_an_extra_one": ((MEAN, HARDTANH), True),
    "a_pool_cannot_read_a_scalar": ((MEAN, POOL), False),
    "two_input_producer_reads_the_linear_twice": ((MUL, POOL), True),
    "two_input_op_is_not_placed": ((CONV, "aten.cat.default"), False),
    "unknown_op": (("aten.nothing.default", POOL), False),
}


@pytest.mark.parametrize(("pair", "built"), ORDER_CASES.values(), ids=ORDER_CASES.keys())
def test_order_probes_place_every_one_input_unit_the_op_can_follow(pair, built):
    from backend_spec.export.quantizer.probe import order_parts

    labels = [branch.label for branch in order_parts([pair]).branches]
    assert labels == ([f"order:{pair[0]}>{pair[1]}"] if built else [])


def test_infer_takes_its_order_probes_by_keyword_only():
    """A list of orders in ``rewritten``'s place was truthy and placed nothing (the staged
    spec of a merge had no stage at all): both are keyword-only."""
    from backend_spec.export.quantizer.infer import infer

    with pytest.raises(TypeError):
        infer({}, {}, "q", [], [[CONV, POOL, True]])
    assert infer({}, {}, "q", [], orders=[[CONV, POOL, True]]).gaps == []
