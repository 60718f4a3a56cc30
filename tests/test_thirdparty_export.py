"""Real-world-style BackendConfigs (tests/fixtures) export to YAML and TOML and load back
exactly: factory closures, torch's wrappers, nested forward patterns, class-level fusers,
shadowed submodule names, unnamed configs, malformed values, and ``extends`` recovered."""

from __future__ import annotations

import importlib
import warnings
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import backend_spec
from backend_spec._torch import BackendConfig, BackendPatternConfig, torch
from backend_spec.analysis.compare import describe, describe_backend, diff
from backend_spec.cli.app import app
from backend_spec.export import ExportWarning, build_document, dump, name_from_ref
from backend_spec.export.extends import closest_builtin
from backend_spec.names.resolver import Kind, Resolver
from backend_spec.names.vocabulary import builtin_backend_config

nn = torch.nn
FORMATS = ["yaml", "toml"]

#: (module, attribute, allow_imports, name given to unnamed configs)
CASES = {
    "coreml": ("thirdparty_configs.coreml_like", "get_backend_config", "thirdparty_configs"),
    "openvino": (
        "thirdparty_configs.openvino_like",
        "get_openvino_backend_config",
        "thirdparty_configs",
    ),
    "equant": ("equant_like.config", "get_config", "equant_like"),
    "torch_test": ("thirdparty_configs.torch_test_like", "get_test_config", "thirdparty_configs"),
    "mqbench": ("thirdparty_configs.mqbench_like", "get_config", "thirdparty_configs"),
}


def config(case: str) -> BackendConfig:
    module, attr, _ = CASES[case]
    return getattr(importlib.import_module(module), attr)()


def round_trip(case: str, fmt: str, **options: Any) -> tuple[BackendConfig, BackendConfig, str]:
    bc = config(case)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExportWarning)
        text = dump(bc, format=fmt, name=bc.name or case, **options)
    return bc, backend_spec.loads(text, format=fmt, allow_imports=[CASES[case][2]]), text


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case", list(CASES))
def test_third_party_configs_round_trip_exactly(case: str, fmt: str) -> None:
    bc, loaded, _ = round_trip(case, fmt)
    assert describe(loaded) == describe(bc)
    assert describe_backend(loaded)["order"] == describe_backend(bc)["order"]
    assert loaded.name == (bc.name or case)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case", ["coreml", "equant", "openvino"])
def test_export_of_a_loaded_third_party_spec_is_a_fixed_point(case: str, fmt: str) -> None:
    _, loaded, text = round_trip(case, fmt, base="auto")
    assert dump(loaded, format=fmt, base="auto") == text


def test_factory_closures_are_written_as_calls_and_rebuilt_by_calling_the_factory() -> None:
    from thirdparty_configs import coreml_like

    _, loaded, text = round_trip("coreml", "yaml")
    assert "call: thirdparty_configs.coreml_like.get_fuser_method" in text
    assert "kwargs: {tag: {literal: ReLU}}" in text
    first = loaded.configs[0].fuser_method
    assert first.__code__ is coreml_like.get_fuser_method(None).__code__
    assert first.__closure__[0].cell_contents is coreml_like.ConvAct2d
    assert "spec_version: 2" in text


def test_torch_wrappers_get_readable_forms() -> None:
    _, loaded, text = round_trip("openvino", "yaml")
    assert "{reverse_sequential: nni.ConvReLU2d}" in text
    assert "{reverse2: fuse_conv_bn}" in text
    assert "{reverse3: fuse_conv_bn_relu}" in text
    assert "{sequential: nni.LinearReLU}" in text
    relu_conv = loaded.configs[0].fuser_method
    fused = relu_conv(False, nn.ReLU(), nn.Conv1d(1, 1, 1))  # 1.13 order: (relu, conv) reversed
    assert isinstance(fused, torch.ao.nn.intrinsic.ConvReLU1d)


