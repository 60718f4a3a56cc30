"""bespec check: cases per DTypeConfig (ptq, qat, fusion), verification, behaviour signatures,
golden drift, engines, the reference-model fallback, and the CLI's exit status."""

from __future__ import annotations

import copy
import json

import pytest
from typer.testing import CliRunner

import backend_spec
from backend_spec._torch import BackendConfig, BackendPatternConfig, ObservationType, quiet, torch
from backend_spec.check import (
    build_cases,
    check_case,
    compare_to_golden,
    emit_pytest,
    engine_for,
    read_golden,
    run_check,
    write_golden,
)
from backend_spec.check.cases import pattern_label
from backend_spec.check.golden import golden_from_report
from backend_spec.cli.app import app
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
    "nnqat.Linear",
    "(nn.Conv2d, nn.ReLU)",
    "nni.ConvReLU2d",
    "nniqat.ConvReLU2d",
    "torch.cat",
    "nn.Sigmoid",
    "nn.Embedding",
    "nnqat.Embedding",
    "nn.LSTM",
]


def small_backend(labels: list[str], name: str = "small", base: str = "native") -> BackendConfig:
    """The named patterns of a built-in backend, as their own BackendConfig."""
    configs = [c for c in builtin_backend_config(base).configs if pattern_label(c) in labels]
    assert len(configs) == len(labels), [pattern_label(c) for c in configs]
    return BackendConfig(name).set_backend_pattern_configs(copy.deepcopy(configs))


def results_by_key(report) -> dict:
    return {r.key: r for r in report.patterns}


@pytest.fixture(scope="module")
def handful_report():
    return run_check(small_backend(HANDFUL), engine=ENGINE, models=["mlp"])


def test_every_dtype_config_and_qat_is_a_case(handful_report) -> None:
    results = results_by_key(handful_report)
    # nn.Linear has static, dynamic int8 and dynamic fp16 DTypeConfigs and a qat_module.
    assert results["nn.Linear | ptq#0"].kind == "static quint8"
    assert results["nn.Linear | ptq#1"].kind == "dynamic quint8"
    assert results["nn.Linear | ptq#2"].kind == "fp16"
    assert results["nn.Linear | qat#0"].kind == "static quint8"
    assert results["nn.Embedding | ptq#0"].kind == "weight-only quint8"
    assert results["nn.LSTM | ptq#1"].kind == "fp16"
    # torch cannot build a QAT module around fp16 placeholder weights: said, not hidden.
    unbuildable = results.pop("nnqat.Linear | ptq#2")
    assert unbuildable.status == "skip" and "QAT module" in unbuildable.reason
    for key, result in results.items():
        assert result.status == "pass", (key, result.reason)
        assert result.sqnr_db is not None and result.sqnr_db >= 20, key
    assert handful_report.exercised() == len(results) > len(HANDFUL)


def test_qat_case_swaps_in_the_qat_module(handful_report) -> None:
    prepared = handful_report_signature(handful_report, "nn.Linear | qat#0", "prepared")
    assert any("nnqat.Linear" in line and "weight_fake_quant" in line for line in prepared)
    observers = handful_report_signature(handful_report, "nn.Linear | qat#0", "observers")
    assert all("FakeQuantize" in line for line in observers)


def handful_report_signature(report, key: str, section: str) -> list[str]:
    return results_by_key(report)[key].signature[section]


def test_signature_records_dtypes_ranges_sharing_and_modules(handful_report) -> None:
    signature = results_by_key(handful_report)["(nn.Conv2d, nn.ReLU) | ptq#0"].signature
    assert set(signature) >= {"dtype_config", "observers", "prepared", "reference", "lowered"}
    # x86 halves the activation range (reduce_range), weights stay symmetric qint8.
    assert any("dtype=quint8" in o and "quant_max=127" in o for o in signature["observers"])
    assert any("nni.ConvReLU2d" in line for line in signature["prepared"])
    assert any("nnqr.Conv2d(weight_dtype=qint8" in line for line in signature["reference"])
    assert "nniq.ConvReLU2d" in signature["lowered"]
    sigmoid = results_by_key(handful_report)["nn.Sigmoid | ptq#0"].signature["observers"]
    assert any("FixedQParams" in o and "scale=0.00390625" in o for o in sigmoid)


