"""bespec check: synthesis and verification per pattern, models, golden drift, JSON output."""

from __future__ import annotations

import copy
import json

import pytest

import backend_spec
from backend_spec._torch import BackendConfig, quiet, torch
from backend_spec.check import (
    check_command,
    check_pattern,
    compare_to_golden,
    emit_test,
    read_golden,
    run_check,
    write_golden,
)
from backend_spec.check.run import pattern_cases, pattern_label
from backend_spec.cli.render.check import to_json_text
from backend_spec.names.vocabulary import builtin_backend_config

with quiet():
    import torch.ao.nn.intrinsic as nni
    import torch.ao.nn.quantized.reference as nnqr

nn = torch.nn

ENGINE = "x86" if "x86" in torch.backends.quantized.supported_engines else "fbgemm"

#: A handful of native patterns covering the families the check must handle.
HANDFUL = [
    "nn.Linear",
    "(nn.Conv2d, nn.ReLU)",
    "nni.ConvReLU2d",
    "torch.cat",
    "nn.Sigmoid",
    "nn.Embedding",
    "nn.LSTM",
]


def small_backend(labels: list[str], name: str = "small", base: str = "native") -> BackendConfig:
    """The named patterns of a built-in backend, as their own BackendConfig."""
    configs = [c for c in builtin_backend_config(base).configs if pattern_label(c) in labels]
    assert len(configs) == len(labels), [pattern_label(c) for c in configs]
    return BackendConfig(name).set_backend_pattern_configs(configs)


@pytest.fixture(scope="module")
def handful_report():
    return run_check(small_backend(HANDFUL), engine=ENGINE, models=["mlp"])


def test_handful_of_patterns_pass(handful_report) -> None:
    results = {r.pattern: r for r in handful_report.patterns}
    assert set(results) == set(HANDFUL)
    for label, result in results.items():
        assert result.status == "pass", (label, result.reason)
        assert result.sqnr_db is not None and result.sqnr_db >= 20, label
    assert results["nn.Embedding"].kind == "weight-only quint8"
    assert results["nn.LSTM"].kind == "dynamic quint8"
    assert results["nn.Sigmoid"].kind == "static quint8"


def test_dynamic_linear() -> None:
    native = builtin_backend_config("native")
    linear = copy.deepcopy(next(c for c in native.configs if c.pattern is nn.Linear))
    linear.dtype_configs = [linear.dtype_configs[1]]  # the dynamic quint8 one
    bc = BackendConfig("dyn").set_backend_pattern_config(linear)
    [(label, entry)] = pattern_cases(bc, ENGINE)
    result = check_pattern(bc, entry, label, ENGINE)
    assert (result.status, result.kind) == ("pass", "dynamic quint8"), result.reason


def test_wrong_reference_module_fails_naming_the_pattern() -> None:
    native = builtin_backend_config("native")
    linear = copy.deepcopy(next(c for c in native.configs if c.pattern is nn.Linear))
    linear.set_reference_quantized_module(nnqr.Conv2d)
    bc = BackendConfig("broken").set_backend_pattern_config(linear)
    report = run_check(bc, engine=ENGINE, models=[])
    [result] = report.patterns
    assert result.pattern == "nn.Linear"
    assert result.status == "fail"
    assert "Conv2d" in result.reason and "convert_to_reference_fx" in result.reason
    assert report.failed


def test_unsynthesizable_pattern_is_skipped_with_a_reason() -> None:
    report = run_check(small_backend(["method:shape", "method:hardsigmoid"]), models=[])
    assert [r.status for r in report.patterns] == ["skip", "skip"]
    assert all(r.reason for r in report.patterns)
    assert not report.failed


def test_model_result_maps_nodes_to_kinds(handful_report) -> None:
    [mlp] = handful_report.models
    assert mlp.name == "mlp" and mlp.status == "pass"
    assert mlp.quantized["fc2"] == "static quint8"  # nn.Linear (+ReLU) is in the handful
    assert mlp.quantized["norm"] == "fp32"  # LayerNorm is not
    assert mlp.fp32_ms and mlp.int8_ms


def test_golden_round_trip_and_drift(handful_report, tmp_path) -> None:
    path = tmp_path / "golden.json"
    write_golden(handful_report, path)
    golden = read_golden(path)
    assert compare_to_golden(handful_report, golden) == []

    golden["patterns"]["nn.Linear"]["status"] = "fail"
    golden["patterns"]["torch.cat"]["sqnr_db"] += 10
    golden["models"]["mlp"]["quantized"]["norm"] = "static quint8"
    del golden["patterns"]["nn.Sigmoid"]
    golden["patterns"]["nn.Gone"] = {"status": "pass", "sqnr_db": 30.0}
    drift = "\n".join(compare_to_golden(handful_report, golden))
    assert "pattern nn.Linear: status fail -> pass" in drift
    assert "pattern torch.cat: SQNR dropped" in drift
    assert "model mlp: node norm static quint8 -> fp32" in drift
    assert "pattern nn.Sigmoid is new" in drift
    assert "nn.Gone is in the golden but was not checked" in drift


def test_json_format(handful_report) -> None:
    document = json.loads(to_json_text(handful_report))
    assert {"patterns", "models"} <= set(document)
    first = document["patterns"][0]
    assert set(first) >= {"pattern", "status", "reason", "sqnr_db"}
    assert document["models"][0]["name"] == "mlp"


@pytest.mark.slow
def test_check_command_json_golden_and_emitted_test(tmp_path, capsys) -> None:
    spec = tmp_path / "small.yaml"
    spec.write_text(backend_spec.dump(small_backend(["nn.Linear", "torch.add"], "mine")))
    golden = tmp_path / "golden.json"
    args = dict(engine=ENGINE, jobs=1, models=None, fmt="json", allow_imports=[])
    assert check_command(str(spec), golden=str(golden), update_golden=True, **args) == 0
    capsys.readouterr()
    assert check_command(str(spec), golden=str(golden), update_golden=False, **args) == 0
    document = json.loads(capsys.readouterr().out)
    assert [p["pattern"] for p in document["patterns"]] == ["nn.Linear", "torch.add"]
    assert "drift" not in document

    test_file = tmp_path / "test_backend_golden.py"
    emit_test(spec, golden, test_file)
    namespace: dict = {"__file__": str(test_file)}
    exec(compile(test_file.read_text(), str(test_file), "exec"), namespace)
    namespace["test_backend_spec_matches_golden"]()


def test_check_command_misuse_exits_2(tmp_path) -> None:
    assert check_command(str(tmp_path / "missing.yaml")) == 2
    assert check_command("native", fmt="xml") == 2
    assert check_command("native", update_golden=True) == 2


@pytest.mark.slow
def test_parallel_matches_serial() -> None:
    serial = run_check("qnnpack", engine=ENGINE, models=[], jobs=1)
    parallel = run_check("qnnpack", engine=ENGINE, models=[], jobs=2)
    assert [(r.pattern, r.status) for r in serial.patterns] == [
        (r.pattern, r.status) for r in parallel.patterns
    ]


def test_fused_module_pattern_uses_reference_conv() -> None:
    report = run_check(small_backend(["nni.ConvReLU2d"]), engine=ENGINE, models=[])
    assert report.patterns[0].status == "pass", report.patterns[0].reason
    assert nni.ConvReLU2d  # the pattern exercised is the fused module itself