def test_nested_forward_patterns_keep_their_shape() -> None:
    bc, loaded, text = round_trip("openvino", "toml")
    assert 'pattern = ["nn.ReLU", ["nn.BatchNorm1d", "nn.Conv1d"]]' in text
    nested = [c.pattern for c in loaded.configs if isinstance(c.pattern, tuple)]
    assert (nn.ReLU, (nn.BatchNorm2d, nn.Conv2d)) in nested
    assert [c.pattern for c in loaded.configs] == [c.pattern for c in bc.configs]


def test_class_level_fusers_resolve_to_callables_not_descriptors() -> None:
    from equant_like.fuse.conv import Fusers, SubFusers

    resolver = Resolver(("equant_like",))
    static = resolver.resolve("equant_like.fuse.conv.Fusers.linear_relu", Kind.FUNCTION)
    assert static is Fusers.linear_relu and not isinstance(static, staticmethod)
    bound = resolver.resolve("equant_like.fuse.conv.SubFusers.conv_relu", Kind.FUNCTION)
    assert bound.__self__ is SubFusers and bound.__func__ is Fusers.conv_relu.__func__
    _, loaded, text = round_trip("equant", "yaml")
    assert "fuser_method: equant_like.fuse.conv.SubFusers.conv_relu" in text
    fused = [c for c in loaded.configs if c.pattern == (nn.Conv2d, nn.ReLU6)][0]
    assert type(fused.fuser_method(False, nn.Conv2d(1, 1, 1), nn.ReLU6())).__name__ == "ConvReLU"


def test_names_resolve_through_the_module_they_name_despite_a_rebound_attribute() -> None:
    import equant_like
    from equant_like.qat.conv import ConvReLU as QatConvReLU

    assert equant_like.qat.conv is equant_like.fuse.conv  # the star-import's rebinding
    resolver = Resolver(("equant_like",))
    assert resolver.resolve("equant_like.qat.conv.ConvReLU", Kind.MODULE) is QatConvReLU
    _, loaded, text = round_trip("equant", "toml")
    assert 'qat_module = "equant_like.qat.conv.ConvReLU"' in text
    assert any(c.qat_module is QatConvReLU for c in loaded.configs)


def test_extends_is_recovered_for_native_plus_changes() -> None:
    bc, loaded, text = round_trip("equant", "yaml", base="auto")
    assert closest_builtin(bc) == "native"
    assert "extends: native" in text
    assert "remove:\n  - nn.Hardswish\n  - F.hardswish\n" in text
    assert text.count("- pattern:") == 4  # one replaced fuser, three added patterns
    assert diff(bc, loaded) == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_extends_round_trips_additions_removals_changes_and_moves(fmt: str) -> None:
    native = builtin_backend_config("native")
    configs = list(native.configs)
    moved = configs.pop(3)
    del configs[10:13]
    configs[5].set_observation_type(
        torch.ao.quantization.backend_config.ObservationType.OUTPUT_SHARE_OBSERVER_WITH_INPUT
    )
    configs += [moved, BackendPatternConfig(nn.Tanhshrink)]
    bc = BackendConfig("mine").set_backend_pattern_configs(configs)
    for base in ("native", "fbgemm"):
        text = dump(bc, format=fmt, base=base)
        assert "extends" in text
        assert diff(bc, backend_spec.loads(text, format=fmt)) == []


def test_flat_configs_are_not_given_a_base() -> None:
    assert closest_builtin(config("coreml")) is None
    assert closest_builtin(config("openvino")) is None


def test_builtins_export_as_version_1_and_v2_keys_need_version_2() -> None:
    assert build_document(builtin_backend_config("x86")).spec_version == 1
    text = (
        "name: x\npatterns:\n  - pattern: [nn.BatchNorm1d, nn.Linear]\n"
        "    fuser_method: {reverse2: fuse_linear_bn}\n"
    )
    with pytest.raises(backend_spec.SpecError) as info:
        backend_spec.loads(text)
    (diag,) = info.value.diagnostics
    assert (diag.code, diag.line, diag.hint) == ("BS206", 4, "set spec_version: 2")
    assert backend_spec.loads("spec_version: 2\n" + text).configs[0].fuser_method is not None


