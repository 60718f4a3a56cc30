"""``claim_stage`` (spec_version 10): the pt2e runtime claims nodes pass by pass, so an entry of
an earlier pass takes nodes that a longer entry of a later pass would have matched, as X86's
per-type config claims Linear + add before its global config's conv + add + ReLU. The cases
are data: a model, the spec's stages, and which entry each ATen op ends up claimed by."""

from __future__ import annotations

import pytest

pytest.importorskip("torchao", reason="the pt2e extra (torchao) is not installed")

import torch  # noqa: E402

import backend_spec  # noqa: E402

nn = torch.nn

SPEC = """\
spec_version: 10
name: passes
dtype_configs:
  float: {{input_dtype: float, output_dtype: float}}
  w8a8: {{input_dtype: quint8, output_dtype: quint8, weight_dtype: qint8, bias_dtype: float}}
patterns:
  - pattern: [nn.Linear, operator.add]
    dtype_configs: [float]
    chain_input: any{linear}
  - pattern: [nn.Conv2d, operator.add, nn.ReLU]
    dtype_configs: [w8a8]
    extra_inputs: quantized
    chain_input: any{conv}
  - pattern: nn.Conv2d
    dtype_configs: [w8a8]{single}
  - pattern: nn.ReLU
    dtype_configs: [w8a8]{single}
"""


class _ConvLinear(nn.Module):
    """``relu(conv(x) + linear(y))``: both chains end at the add."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.fc, self.relu = nn.Conv2d(4, 4, 1), nn.Linear(4, 4), nn.ReLU()

    def forward(self, x, y):
        return self.relu(self.conv(x) + self.fc(y))


class _ConvConv(nn.Module):
    """``relu(conv(x) + conv2(y))``: no Linear, so the first pass claims nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.conv2, self.relu = nn.Conv2d(4, 4, 1), nn.Conv2d(4, 4, 1), nn.ReLU()

    def forward(self, x, y):
        return self.relu(self.conv(x) + self.conv2(y))


LINEAR_ADD = "(nn.Linear, operator.add)"
CONV_ADD_RELU = "(nn.Conv2d, operator.add, nn.ReLU)"

#: model, the claim stages written ({} for none, else linear/conv/single -> stage), and the
#: entry claiming each ATen op node (unclaimed nodes are left out).
CASES = {
    "one pass: the longest chain takes the add": (
        _ConvLinear,
        {},
        [
            ("aten.conv2d.default", CONV_ADD_RELU),
            ("aten.add.Tensor", CONV_ADD_RELU),
            ("aten.relu.default", CONV_ADD_RELU),
        ],
    ),
    "Linear + add first: the conv chain finds its add taken": (
        _ConvLinear,
        {"linear": 0, "conv": 1, "single": 1},
        [
            ("aten.conv2d.default", "nn.Conv2d"),
            ("aten.linear.default", LINEAR_ADD),
            ("aten.add.Tensor", LINEAR_ADD),
            ("aten.relu.default", "nn.ReLU"),
        ],
    ),
    "stages counted from any number: only their order matters": (
        _ConvLinear,
        {"linear": 5, "conv": 63, "single": 63},
        [
            ("aten.conv2d.default", "nn.Conv2d"),
            ("aten.linear.default", LINEAR_ADD),
            ("aten.add.Tensor", LINEAR_ADD),
            ("aten.relu.default", "nn.ReLU"),
        ],
    ),
    "a later pass still matches where the earlier one claimed nothing": (
        _ConvConv,
        {"linear": 0, "conv": 1, "single": 1},
        [
            ("aten.conv2d.default", "nn.Conv2d"),
            ("aten.conv2d.default", CONV_ADD_RELU),
            ("aten.add.Tensor", CONV_ADD_RELU),
            ("aten.relu.default", CONV_ADD_RELU),
        ],
    ),
    "single ops first: they split the longer chain": (
        _ConvLinear,
        {"linear": 1, "conv": 1, "single": 0},
        [
            ("aten.conv2d.default", "nn.Conv2d"),
            ("aten.linear.default", LINEAR_ADD),
            ("aten.add.Tensor", LINEAR_ADD),
            ("aten.relu.default", "nn.ReLU"),
        ],
    ),
}


def _spec_text(stages: dict[str, int]) -> str:
    return SPEC.format(
        **{
            part: f"\n    claim_stage: {stages[part]}" if part in stages else ""
            for part in ("linear", "conv", "single")
        }
    )


@pytest.mark.parametrize(("make", "stages", "expected"), CASES.values(), ids=CASES.keys())
def test_entries_claim_pass_by_pass(make, stages, expected):
    spec = backend_spec.loads(_spec_text(stages), format="yaml")
    torch.manual_seed(0)
    inputs = (torch.randn(1, 4, 4, 4), torch.randn(1, 4, 4, 4))
    graph = torch.export.export(make().eval(), inputs).module().graph
    matches = backend_spec.quantizer(spec).find_matches(graph)
    claimed = [(str(node.target), match.rule.label) for match in matches for node in match.nodes]
    assert sorted(claimed) == sorted(expected)


def test_the_key_needs_version_10():
    text = _spec_text({"linear": 0, "conv": 1}).replace("spec_version: 10", "spec_version: 9")
    with pytest.raises(backend_spec.SpecError) as raised:
        backend_spec.loads(text, format="yaml")
    assert "BS206" in str(raised.value) and "version 10" in str(raised.value)
