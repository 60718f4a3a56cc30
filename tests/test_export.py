"""The exporter: names that resolve back, deterministic text, parseable YAML/TOML, clear errors."""

from __future__ import annotations

import functools
import io
import operator
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

import backend_spec
from backend_spec._torch import (
    BackendConfig,
    BackendPatternConfig,
    DTypeConfig,
    DTypeWithConstraints,
    ObservationType,
    torch,
)
from backend_spec.compiler.backends import load_backend
from backend_spec.export import build_document, dump
from backend_spec.export.dtypes import DTypeConfigTable, derived_name
from backend_spec.names.naming import object_name, op_name
from backend_spec.names.resolver import Resolver
from backend_spec.names.vocabulary import (
    ALIASES,
    BARE_FUNCTION_MODULES,
    BUILTIN_BACKENDS,
    METHOD_PREFIX,
    SPECIAL_NAMES,
)
from backend_spec.specfile.schema import COPIES, SCHEMA_NAME, schema_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

nn = torch.nn
F = torch.nn.functional
nni = torch.ao.nn.intrinsic
SPECS = Path(__file__).resolve().parent.parent / "specs"
BUILTINS = list(BUILTIN_BACKENDS)
#: Where the repository's specs point editors (``make specs``): the top-level schema.
REPO_SCHEMA_REF = f"../{COPIES[1].as_posix()}"


@functools.cache
def builtin(name: str) -> BackendConfig:
    return load_backend(name)


@functools.cache
def builtin_text(name: str, fmt: str = "yaml") -> str:
    return dump(builtin(name), format=fmt, schema_ref=REPO_SCHEMA_REF)


def walk_resolve(name: str) -> Any:
    """An independent, minimal resolver: aliases, special and bare names, then ``getattr``."""
    if name.startswith(METHOD_PREFIX):
        return name[len(METHOD_PREFIX) :]
    if name in SPECIAL_NAMES:
        name = SPECIAL_NAMES[name]
    elif "." not in name:
        for module_name in BARE_FUNCTION_MODULES:
            namespace = vars(sys.modules[module_name])
            if name in namespace:
                return namespace[name]
        raise LookupError(name)
    head, _, rest = name.partition(".")
    obj = sys.modules[ALIASES.get(head, head)]
    for part in rest.split("."):
        obj = getattr(obj, part)
    return obj


def spec_objects(bc: BackendConfig) -> list[tuple[str, Any]]:
    """(name written by the exporter, object it stands for) for every object in ``bc``."""
    from backend_spec.names.fusers import sequential_class

    pairs: list[tuple[str, Any]] = []
    docs = build_document(bc).patterns
    for config, doc in zip(bc.configs, docs, strict=True):
        if "pattern" in doc:
            ops = config.pattern if isinstance(config.pattern, tuple) else (config.pattern,)
            names = doc["pattern"] if isinstance(doc["pattern"], list) else [doc["pattern"]]
            pairs += zip(names, ops, strict=True)
        else:
            pairs += zip(
                _flatten(doc["pattern_complex_format"]),
                _flatten(config._pattern_complex_format),
                strict=True,
            )
        for key in ("root_module", "qat_module", "reference_quantized_module", "fused_module"):
            if key in doc:
                pairs.append((doc[key], getattr(config, key)))
        for key, attr in (
            ("root_node_getter", "_root_node_getter"),
            ("extra_inputs_getter", "_extra_inputs_getter"),
        ):
            if key in doc:
                pairs.append((doc[key], getattr(config, attr)))
        fuser = doc.get("fuser_method")
        if isinstance(fuser, dict):
            pairs.append((fuser["sequential"], sequential_class(config.fuser_method)))
        elif fuser is not None:
            pairs.append((fuser, config.fuser_method))
    return pairs


def _flatten(pattern: Any) -> list[Any]:
    if isinstance(pattern, (list, tuple)):
        return [leaf for p in pattern for leaf in _flatten(p)]
    return [pattern]