def test_wrong_reference_module_fails_naming_the_pattern() -> None:
    bc = small_backend(["nn.Linear"], "broken")
    bc.configs[0].set_reference_quantized_module(nnqr.Conv2d)
    report = run_check(bc, engine=ENGINE, models=[])
    result = results_by_key(report)["nn.Linear | ptq#0"]
    assert result.status == "fail"
    # spec spellings, so Conv2d the float module and Conv2d the reference one are told apart
    assert "reference_quantized_module nnqr.Conv2d right for nn.Linear" in result.reason
    assert "convert_to_reference_fx" in result.reason
    assert report.failed


def test_wrong_fused_and_root_modules_fail() -> None:
    bc = small_backend(["(nn.Conv2d, nn.ReLU)", "nni.ConvReLU2d"], "broken")
    bc.configs[0].set_fused_module(nni.ConvReLU1d)
    bc.configs[1].set_root_module(nn.Linear)
    results = results_by_key(run_check(bc, engine=ENGINE, models=[]))
    fused = results["(nn.Conv2d, nn.ReLU) | ptq#0"]
    assert fused.status == "fail" and "fused_module nni.ConvReLU1d" in fused.reason
    root = results["nni.ConvReLU2d | ptq#0"]
    assert root.status == "fail" and "root_module nn.Linear" in root.reason


def test_unsynthesizable_pattern_is_skipped_with_a_reason() -> None:
    report = run_check(small_backend(["method:shape", "method:hardsigmoid"]), models=[])
    assert [r.status for r in report.patterns] == ["skip", "skip"]
    assert all(r.reason for r in report.patterns)
    assert not report.failed and report.exercised() == 0


def test_fusion_only_entry_is_a_case() -> None:
    conv_relu = BackendPatternConfig((nn.Conv2d, nn.ReLU)).set_fused_module(nni.ConvReLU2d)
    conv_relu.set_fuser_method(lambda is_qat, conv, relu: nni.ConvReLU2d(conv, relu))
    report = run_check(BackendConfig("fuse").set_backend_pattern_config(conv_relu), models=[])
    [result] = report.patterns
    assert (result.mode, result.status) == ("fusion", "pass"), result.reason
    assert any("nni.ConvReLU2d" in line for line in result.signature["fused"])
    assert report.to_json()["summary"]["exercised"] == 1

    conv_relu.set_fused_module(nni.ConvReLU1d)
    [wrong] = run_check(
        BackendConfig("f").set_backend_pattern_config(conv_relu), models=[]
    ).patterns
    assert wrong.status == "fail" and "not fused_module nni.ConvReLU1d" in wrong.reason


def test_empty_backend_claims_no_pass_fraction() -> None:
    report = run_check(BackendConfig("empty"), models=[])
    assert report.pass_fraction() is None
    assert report.to_json()["summary"]["pass_fraction"] is None


def test_complex_format_patterns_are_exercised() -> None:
    labels = [
        "(nn.ReLU, (torch.add, nn.Conv2d, MatchAllNode)) (complex format)",
        "(torch.add, MatchAllNode, nn.Conv2d) (complex format)",
        "nni.ConvAdd2d",
        "nni.ConvAddReLU2d",
    ]
    # onednn's conv-add kernels exist only on the onednn engine: the check follows the backend.
    engine = "onednn" if "onednn" in torch.backends.quantized.supported_engines else ENGINE
    report = run_check(small_backend(labels, base="onednn"), engine=engine, models=[])
    for result in report.patterns:
        assert result.status == "pass", (result.key, result.reason)
    relu = results_by_key(report)[f"{labels[0]} | ptq#0"].signature["prepared"]
    assert any("nni.ConvAddReLU2d" in line for line in relu)


