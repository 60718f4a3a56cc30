"""``annotation_stage`` (spec_version 8): the pt2e runtime annotates stage by stage, so a
condition on a producer sees only the producers of earlier stages, as a quantizer that
annotates in passes (LiteRT's ``PT2EQuantizer``) does. staged.py holds such a quantizer and
its spec; without the stages, the spec differs from it wherever a pool reads a hardtanh."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torchao", reason="the pt2e extra (torchao) is not installed")

import torch  # noqa: E402

import backend_spec  # noqa: E402
from backend_spec.pt2e.compare import compare_quantizers  # noqa: E402

nn = torch.nn
FIXTURES = Path(__file__).parent / "fixtures" / "quantizers"
sys.path.insert(0, str(FIXTURES))
try:
    import staged as staged_quantizer  # noqa: E402
finally:
    sys.path.remove(str(FIXTURES))


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