# -- names ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", BUILTINS)
def test_every_exported_name_resolves_back_to_the_identical_object(name: str) -> None:
    resolver = Resolver()
    pairs = spec_objects(builtin(name))
    assert pairs
    for spec_name, obj in pairs:
        assert walk_resolve(spec_name) is obj or walk_resolve(spec_name) == obj, spec_name
        looked_up = resolver.lookup(spec_name)
        assert looked_up is obj or (isinstance(obj, str) and looked_up == obj), spec_name


def test_object_names_prefer_short_aliases() -> None:
    from torch.ao.quantization.fuser_method_mappings import fuse_conv_bn
    from torch.ao.quantization.utils import MatchAllNode

    assert object_name(nn.Conv2d) == "nn.Conv2d"
    assert object_name(F.relu) == "F.relu"
    assert object_name(torch.add) == "torch.add"
    assert object_name(operator.add) == "operator.add"
    assert object_name(nni.ConvReLU2d) == "nni.ConvReLU2d"
    assert object_name(torch.ao.nn.intrinsic.qat.ConvReLU2d) == "nniqat.ConvReLU2d"
    assert object_name(torch.ao.nn.quantized.reference.Linear) == "nnqr.Linear"
    assert object_name(MatchAllNode) == "MatchAllNode"
    assert object_name(fuse_conv_bn) == "fuse_conv_bn"
    assert op_name("view") == "method:view"


@pytest.mark.parametrize(
    "attr",
    ["max_pool1d", "max_pool2d", "max_pool3d", "adaptive_max_pool2d", "fractional_max_pool2d"],
)
def test_boolean_dispatch_functions_are_named_by_their_attribute(attr: str) -> None:
    fn = getattr(F, attr)
    assert "<locals>" in fn.__qualname__  # boolean_dispatch.<locals>.fn: no importable path
    assert object_name(fn) == f"F.{attr}"


def test_bare_name_only_when_bare_lookup_finds_the_same_function() -> None:
    from torch.ao.quantization.backend_config import onednn

    getter = onednn._conv_add_root_node_getter_left
    assert object_name(getter) == "_conv_add_root_node_getter_left"
    assert Resolver().lookup("_conv_add_root_node_getter_left") is getter


def test_module_function_outside_torch_gets_its_qualified_name() -> None:
    assert object_name(walk_resolve) == f"{__name__}.walk_resolve"


def test_dtype_names() -> None:
    from backend_spec.names.dtypes import dtype_name

    assert dtype_name(torch.float32) == "float"
    assert dtype_name(torch.float16) == "float16"
    assert dtype_name(torch.quint4x2) == "quint4x2"
    assert dtype_name(torch.qint32) == "qint32"


# -- unnameable callables ---------------------------------------------------------------------


def _local_fuser(is_qat: bool, a: Any, b: Any) -> Any:  # a module-level function: nameable
    return a


def test_lambda_fuser_is_a_spec_error_naming_pattern_and_field() -> None:
    bc = BackendConfig("b").set_backend_pattern_config(
        BackendPatternConfig((nn.Linear, nn.ReLU)).set_fuser_method(lambda q, a, b: a)
    )
    with pytest.raises(backend_spec.SpecError) as info:
        dump(bc)
    (diag,) = info.value.diagnostics
    assert diag.code == "BS910"
    assert "patterns[0].fuser_method" in diag.message
    assert "(nn.Linear, nn.ReLU)" in diag.message
    assert "<lambda>" in diag.message
    assert " at 0x" not in diag.message
    assert diag.key_path == ("patterns", 0, "fuser_method")


class _Fusers:
    def fuse(self, is_qat: bool, a: Any, b: Any) -> Any:
        return a