class Blend(nn.Module):
    """A custom op with two inputs."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return 0.5 * x + 0.5 * y


class MyConvReLU(nni._FusedModule):
    """A custom fused module torch has no recipe for."""

    def __init__(self, conv: nn.Module, relu: nn.Module) -> None:
        super().__init__(conv, relu)


def test_custom_two_input_op_and_custom_fused_module() -> None:
    native = {pattern_label(c): c for c in builtin_backend_config("native").configs}
    static = native["torch.add"].dtype_configs
    weighted = native["nn.Conv2d"].dtype_configs
    blend = BackendPatternConfig(Blend).set_dtype_configs(static)
    fusion = BackendPatternConfig((nn.Conv2d, nn.ReLU)).set_dtype_configs(weighted)
    fusion.set_fused_module(MyConvReLU).set_fuser_method(lambda qat, c, r: MyConvReLU(c, r))
    fused = BackendPatternConfig(MyConvReLU).set_dtype_configs(weighted)
    fused.set_root_module(nn.Conv2d).set_reference_quantized_module(nnqr.Conv2d)
    bc = BackendConfig("custom").set_backend_pattern_configs([blend, fusion, fused])
    report = run_check(bc, engine=ENGINE, models=[])
    for result in report.patterns:
        assert result.status == "pass", (result.key, result.reason)
    blend_reference = report.patterns[0].signature["reference"]
    assert sum("dequantize" in line for line in blend_reference) >= 3  # two inputs, one output


def test_model_result_maps_nodes_to_kinds(handful_report) -> None:
    [mlp] = handful_report.models
    assert mlp.name == "mlp" and mlp.status == "pass"
    assert mlp.quantized["fc2"] == "static quint8"  # nn.Linear (+ReLU) is in the handful
    assert mlp.quantized["norm"] == "fp32"  # LayerNorm is not
    assert mlp.fp32_ms and mlp.int8_ms and not mlp.reference_fallback
    assert mlp.signature["lowered"]


def test_golden_round_trip_and_drift(handful_report, tmp_path) -> None:
    path = tmp_path / "golden.json"
    write_golden(handful_report, path)
    golden = read_golden(path)
    assert golden["version"] == 2
    assert compare_to_golden(handful_report, golden) == []

    cases = golden["cases"]
    cases["nn.Linear | ptq#0"]["status"] = "fail"
    cases["torch.cat | ptq#0"]["sqnr_db"] += 10
    cases["nn.Sigmoid | ptq#0"]["signature"]["observers"][0] = "obs0: something else"
    golden["models"]["mlp"]["quantized"]["norm"] = "static quint8"
    del cases["nn.LSTM | ptq#0"]
    cases["nn.Gone | ptq#0"] = {"status": "pass", "sqnr_db": 30.0}
    drift = "\n".join(compare_to_golden(handful_report, golden))
    assert "case nn.Linear | ptq#0: status fail -> pass" in drift
    assert "case torch.cat | ptq#0: SQNR dropped" in drift
    assert "case nn.Sigmoid | ptq#0: observers changed: 'obs0: something else' ->" in drift
    assert "model mlp: node norm static quint8 -> fp32" in drift
    assert "case nn.LSTM | ptq#0 is new" in drift
    assert "nn.Gone | ptq#0 is in the golden but was not checked" in drift


def test_old_golden_version_is_refused(tmp_path) -> None:
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"version": 1, "patterns": {}}))
    with pytest.raises(ValueError, match="--update-golden"):
        read_golden(path)


#: Single-field edits of a small native backend that change what prepare/convert produce.
def _narrow_output(bc: BackendConfig) -> None:
    config = next(c for c in bc.configs if pattern_label(c) == "nn.ReLU")
    dtype_config = config.dtype_configs[0]
    narrowed = copy.deepcopy(dtype_config)
    narrowed.output_dtype_with_constraints.quant_max_upper_bound = 100
    narrowed.input_dtype_with_constraints.quant_max_upper_bound = 100
    config.set_dtype_configs([narrowed])


def _swap_observation(bc: BackendConfig) -> None:
    config = next(c for c in bc.configs if pattern_label(c) == "nn.MaxPool2d")
    config.set_observation_type(ObservationType.OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT)


def _swap_input_type_to_index(bc: BackendConfig) -> None:
    config = next(c for c in bc.configs if pattern_label(c) == "F.conv2d")
    config._input_type_to_index = {"weight": 2, "bias": 1}


def _swap_qat_root(bc: BackendConfig) -> None:
    config = next(c for c in bc.configs if pattern_label(c) == "nnqat.Conv2d")
    config.set_root_module(nn.Conv1d)


def _swap_dtype_configs(bc: BackendConfig) -> None:
    native = {pattern_label(c): c for c in builtin_backend_config("native").configs}
    config = next(c for c in bc.configs if pattern_label(c) == "nn.Linear")
    config.set_dtype_configs(native["nn.LSTM"].dtype_configs)  # dynamic only


MUTATIONS = {
    "narrowed activation range": (_narrow_output, "case nn.ReLU | ptq#0"),
    "observation type": (_swap_observation, "case nn.MaxPool2d | ptq#0: observers changed"),
    "input_type_to_index": (_swap_input_type_to_index, "case F.conv2d | ptq#0"),
    "QAT root_module": (_swap_qat_root, "case nnqat.Conv2d | ptq#0"),
    "dtype_configs": (_swap_dtype_configs, "case nn.Linear | ptq#0"),
}

MUTATED = ["nn.ReLU", "nn.MaxPool2d", "F.conv2d", "nnqat.Conv2d", "nn.Linear"]


@pytest.fixture(scope="module")
def mutation_golden() -> dict:
    return golden_from_report(run_check(small_backend(MUTATED), engine=ENGINE, models=[]))


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_golden_catches_spec_edits(name: str, mutation_golden: dict) -> None:
    mutate, expected = MUTATIONS[name]
    bc = small_backend(MUTATED)
    mutate(bc)
    drift = compare_to_golden(run_check(bc, engine=ENGINE, models=[]), mutation_golden)
    assert any(message.startswith(expected) for message in drift), drift


def test_json_format(handful_report) -> None:
    document = json.loads(to_json_text(handful_report))
    assert {"patterns", "models", "notes", "summary"} <= set(document)
    first = document["patterns"][0]
    assert set(first) >= {"key", "pattern", "status", "reason", "sqnr_db", "detail", "signature"}
    assert document["summary"]["cases"] == len(handful_report.patterns)
    assert document["models"][0]["name"] == "mlp"


def test_engine_follows_the_backend() -> None:
    supported = torch.backends.quantized.supported_engines
    if "qnnpack" in supported:
        assert engine_for("qnnpack") == "qnnpack"
    if "onednn" in supported:
        assert engine_for("onednn") == "onednn"
    assert engine_for("my_npu") == ENGINE
    assert engine_for("qnnpack", ENGINE) == ENGINE
    with pytest.raises(ValueError, match="not supported"):
        engine_for("native", "no-such-engine")


NPU_SPEC = """\
spec_version: 1
name: my_npu
dtype_configs:
  int8_weighted:
    input_dtype: {dtype: qint8, quant_min_lower_bound: -127, quant_max_upper_bound: 127}
    output_dtype: {dtype: qint8, quant_min_lower_bound: -127, quant_max_upper_bound: 127}
    weight_dtype: {dtype: qint8, quant_min_lower_bound: -127, quant_max_upper_bound: 127}
    bias_dtype: float
  int8:
    input_dtype: {dtype: qint8, quant_min_lower_bound: -127, quant_max_upper_bound: 127}
    output_dtype: {dtype: qint8, quant_min_lower_bound: -127, quant_max_upper_bound: 127}