def test_factories_outside_the_allowed_roots_are_never_called() -> None:
    spec = (
        "spec_version: 2\nname: x\npatterns:\n  - pattern: [nn.Linear, nn.ReLU]\n"
        "    fuser_method: {call: %s, args: [nni.LinearReLU]}\n"
    )
    for factory, code in (
        ("torch.save", "BS306"),  # inside torch, but untrusted: not a fuser-module function
        ("torch.nn.Linear", "BS303"),  # a class is not a factory function
        ("thirdparty_configs.coreml_like.get_fuser_method", "BS302"),  # not allowed
    ):
        with pytest.raises(backend_spec.SpecError) as info:
            backend_spec.loads(spec % factory)
        assert [d.code for d in info.value.diagnostics] == [code]


def test_a_failing_factory_call_is_a_diagnostic() -> None:
    spec = (
        "spec_version: 2\nname: x\npatterns:\n  - pattern: [nn.Linear, nn.ReLU]\n"
        "    fuser_method: {call: thirdparty_configs.coreml_like.get_root_node_getter, "
        "args: [1, 2, 3]}\n"
    )
    with pytest.raises(backend_spec.SpecError) as info:
        backend_spec.loads(spec, allow_imports=["thirdparty_configs"])
    (diag,) = info.value.diagnostics
    assert diag.code == "BS305" and "TypeError" in diag.message


@pytest.mark.parametrize(
    ("attr", "code", "words"),
    [
        ("get_flip_flop_config", "BS913", "returns another function"),
        ("get_counting_config", "BS910", "local function"),
    ],
)
def test_unfaithful_factories_are_refused_clearly(attr: str, code: str, words: str) -> None:
    from thirdparty_configs import unfaithful

    with pytest.raises(backend_spec.SpecError) as info:
        dump(getattr(unfaithful, attr)())
    (diag,) = info.value.diagnostics
    assert diag.code == code and words in diag.message
    assert "pattern (nn.Conv2d, nn.ReLU)" in diag.message


def test_a_bare_dtype_config_is_a_warning_naming_the_pattern_and_torchs_failure() -> None:
    with pytest.warns(ExportWarning) as record:
        text = dump(config("mqbench"))
    (warning,) = record
    message = str(warning.message)
    assert "BS912" in message and "pattern nn.Linear" in message and "not iterable" in message
    assert message.startswith("<mqbench_like>: ")  # the config's name, not ':0:0'
    assert len(backend_spec.loads(text).configs[0].dtype_configs) == 1


def test_a_dtype_configs_value_of_unknown_type_is_an_error_not_a_traceback() -> None:
    from thirdparty_configs import mqbench_like

    with pytest.raises(backend_spec.SpecError) as info:
        dump(mqbench_like.get_broken_config())
    (diag,) = info.value.diagnostics
    assert diag.code == "BS911" and "is a str" in diag.message and "pattern nn.ReLU" in diag.message


def test_complex_format_patterns_are_labelled_in_messages() -> None:
    bc = BackendConfig("c").set_backend_pattern_config(
        BackendPatternConfig()
        ._set_pattern_complex_format((nn.ReLU, nn.Conv2d))
        .set_fuser_method(lambda q, a, b: a)
    )
    with pytest.raises(backend_spec.SpecError) as info:
        dump(bc)
    assert "of pattern (nn.ReLU, nn.Conv2d) (complex format)" in info.value.diagnostics[0].message


@pytest.mark.parametrize(
    ("ref", "name"),
    [
        ("pkg.coreml_like:get_backend_config", "coreml_like"),
        ("pkg.mod:get_fast_config", "fast"),
        ("path/to/tests.py:make_config", "make"),
        ("path/to/openvino.py:get_config", "openvino"),
    ],
)
def test_names_derived_from_references(ref: str, name: str) -> None:
    assert name_from_ref(ref) == name