def test_bound_method_fuser_is_named_as_bound_to_an_instance() -> None:
    # its __qualname__ is the function's (test_export._Fusers.fuse), which reads as if it
    # were importable: the message says what cannot be named, the instance
    bc = BackendConfig("b").set_backend_pattern_config(
        BackendPatternConfig((nn.Linear, nn.ReLU)).set_fuser_method(_Fusers().fuse)
    )
    with pytest.raises(backend_spec.SpecError) as info:
        dump(bc)
    (diag,) = info.value.diagnostics
    assert diag.code == "BS910"
    assert "method fuse bound to an instance of test_export._Fusers" in diag.message
    assert "staticmethod or a classmethod" in diag.hint


def test_every_unnameable_object_is_reported_at_once() -> None:
    def local_getter(pattern: Any) -> Any:
        return pattern

    class LocalModule(nn.Module):
        pass

    bc = (
        BackendConfig("b")
        .set_backend_pattern_config(BackendPatternConfig(nn.Conv2d).set_fuser_method(_local_fuser))
        .set_backend_pattern_config(
            BackendPatternConfig()
            ._set_pattern_complex_format((operator.add, nn.Conv2d, LocalModule))
            ._set_root_node_getter(local_getter)
        )
    )
    with pytest.raises(backend_spec.SpecError) as info:
        dump(bc, format="toml")
    messages = [d.message for d in info.value.diagnostics]
    assert len(messages) == 2, messages
    assert "patterns[1].pattern_complex_format" in messages[0]
    assert "LocalModule" in messages[0]
    assert "patterns[1].root_node_getter" in messages[1]
    assert "local_getter" in messages[1]


def test_constraints_without_a_dtype_are_a_spec_error() -> None:
    odd = DTypeConfig(input_dtype=DTypeWithConstraints(dtype=None, quant_min_lower_bound=0))
    bc = BackendConfig("b").set_backend_pattern_config(
        BackendPatternConfig(nn.Linear).set_dtype_configs([odd])
    )
    with pytest.raises(backend_spec.SpecError) as info:
        dump(bc)
    (diag,) = info.value.diagnostics
    assert diag.code == "BS911"
    assert "patterns[0].dtype_configs of pattern nn.Linear" in diag.message
    assert "without a dtype" in diag.message


def test_a_nameless_backend_config_gets_a_name_and_a_warning() -> None:
    from backend_spec.export import ExportWarning

    with pytest.warns(ExportWarning, match="has no name"):
        text = dump(BackendConfig())
    assert backend_spec.loads(text).name == "unnamed_backend"
    assert backend_spec.loads(dump(BackendConfig(), name="given")).name == "given"


@pytest.mark.parametrize("name", ["a  b " * 40 + "  ", "x # y: z", "true", "123", "null", "- a"])
@pytest.mark.parametrize("fmt", ["yaml", "toml"])
def test_awkward_backend_names_load_back(name: str, fmt: str) -> None:
    assert backend_spec.loads(dump(BackendConfig(name), format=fmt), format=fmt).name == name


def test_unknown_format_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="json"):
        dump(BackendConfig("x"), format="json")


# -- dtype configs ------------------------------------------------------------------------------


def test_dtype_configs_get_torch_names() -> None:
    assert list(build_document(builtin("native")).dtype_configs) == [
        "weighted_op_quint8",
        "default_dynamic_int8",
        "default_dynamic_float16",
        "default_op_quint8",
        "default_op_quint8_fixed_qparams_0to1",
        "default_op_quint8_fixed_qparams_neg1to1",
        "input_output_only_quint8",
        "weight_only_quint8",
        "weight_only_quint4x2",
    ]
    assert set(build_document(builtin("executorch")).dtype_configs) >= {
        "qnnpack_weighted_op_qint8_symmetric",
        "executorch_default_dynamic_qint8",
    }
    assert set(build_document(builtin("tensorrt")).dtype_configs) == {
        "weighted_op_qint8",
        "non_weighted_op_qint8",
    }
    assert "weighted_op_quint8_fixed_qparams_0to1" in build_document(builtin("x86")).dtype_configs
    assert "onednn_weight_only_qint8" in build_document(builtin("onednn")).dtype_configs