patterns:
  - pattern: nn.Conv2d
    dtype_configs: [int8_weighted]
    root_module: nn.Conv2d
    qat_module: nnqat.Conv2d
    reference_quantized_module: nnqr.Conv2d
  - pattern: nnqat.Conv2d
    dtype_configs: [int8_weighted]
    root_module: nn.Conv2d
    reference_quantized_module: nnqr.Conv2d
  - pattern: [nn.Conv2d, nn.ReLU]
    dtype_configs: [int8_weighted]
    fused_module: nni.ConvReLU2d
    fuser_method: {sequential: nni.ConvReLU2d}
  - pattern: nni.ConvReLU2d
    dtype_configs: [int8_weighted]
    root_module: nn.Conv2d
    reference_quantized_module: nnqr.Conv2d
  - pattern: nn.Linear
    dtype_configs: [int8_weighted]
    root_module: nn.Linear
    reference_quantized_module: nnqr.Linear
  - pattern: torch.add
    dtype_configs: [int8]
  - pattern: nn.MaxPool2d
    dtype_configs: [int8]
    observation_type: output_share_observer_with_input
"""


def test_qint8_npu_spec_passes_with_one_note(tmp_path) -> None:
    spec = tmp_path / "npu.yaml"
    spec.write_text(NPU_SPEC)
    models = ["conv2d_bn_relu", "mlp", "depthwise_hardswish"]
    report = run_check(str(spec), engine=ENGINE, models=models)
    assert not report.failed, [(r.key, r.reason) for r in report.patterns if r.status != "pass"]
    assert all(r.reference_fallback for r in report.patterns)
    assert [m.status for m in report.models] == ["pass"] * 3
    assert all(m.reference_fallback for m in report.models)
    assert len(report.notes) == 1 and "reference model" in report.notes[0]
    assert any(r.mode == "qat" and r.status == "pass" for r in report.patterns)


@pytest.mark.slow
def test_cli_exit_status_follows_the_golden(tmp_path) -> None:
    bc = small_backend(["nn.Linear", "method:sigmoid_"], "mine")  # sigmoid_ has no x86 kernel
    spec = tmp_path / "small.yaml"
    spec.write_text(backend_spec.dump(bc))
    golden = tmp_path / "golden.json"
    runner = CliRunner()
    base = ["check", str(spec), "--engine", ENGINE, "--model", "mlp"]
    plain = runner.invoke(app, base)
    assert plain.exit_code == 1, plain.output  # a failure, no golden
    record = runner.invoke(app, [*base, "--golden", str(golden), "--update-golden"])
    assert record.exit_code == 0, record.output
    assert "wrote golden" in record.output and "1 known failure" in record.output
    matched = runner.invoke(app, [*base, "--golden", str(golden), "--format", "json"])
    assert matched.exit_code == 0, matched.output
    assert "matches golden" in matched.output and "(1 known failure)" in matched.output
    assert "recorded with torch" not in matched.output
    recorded = json.loads(golden.read_text())
    assert recorded["torch"] == str(torch.__version__)
    golden.write_text(json.dumps({**recorded, "torch": "2.0.0"}))
    other_torch = runner.invoke(app, [*base, "--golden", str(golden)])
    assert other_torch.exit_code == 0, other_torch.output  # a note, not drift
    assert f"recorded with torch 2.0.0; this run uses torch {torch.__version__}" in (
        other_torch.output
    )

    bc.configs[0].set_reference_quantized_module(nnqr.Conv2d)
    spec.write_text(backend_spec.dump(bc))
    drifted = runner.invoke(app, [*base, "--golden", str(golden)])
    assert drifted.exit_code == 1
    assert "drift:" in drifted.output and "nn.Linear | ptq#0" in drifted.output

    test_file = tmp_path / "test_backend_golden.py"
    spec.write_text(backend_spec.dump(small_backend(["nn.Linear"], "mine")))
    assert runner.invoke(app, [*base, "--golden", str(golden), "--update-golden"]).exit_code == 0
    emit_pytest(spec, golden, test_file)
    namespace: dict = {"__file__": str(test_file)}
    exec(compile(test_file.read_text(), str(test_file), "exec"), namespace)
    namespace["test_backend_spec_matches_golden"]()


def test_cli_misuse_exits_2(tmp_path) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["check", str(tmp_path / "missing.yaml")]).exit_code == 2
    assert runner.invoke(app, ["check", "native", "--format", "xml"]).exit_code == 2
    assert runner.invoke(app, ["check", "native", "--update-golden"]).exit_code == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert runner.invoke(app, ["check", "native", "--golden", str(bad)]).exit_code == 2
    result = runner.invoke(app, ["check", "native", "--model", "nowhere_mod:make"])
    assert result.exit_code == 2 and "nowhere_mod" in result.output


def test_cli_model_from_file_in_the_current_directory(tmp_path, monkeypatch) -> None:
    (tmp_path / "mymodel.py").write_text(
        "import torch\n\n"
        "def make():\n"
        "    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU()).eval()\n"
        "    return model, (torch.randn(4, 16),)\n"
    )
    spec = tmp_path / "small.yaml"
    spec.write_text(backend_spec.dump(small_backend(["nn.Linear"], "mine")))
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    for ref in ("mymodel:make", "mymodel.py:make"):
        result = runner.invoke(
            app, ["check", "small.yaml", "--engine", ENGINE, "--model", ref, "--format", "json"]
        )
        assert result.exit_code == 0, result.output
        models = {m["name"]: m for m in json.loads(result.stdout)["models"]}
        assert models[ref]["status"] == "pass" and models[ref]["quantized"]


@pytest.mark.slow
def test_parallel_matches_serial(tmp_path) -> None:
    spec = tmp_path / "small.yaml"
    spec.write_text(backend_spec.dump(small_backend(["nn.Linear", "torch.cat", "nn.ReLU"])))
    serial = run_check(str(spec), engine=ENGINE, models=[], jobs=1)
    parallel = run_check(str(spec), engine=ENGINE, models=[], jobs=2)
    assert [(r.key, r.status, r.signature) for r in serial.patterns] == [
        (r.key, r.status, r.signature) for r in parallel.patterns
    ]


def test_fused_module_pattern_uses_reference_conv() -> None:
    # nn.Conv2d maps the conv to nnqr.Conv2d; (nn.Conv2d, nn.ReLU) makes ConvReLU2d a fused module
    bc = small_backend(["nn.Conv2d", "(nn.Conv2d, nn.ReLU)", "nni.ConvReLU2d"])
    [case] = [c for c in build_cases(bc, ENGINE) if c.key == "nni.ConvReLU2d | ptq#0"]
    result = check_case(case)
    assert result.status == "pass", result.reason
    reference = result.signature["reference"]
    assert any("nni.ConvReLU2d([nnqr.Conv2d(" in line for line in reference)


def test_engine_from_pyproject_and_verbose_details(tmp_path, monkeypatch) -> None:
    other = next(e for e in ("qnnpack", "fbgemm", "onednn", "x86") if e != ENGINE)
    if other not in torch.backends.quantized.supported_engines:
        other = ENGINE
    (tmp_path / "pyproject.toml").write_text(f'[tool.bespec.check]\nengine = "{other}"\n')
    monkeypatch.chdir(tmp_path)  # the project's settings are the working directory's
    spec = tmp_path / "small.yaml"
    spec.write_text(backend_spec.dump(small_backend(["method:sigmoid_"], "mine")))
    runner = CliRunner()
    result = runner.invoke(app, ["check", str(spec), "--format", "json", "--model", "mlp"])
    document = json.loads(result.stdout)
    assert document["engine"] == other
    [case] = document["patterns"]
    assert case["status"] == "fail" and len(case["reason"]) <= 100
    assert len(case["detail"]) > len(case["reason"])  # torch's full text
    verbose = runner.invoke(app, ["check", str(spec), "--verbose", "--engine", ENGINE])
    assert "method:sigmoid_ | ptq#0" in verbose.output  # the full error, under its key


FX_DTYPE_SPEC = """\
name: newbie
dtype_configs:
  act: {{input_dtype: {act}, output_dtype: {act}}}
  w8: {{input_dtype: quint8, output_dtype: quint8, weight_dtype: qint8}}