def test_cli_export_names_unnamed_configs_and_groups_refusals(tmp_path: Path) -> None:
    runner = CliRunner()
    ref = "thirdparty_configs.coreml_like:get_backend_config"
    result = runner.invoke(app, ["export", ref])
    assert result.exit_code == 0, result.output
    assert "note:" in result.stderr and "'coreml_like'" in result.stderr
    assert "name: coreml_like" in result.stdout
    assert "load it with --allow-import thirdparty_configs" in result.stderr
    named = runner.invoke(app, ["export", ref, "--name", "coreml", "-o", str(tmp_path / "c.toml")])
    assert named.exit_code == 0, named.output
    assert 'name = "coreml"' in (tmp_path / "c.toml").read_text()

    bad = tmp_path / "bad.py"
    bad.write_text(
        "import torch.nn as nn\n"
        "from torch.ao.quantization.backend_config import BackendConfig, BackendPatternConfig\n"
        "def get_config():\n"
        "    def local(is_qat, a, b):\n"
        "        return a\n"
        "    acts = [nn.ReLU, nn.ReLU6, nn.Tanh, nn.Sigmoid, nn.GELU, nn.SiLU]\n"
        "    return BackendConfig('bad').set_backend_pattern_configs(\n"
        "        [BackendPatternConfig((nn.Conv2d, a)).set_fuser_method(local) for a in acts])\n"
    )
    refused = runner.invoke(app, ["export", f"{bad}:get_config"])
    assert refused.exit_code == 1
    assert refused.stderr.count("BS910") == 1  # one line for the cause, with its count
    assert "BS910 (6 patterns)" in refused.stderr and "and 3 more" in refused.stderr
    assert "<bad>: " in refused.stderr and ":0:0" not in refused.stderr
    assert "Traceback" not in refused.output


def test_cli_export_base_options() -> None:
    runner = CliRunner()
    ref = "equant_like.config:get_config"
    auto = runner.invoke(app, ["export", ref])
    assert "extends: native" in auto.stdout
    flat = runner.invoke(app, ["export", ref, "--base", "none"])
    assert "extends" not in flat.stdout and flat.stdout.count("- pattern:") > 100
    forced = runner.invoke(app, ["export", ref, "--base", "x86"])
    assert "extends: x86" in forced.stdout
    assert runner.invoke(app, ["export", ref, "--base", "nope"]).exit_code == 2
    builtin = runner.invoke(app, ["export", "native"])
    assert "extends" not in builtin.stdout


@pytest.mark.parametrize("case", ["coreml", "openvino", "torch_test"])
def test_exported_third_party_specs_lint_without_rule_crashes(case: str, tmp_path: Path) -> None:
    from backend_spec.lint.session import lint_files

    _, _, text = round_trip(case, "yaml")
    spec = tmp_path / f"{case}.yaml"
    spec.write_text(text)
    report = lint_files([spec], allow_imports=[CASES[case][2]])
    codes = [d.code for d in report.diagnostics]
    assert "BS599" not in codes and not any(c.startswith(("BS2", "BS3")) for c in codes)


def _outcome(bc: BackendConfig, model: str, reference: bool) -> Any:
    """What prepare/convert make of a zoo model with ``bc``: code, modules and output, or
    the error torch raised (a config that fails must fail the same way after the trip)."""
    from test_equivalence import quantize

    from backend_spec.analysis.qconfigs import qconfig_mapping

    try:
        return quantize(bc, model, qconfig_mapping(bc), reference)
    except Exception as exc:  # noqa: BLE001 - the outcome under comparison
        return (type(exc).__name__, str(exc))