def test_unknown_dtype_configs_get_unique_derived_names() -> None:
    from backend_spec.ir.lift import lift_dtype_config

    def name_of(dc: DTypeConfig) -> str:  # the table names dtype configs of the IR
        return table.name_of(lift_dtype_config(dc))

    table = DTypeConfigTable()
    plain = DTypeConfig(torch.qint8, torch.float, torch.qint8, is_dynamic=False)
    constrained = DTypeConfig(DTypeWithConstraints(torch.qint8, quant_min_lower_bound=-100))
    other = DTypeConfig(DTypeWithConstraints(torch.qint8, quant_min_lower_bound=-50))
    assert name_of(plain) == "in_qint8_out_float_w_qint8_static"
    assert name_of(constrained) == "in_qint8_constrained"
    assert name_of(other) == "in_qint8_qmin_m50"  # told apart by its constraint
    assert name_of(DTypeConfig(torch.qint8, torch.float, torch.qint8, is_dynamic=False)) == (
        "in_qint8_out_float_w_qint8_static"
    )
    assert derived_name({}) == "unconstrained"


def test_identical_dtype_configs_are_hoisted_once() -> None:
    doc = build_document(builtin("fbgemm"))
    names = [n for p in doc.patterns for n in p.get("dtype_configs", [])]
    assert set(names) == set(doc.dtype_configs)
    assert len(doc.dtype_configs) < 12 < len(names)


# -- text ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", BUILTINS)
def test_yaml_and_toml_parse_to_the_same_document(name: str) -> None:
    expected = build_document(builtin(name)).to_dict()
    yaml_text = builtin_text(name, "yaml")
    assert yaml_text.startswith(
        f"# yaml-language-server: $schema={REPO_SCHEMA_REF}\nspec_version: 1\n"
    )
    assert YAML(typ="safe").load(yaml_text) == expected  # libyaml-based parser
    assert YAML(typ="safe", pure=True).load(yaml_text) == expected
    toml_doc = tomllib.loads(builtin_text(name, "toml"))
    # TOML keys are strings: num_tensor_args_to_observation_type's 0/1/2 come back as "0"...
    for entry in expected["patterns"]:
        if "num_tensor_args_to_observation_type" in entry:
            entry["num_tensor_args_to_observation_type"] = {
                str(k): v for k, v in entry["num_tensor_args_to_observation_type"].items()
            }
    assert toml_doc == expected


def test_yaml_layout() -> None:
    text = builtin_text("native")
    assert "  - pattern: [nn.Conv2d, nn.ReLU]\n" in text
    assert "    fuser_method: {sequential: nni.ConvReLU2d}\n" in text
    assert "  - pattern: method:view\n" in text  # plain in block context
    assert "    input_type_to_index: {weight: 1, bias: 2}\n" in text
    assert "\n  # Convolution\n" in text and "\n  # Binary ops\n" in text
    assert "observation_type: output_use_different_observer_as_input" not in text
    assert "observation_type: output_share_observer_with_input" in text
    assert all(line == line.rstrip() for line in text.splitlines())
    onednn = builtin_text("onednn")
    assert (
        "  - pattern_complex_format: [nn.ReLU, [torch.add, [nn.BatchNorm2d, nn.Conv2d], "
        "MatchAllNode]]\n" in onednn
    )


def test_toml_layout() -> None:
    text = builtin_text("native", "toml")
    assert '\n[dtype_configs.weighted_op_quint8]\ninput_dtype = "quint8"\n' in text
    assert '\n[[patterns]]\npattern = ["nn.Conv2d", "nn.ReLU"]\n' in text
    assert 'fuser_method = { sequential = "nni.ConvReLU2d" }' in text


def test_toml_strings_are_escaped() -> None:
    weird = 'we"ird\\name\n\t\x01é'
    text = dump(BackendConfig(weird), format="toml")
    assert tomllib.loads(text) == {"spec_version": 1, "name": weird, "patterns": []}
    yaml_doc = YAML(typ="safe").load(dump(BackendConfig(weird), format="yaml"))
    assert yaml_doc["name"] == weird