patterns:
  - pattern: nn.ReLU
    dtype_configs: [act]
  - pattern: nn.Linear
    dtype_configs: [w8]
"""


@pytest.mark.parametrize(("act", "model_status"), [("uint8", "fail"), ("quint8", "pass")])
def test_a_model_does_not_pass_while_its_ops_fail_for_their_dtype(
    tmp_path, act: str, model_status: str
) -> None:
    """The dtype trap: uint8 where FX needs quint8 fails the ReLU's case; the model that
    holds a ReLU (observed as uint8, left float by convert_fx) fails with it, naming the fix."""
    spec = tmp_path / "newbie.yaml"
    spec.write_text(FX_DTYPE_SPEC.format(act=act))
    report = run_check(str(spec), engine=ENGINE, models=["mlp"])
    relu = [r for r in report.patterns if r.pattern == "nn.ReLU"]
    assert [r.status for r in relu] == ["fail" if act == "uint8" else "pass"]
    (model,) = report.models
    assert model.status == model_status, model.reason
    if model_status == "fail":
        assert "observed as uint8" in model.reason and "quint8" in model.reason


SIGMOID_SPEC = """\
name: fixed
patterns:
  - pattern: nn.Sigmoid
    dtype_configs:
      - input_dtype: {input}
        output_dtype: {{dtype: quint8, scale_exact_match: 0.00390625, zero_point_exact_match: 0}}
"""


@pytest.mark.parametrize(
    ("input_dtype", "status"),
    [
        ("quint8", "fail"),
        ("{dtype: quint8, scale_exact_match: 0.00390625, zero_point_exact_match: 0}", "pass"),
    ],
    ids=["input left open", "input states the fixed qparams"],
)
def test_a_fixed_qparams_input_clipping_the_data_is_said(tmp_path, input_dtype, status) -> None:
    """FX observes a fixed-qparams op's input with the output's fixed observer where no producer
    observes it; a low SQNR from that clipping says so instead of a bare figure."""
    spec = tmp_path / "fixed.yaml"
    spec.write_text(SIGMOID_SPEC.format(input=input_dtype), encoding="utf-8")
    (result,) = run_check(spec, models=[]).patterns
    assert result.status == status, result.reason
    clipped = "its input is observed with the output's fixed qparams (range [0, 0.996094]"
    assert (clipped in result.detail) == (status == "fail"), result.detail
