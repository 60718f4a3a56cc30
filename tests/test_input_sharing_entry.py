"""Version 12: ``input_sharing`` on a pattern entry. Core ML's conv and linear annotators give an
input whose producer is annotated that producer's own qspec (the input reuses an affine relu
output's observer), its add and mul their own symmetric qspec (torchao observes the affine
output again). The spec says it entry by entry; the runtime cases are data."""

from __future__ import annotations

import pytest

pytest.importorskip("torchao", reason="the pt2e extra (torchao) is not installed")

import torch  # noqa: E402

import backend_spec  # noqa: E402

SPEC = """\
spec_version: VERSION
name: core_ml_like
SPEC_WIDEdtype_configs:
  conv_relu:
    input_dtype: {dtype: quint8, observer: minmax, qscheme: symmetric}
    output_dtype: {dtype: quint8, observer: minmax, qscheme: affine}
    weight_dtype: {dtype: qint8, qscheme: symmetric}
    bias_dtype: float
  act:
    input_dtype: {dtype: quint8, observer: minmax, qscheme: symmetric}
    output_dtype: {dtype: quint8, observer: minmax, qscheme: symmetric}
    weight_dtype: {dtype: qint8, qscheme: symmetric}
    bias_dtype: float
patterns:
  - pattern: [F.conv2d, F.relu]
    dtype_configs: [conv_relu]
    aten: [[aten.conv2d.default, aten.relu.default]]
    qconfig: own
  - pattern: F.conv2d
    dtype_configs: [act]
    aten: [[aten.conv2d.default]]
  - pattern: torch.add
    dtype_configs: [act]
    aten: [[aten.add.Tensor]]
ADD_KEY"""


class _Net(torch.nn.Module):
    """relu(conv(x)) read by a conv and by an add."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Conv2d(3, 4, 1), torch.nn.Conv2d(4, 4, 1)

    def forward(self, x):
        y = torch.relu(self.a(x))
        return self.b(y) + y


def _observers_after_relu(text: str) -> dict[str, int]:
    """For the conv and the add after the relu: how many observers the edge from the relu
    passes, 1 where it reuses the relu's output observer, 2 where torchao observes it again."""
    from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

    torch.manual_seed(0)
    model, inputs = _Net().eval(), (torch.randn(1, 3, 4, 4),)
    quantizer = backend_spec.quantizer(backend_spec.loads(text, format="yaml"))
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), quantizer)
    found = {}
    for node in prepared.graph.nodes:
        if node.target not in (torch.ops.aten.conv2d.default, torch.ops.aten.add.Tensor):
            continue
        for arg in node.args:
            chain = 0
            while isinstance(arg, torch.fx.Node) and arg.op == "call_module":
                chain, arg = chain + 1, arg.args[0]
            if isinstance(arg, torch.fx.Node) and arg.name == "relu":
                found[str(node.target).split(".")[1]] = chain
    return found


@pytest.mark.parametrize(
    ("spec_wide", "add_key", "expected"),
    [
        ("", "", {"conv2d": 1, "add": 1}),  # dtype: both reuse the relu's observer
        ("", "    input_sharing: qspec\n", {"conv2d": 1, "add": 2}),
        ("input_sharing: qspec\n", "", {"conv2d": 2, "add": 2}),
        ("input_sharing: qspec\n", "    input_sharing: dtype\n", {"conv2d": 2, "add": 1}),
    ],
    ids=["spec_wide_dtype", "add_qspec", "spec_wide_qspec", "add_dtype_under_qspec"],
)
def test_an_entry_reads_its_producers_by_its_own_input_sharing(spec_wide, add_key, expected):
    text = SPEC.replace("VERSION", "12").replace("SPEC_WIDE", spec_wide)
    assert _observers_after_relu(text.replace("ADD_KEY", add_key)) == expected


def test_input_sharing_on_a_pattern_needs_version_12():
    text = SPEC.replace("VERSION", "11").replace("SPEC_WIDE", "")
    text = text.replace("ADD_KEY", "    input_sharing: qspec\n")
    with pytest.raises(backend_spec.SpecError) as raised:
        backend_spec.loads(text, format="yaml")
    assert "BS206" in str(raised.value) and "12" in str(raised.value)


@pytest.mark.parametrize(
    ("spec_wide", "add_key", "version"),
    [("input_sharing: qspec\n", "", 11), ("", "    input_sharing: qspec\n", 12)],
    ids=["spec_wide_key_is_older", "entry_key_is_version_12"],
)
def test_a_spec_is_written_in_the_version_of_the_input_sharing_it_uses(spec_wide, add_key, version):
    """The spec-wide ``input_sharing`` is a version 5 key, an entry's a version 12 one: the
    writer names the version of the one the spec uses (11 here: the chain's qconfig: own)."""
    text = SPEC.replace("VERSION", "12").replace("SPEC_WIDE", spec_wide)
    written = backend_spec.dump(backend_spec.loads(text.replace("ADD_KEY", add_key)))
    assert f"spec_version: {version}\n" in written
