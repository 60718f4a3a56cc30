"""Export of the real OpenVINO pt2e Quantizer (executorch's, on nncf 3.4.0 and openvino),
skipped where nncf is not installed.

The quantizer fails by itself on a model with a LayerNorm (a per-channel observer on the
norm's 1-D weight raises when calibrated): export leaves that model out, names it, and writes
nothing when the spec of the rest cannot be verified. Its weight-only modes observe weights
with nncf's own observer classes, built per node from nncf's analysis of the graph, which
convert themselves (an OpenVINO decompressor module in the weight's place, no
quantize/dequantize nodes): no spec observer does, and the refusal says so.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytest.importorskip("torchao", reason="the pt2e extra (torchao) is not installed")
pytest.importorskip("nncf", reason="nncf (OpenVINO's quantizer) is not installed")
pytest.importorskip("executorch.backends.openvino.quantizer", reason="no OpenVINO quantizer")

import torch  # noqa: E402
from _export_helpers import export, outside_checkout  # noqa: E402

from backend_spec.export.quantizer import probe  # noqa: E402

FIXTURE = "tests.fixtures.quantizers.openvino"


def _openvino():
    from tests.fixtures.quantizers.openvino import int8_sym

    return int8_sym()


@pytest.mark.slow  # importing nncf and openvino alone takes seconds
def test_the_model_openvino_fails_on_is_found_and_the_probes_kept():
    """A LayerNorm model (calibrated) fails; the LayerNorm probe (only prepared, as export
    runs it) does not, so it stays probed; the rest runs once the model is left out."""
    from backend_spec.export.quantizer.verify import failing_branches, run, without

    parts = probe.SuiteParts()
    made = [
        ("mlp", torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())),
        ("normed", torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8))),
        ("alone:aten.layer_norm.default", torch.nn.LayerNorm(8)),
    ]
    for label, module in made:
        parts.add(probe.Branch(label), module, (torch.randn(2, 8),))
    suite = probe.export_suite(parts).module(check_guards=False)
    inputs, models = tuple(parts.inputs), {0, 1}
    failed = run(suite, _openvino(), inputs, models)
    # It fails once prepared, in calibration: only the calibrated models are searched.
    assert "Dimension out of range" in failed.error and failed.after_prepare
    assert failing_branches(suite, _openvino, inputs, 3, converted=models) == {1}
    assert not run(without(suite, {1}), _openvino(), inputs, models).error


def _export(tmp_path: Path, factory: str) -> tuple[subprocess.CompletedProcess, Path]:
    return export(tmp_path, f"{FIXTURE}:{factory}", path=outside_checkout())


@pytest.mark.slow
def test_the_default_config_names_the_model_it_fails_on_and_writes_nothing(tmp_path):
    done, out = _export(tmp_path, "int8_sym")
    assert done.returncode != 0, done.stderr[-2000:]
    assert "the quantizer itself fails on models transformer" in done.stderr
    # nncf observes a depthwise conv's input per channel, a one-channel conv's per tensor.
    assert "a depthwise conv (groups = input channels) has its input observed" in done.stderr
    assert "`when` cannot test groups = input channels" in done.stderr
    assert "nothing was written" in done.stderr
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize("factory", ["int8wo_sym", "int8wo_asym"])
def test_a_weight_only_config_is_refused_naming_nncfs_observer(tmp_path, factory):
    """Refused for the observer that converts itself, named once per reason; the asymmetric
    mode's int8 qspec with [0, 255] is a gap too (written as bounds, the inferred spec was
    invalid and export ended in "bespec bug")."""
    done, out = _export(tmp_path, factory)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "bespec bug" not in done.stderr
    assert "INT8WeightObserver (built with wc_param) has no spec value" in done.stderr
    assert "INT8WeightObserver.convert replaces the observed tensor itself" in done.stderr
    assert "which no spec key sets" not in done.stderr
    assert not out.exists()