EXACT_FLOATS = [2**-12, 1.0 / 256.0, 0.1, 1e-05, 1e300, 5e-324, 123456789.123, -0.0, 255.0]


@pytest.mark.parametrize("fmt", ["yaml", "toml"])
def test_floats_and_ints_round_trip_exactly(fmt: str) -> None:
    configs = [
        DTypeConfig(
            DTypeWithConstraints(torch.quint8, scale_min_lower_bound=x, quant_max_upper_bound=7)
        )
        for x in EXACT_FLOATS
    ]
    bc = BackendConfig("floats").set_backend_pattern_config(
        BackendPatternConfig(nn.Linear).set_dtype_configs(configs)
    )
    text = dump(bc, format=fmt)
    doc = tomllib.loads(text) if fmt == "toml" else YAML(typ="safe").load(text)
    values = [d["input_dtype"]["scale_min_lower_bound"] for d in doc["dtype_configs"].values()]
    assert [repr(v) for v in values] == [repr(x) for x in EXACT_FLOATS]
    bounds = [d["input_dtype"]["quant_max_upper_bound"] for d in doc["dtype_configs"].values()]
    assert all(type(b) is int for b in bounds)


def test_yaml_floats_are_floats_for_yaml_1_1_parsers_too() -> None:
    from backend_spec.export.emit_yaml import float_text

    assert float_text(1e-05) == "1.0e-05"
    assert float_text(1e300) == "1.0e+300"
    assert float_text(2**-12) == "0.000244140625"
    assert float_text(float("inf")) == ".inf"


def test_dump_is_deterministic_within_a_process() -> None:
    for fmt in ("yaml", "toml"):
        assert dump(load_backend("onednn"), format=fmt) == dump(load_backend("onednn"), format=fmt)


@pytest.mark.slow
def test_dump_is_byte_identical_across_processes() -> None:
    script = (
        "import sys, backend_spec, backend_spec.compiler.backends as b; "
        "sys.stdout.write(backend_spec.dump(b.load_backend('x86')))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout == dump(builtin("x86"))


def test_observation_types_and_optional_fields() -> None:
    bc = BackendConfig("b").set_backend_pattern_config(
        BackendPatternConfig(torch.cat)
        .set_observation_type(ObservationType.INPUT_OUTPUT_NOT_OBSERVED)
        ._set_num_tensor_args_to_observation_type(
            {1: ObservationType.OUTPUT_SHARE_OBSERVER_WITH_INPUT}
        )
    )
    (entry,) = build_document(bc).patterns
    assert entry == {
        "pattern": "torch.cat",
        "observation_type": "input_output_not_observed",
        "num_tensor_args_to_observation_type": {1: "output_share_observer_with_input"},
    }


def test_python_m_entry_point_writes_a_file(tmp_path: Path) -> None:
    out = tmp_path / "t.toml"
    ok = subprocess.run(
        [sys.executable, "-m", "backend_spec", "export", "tensorrt", "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stderr
    assert out.read_text() == dump(builtin("tensorrt"), format="toml")
    assert out.read_text().startswith(f"#:schema {SCHEMA_NAME}\n")
    assert (tmp_path / SCHEMA_NAME).read_text() == schema_text()  # the reference resolves
    bad = subprocess.run(
        [sys.executable, "-m", "backend_spec", "export", "nope"], capture_output=True, text=True
    )
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr


# -- checked-in specs ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", BUILTINS)
def test_checked_in_spec_equals_a_fresh_dump(name: str) -> None:
    path = SPECS / f"{name}.yaml"
    assert path.read_text(encoding="utf-8") == builtin_text(name), (
        f"{path} is stale for torch {torch.__version__}: run `make specs`"
    )


def test_yaml_text_is_loadable_by_ruamel_round_trip_loader() -> None:
    data = YAML().load(io.StringIO(builtin_text("executorch")))
    assert data["name"] == "executorch"
