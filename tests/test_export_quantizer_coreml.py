"""The real Core ML quantizer (coremltools 9.0, ``tests/fixtures/quantizers/coreml.py``): what
its qspecs are, read the way export reads them. Skipped unless coremltools (and executorch,
whose XNNPACK helpers stand in for torch.ao's removed ones) can be imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torchao", reason="the pt2e extra (torchao) is not installed")
pytest.importorskip("executorch", reason="executorch cannot be imported")
pytest.importorskip("coremltools", reason="coremltools is not installed")

import torch  # noqa: E402
from _export_helpers import FIXTURES, export, outside_checkout  # noqa: E402

from backend_spec.export.quantizer import probe  # noqa: E402
from backend_spec.export.quantizer.infer import infer  # noqa: E402
from backend_spec.ir.lower import backend_of  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "quantizers"))
coreml = pytest.importorskip("coreml")
#: Importing coremltools takes tens of seconds on a shared machine.
pytestmark = pytest.mark.slow


def _annotated_linear(factory):
    model = torch.nn.Sequential(torch.nn.Linear(6, 5)).eval()
    exported = torch.export.export(model, (torch.randn(2, 6),)).module()
    factory().annotate(exported)
    (node,) = [n for n in exported.graph.nodes if n.target == torch.ops.aten.linear.default]
    return node


@pytest.mark.parametrize(
    ("factory", "expected"),
    [("default", False), ("affine", None), ("per_tensor", False)],
)
def test_core_mls_linear_exports_its_unset_activation_range(factory, expected):
    """Core ML's symmetric uint8 activations leave quant_min/quant_max unset (zero point 128):
    ``customized_qrange: false``; its affine ones compute alike either way and omit the key."""
    node = _annotated_linear(getattr(coreml, factory))
    described = probe.describe_node(node)
    assert described["inputs"]["0"]["quant_min"] is None
    op = {"target": "aten.linear.default", "annotated": True, **described}
    probed = {"alone": {"aten.linear.default": {"ops": [op], "pre": [], "post": []}}}
    inferred = infer(probed, {"aten.linear.default": ("F.linear",)}, "t")
    assert inferred.gaps == []
    (entry,) = backend_of(inferred.backend_config)
    (dtype_config,) = entry.dtype_configs
    act = dtype_config.mapping("input_dtype")
    assert (act.get("fake_quant"), act.get("ptq_fake_quant")) == ("fake_quantize", True)
    assert act.get("customized_qrange") is expected


# --- exported through the CLI, compared on models the export never saw ----------------------


def _export(tmp_path: Path, config: str) -> tuple[subprocess.CompletedProcess, Path]:
    return export(tmp_path, f"{FIXTURES / 'coreml.py'}:{config}", path=outside_checkout())


def _unseen():
    import unseen  # tests/fixtures/quantizers is on sys.path (above)

    return unseen.UNSEEN


def _matches(spec: Path, original, models) -> list[str]:
    """What differs between the spec's PTQ quantizer and the original on ``models``
    (placement, qparams, outputs by torch.equal)."""
    import backend_spec
    from backend_spec.pt2e.compare import compare_quantizers

    results = compare_quantizers(original, lambda: backend_spec.quantizer(spec), models)
    return [f"{r.name}: {d}" for r in results for d in r.differences]


def test_core_mls_weight_only_config_exports_verifies_and_matches_unseen_models(tmp_path):
    """Float activations, fake-quantized conv and linear weights: every qspec is a
    fake-quantize, so export verifies in the QAT flow, where the spec's weight-only conv
    before a BatchNorm failed in prepare_qat_pt2e (IndexError, a bespec bug). The spec
    verifies, and its PTQ quantizer is alike on eleven models the export never saw."""
    done, out = _export(tmp_path, "weight_only")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "verified:" in done.stderr and "bespec bug" not in done.stderr
    text = out.read_text()
    assert "input_dtype: float" in text and "ptq_fake_quant: true" in text
    assert _matches(out, coreml.weight_only, _unseen()) == []