#: Zoo models that exercise the fixtures' fusions (conv, batch norm, activations, linear).
ZOO_MODELS = ("conv1d_bn_relu", "conv2d_bn_relu", "functional_conv", "mlp")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "fmt"),
    [("coreml", "toml"), ("openvino", "yaml"), ("equant", "yaml"), ("torch_test", "toml")],
)
def test_third_party_specs_quantize_the_zoo_like_the_original(case: str, fmt: str) -> None:
    from test_equivalence import assert_same_outputs

    bc, loaded, _ = round_trip(case, fmt, base="auto")
    quantized = 0
    for model in ZOO_MODELS:
        for reference in (True, False):
            expected, got = _outcome(bc, model, reference), _outcome(loaded, model, reference)
            if isinstance(expected, tuple):
                assert got == expected
                continue
            assert got["code"] == expected["code"], (model, reference)
            assert got["modules"] == expected["modules"], (model, reference)
            assert_same_outputs(got["output"], expected["output"])
            quantized += "quantize_per_tensor" in expected["code"]
    assert quantized > 0  # not vacuous: the config really quantizes some zoo models


@pytest.mark.parametrize("case", ["coreml", "openvino", "equant"])
def test_exported_third_party_specs_validate_against_the_json_schema(case: str) -> None:
    import json

    import jsonschema
    from ruamel.yaml import YAML

    from backend_spec.specfile.schema import schema_text

    validator = jsonschema.Draft202012Validator(json.loads(schema_text()))  # the shipped one
    _, _, text = round_trip(case, "yaml", base="auto")
    assert [e.message for e in validator.iter_errors(YAML(typ="safe").load(text))] == []


def test_show_and_diff_label_complex_format_patterns(tmp_path: Path) -> None:
    _, _, text = round_trip("torch_test", "yaml")
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(text)
    b.write_text(text.replace("MatchAllNode, nn.Conv2d", "MatchAllNode, nn.Conv1d"))
    runner = CliRunner()
    allow = ["--allow-import", "thirdparty_configs"]
    result = runner.invoke(app, ["diff", str(a), str(b), *allow])
    assert "- (nn.ReLU, (operator.add, MatchAllNode, nn.Conv2d)) (complex format)" in result.stdout
    shown = runner.invoke(app, ["show", str(a), *allow], env={"COLUMNS": "200"})
    assert "(complex format)" in shown.stdout


def test_a_module_field_that_is_not_a_module_class_is_refused() -> None:
    bc = BackendConfig("m").set_backend_pattern_config(
        BackendPatternConfig(nn.Linear).set_root_module(torch.nn.functional.linear)
    )
    with pytest.raises(backend_spec.SpecError) as info:
        dump(bc)
    (diag,) = info.value.diagnostics
    assert diag.code == "BS911" and "root_module of pattern nn.Linear" in diag.message
    assert "not an nn.Module subclass" in diag.message


def test_malformed_mappings_and_unforeseen_values_are_diagnostics_not_tracebacks() -> None:
    bad_map = BackendPatternConfig(nn.Linear)._set_num_tensor_args_to_observation_type({1: "x"})
    bad_index = BackendPatternConfig(nn.Conv2d)._set_input_type_to_index({"weight": "1"})
    strange = BackendPatternConfig(nn.ReLU)
    strange.pattern = object()  # no check foresees this
    bc = BackendConfig("m").set_backend_pattern_configs([bad_map, bad_index])
    bc._pattern_complex_format_to_config[nn.ReLU] = strange
    with pytest.raises(backend_spec.SpecError) as info:
        dump(bc)
    found = {(d.code, d.key_path[-1]) for d in info.value.diagnostics}
    assert ("BS911", "num_tensor_args_to_observation_type") in found
    assert ("BS911", "input_type_to_index") in found
    assert any(code in ("BS900", "BS910") for code, _ in found)


def test_a_module_level_callable_object_is_named_by_the_attribute_holding_it() -> None:
    from thirdparty_configs import torch_test_like

    text = dump(torch_test_like.get_callable_object_config())
    assert "fuser_method: thirdparty_configs.torch_test_like.fuse_linear_relu_tagged" in text
    loaded = backend_spec.loads(text, allow_imports=["thirdparty_configs"])
    assert loaded.configs[0].fuser_method is torch_test_like.fuse_linear_relu_tagged
