"""The intermediate form (backend_spec.ir): what the loader produces, read without torch's
classes, frozen, and keyed by the field table."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.ao.nn import intrinsic as nni

import backend_spec
from backend_spec.compiler.loader import builtin_compiled, compile_file
from backend_spec.ir import DTypeMapping, Entry, Origin
from backend_spec.ir.lower import backend_of
from backend_spec.names.vocabulary import BUILTIN_BACKENDS
from backend_spec.specfile.fields import DTYPE_MAPPING_FIELDS, PATTERN_FIELDS

SPEC = """\
spec_version: 2
name: v2
dtype_configs:
  w:
    input_dtype: {dtype: quint8, observer: moving_average_minmax}
    output_dtype: quint8
    weight_dtype: {dtype: qint8, granularity: per_channel, ch_axis: 0}
patterns:
  - pattern: [nn.Conv2d, nn.ReLU]
    dtype_configs: [w]
    fused_module: nni.ConvReLU2d
    fuser_method: {sequential: nni.ConvReLU2d}
  - pattern: nn.MaxPool2d
    observation_type: output_share_observer_with_input
    dtype_configs: [{input_dtype: quint8, output_dtype: quint8}]
    quantize: if_input_quantized
    aten: [[[aten.max_pool2d.default, aten.max_pool2d_with_indices.default]]]
"""


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory):
    path = Path(tmp_path_factory.mktemp("ir")) / "v2.yaml"
    path.write_text(SPEC, encoding="utf-8")
    return compile_file(path).backend, str(path)


def test_entries_keep_origin_key_ops_and_fields(backend) -> None:
    ir, path = backend
    conv, pool = ir.entries
    assert conv.origin == Origin(path, 9) and pool.origin == Origin(path, 13)
    assert conv.key == (nn.ReLU, nn.Conv2d) and ir.entry(conv.key) is conv
    assert conv.ops == (nn.Conv2d, nn.ReLU) and pool.ops == (nn.MaxPool2d,)
    assert conv.get("fused_module") is nni.ConvReLU2d
    fuser = conv.get("fuser_method")
    assert (fuser.form, fuser.captured) == ("sequential", nni.ConvReLU2d)


def test_dtype_configs_carry_every_version_2_option_and_their_name(backend) -> None:
    ir, _ = backend
    conv, pool = ir.entries
    (named,) = conv.dtype_configs
    assert named.name == "w" and pool.dtype_configs[0].name is None
    assert named.mapping("input_dtype") == DTypeMapping(
        torch.quint8, (("observer", "moving_average_minmax"),)
    )
    assert named.mapping("weight_dtype").observer == {"granularity": "per_channel", "ch_axis": 0}
    assert named.mapping("output_dtype").observer == {}


def test_pt2e_chains_and_policy_are_data_of_the_entry(backend) -> None:
    ir, _ = backend
    conv, pool = ir.entries
    assert pool.aten == (((("aten.max_pool2d.default", "aten.max_pool2d_with_indices.default")),),)
    assert dict(pool.policy) == {"quantize": "if_input_quantized"}
    assert conv.aten == () and conv.policy == ()
    assert pool.pt2e_options()["quantize"] == "if_input_quantized"


def test_a_built_in_lifts_with_its_origin_and_no_version_2_facts() -> None:
    ir = builtin_compiled("x86").backend
    assert {e.origin for e in ir} == {Origin("torch:x86")}
    assert not any(e.aten or e.policy for e in ir)
    assert all(m.observer == {} for e in ir for dc in e.dtype_configs for _, m in dc.mappings)


def test_the_form_is_frozen(backend) -> None:
    ir, _ = backend
    with pytest.raises(dataclasses.FrozenInstanceError):
        ir.entries[0].key = None  # type: ignore[misc]


@pytest.mark.parametrize("key", [f.key for f in PATTERN_FIELDS])
def test_an_entry_takes_every_key_of_the_field_table(key: str) -> None:
    assert Entry(None, Origin("x"), ((key, 1),)).get(key) == 1


@pytest.mark.parametrize("key", DTYPE_MAPPING_FIELDS)
def test_a_dtype_mapping_takes_every_key_of_the_field_table(key: str) -> None:
    assert DTypeMapping(torch.qint8, ((key, 1),)).get(key) == 1


@pytest.mark.parametrize(
    "make",
    [
        lambda: Entry(None, Origin("x"), (("patern", nn.ReLU),)),
        lambda: DTypeMapping(torch.qint8, (("obsever", "minmax"),)),
        lambda: Entry(None, Origin("x"), (), policy=(("aten", "x"),)),
    ],
)
def test_a_key_outside_the_field_table_is_refused(make) -> None:
    with pytest.raises(ValueError, match="fields.py"):
        make()


def test_function_references_compare_by_shape_or_identity() -> None:
    from backend_spec.ir import FunctionRef
    from backend_spec.names.fusers import sequential_fuser

    fresh = [FunctionRef.of(sequential_fuser(nni.ConvReLU2d, 2)) for _ in range(2)]
    assert fresh[0] == fresh[1] and hash(fresh[0]) == hash(fresh[1])
    assert fresh[0] != FunctionRef.of(sequential_fuser(nni.LinearReLU, 2))
    assert FunctionRef(print) == FunctionRef(print) != FunctionRef(len)


def test_the_backend_answers_what_it_quantizes_and_which_roots_convert_swaps(backend) -> None:
    ir, _ = backend
    assert ir.quantized_ops == {nn.MaxPool2d}  # the conv entry is a fusion (a tuple pattern)
    assert ir.reference_roots == frozenset()  # no entry names a reference module
    x86 = builtin_compiled("x86").backend
    assert nn.Linear in x86.reference_roots and nn.Linear in x86.quantized_ops


def test_no_bespec_fact_rides_on_a_torch_object() -> None:
    """A version 2 spec lowers to plain torch objects: torch's classes with torch's attributes
    only; the facts are in the intermediate form the returned config keeps."""
    from backend_spec._torch import BackendPatternConfig, DTypeConfig, DTypeWithConstraints

    bc = backend_spec.loads(SPEC)
    fresh = set(vars(BackendPatternConfig()))
    for config in bc.configs:
        assert type(config) is BackendPatternConfig and set(vars(config)) <= fresh
        for dc in config.dtype_configs:
            assert type(dc) is DTypeConfig
            for key in ("input", "output", "weight"):
                assert type(getattr(dc, f"{key}_dtype_with_constraints")) is DTypeWithConstraints
    conv, pool = backend_of(bc).entries
    assert pool.aten and conv.dtype_configs[0].mapping("input_dtype").observer


def test_no_module_subclasses_or_decorates_torch_objects() -> None:
    """Statically: only ir/lower.py subclasses a torch config class (the lowered config that
    holds its Backend), and no module sets an attribute of its own on a torch object."""
    import ast

    package = Path(__file__).resolve().parent.parent / "backend_spec"
    torch_classes = {"BackendConfig", "BackendPatternConfig", "DTypeConfig", "DTypeWithConstraints"}
    subclasses, setattrs = [], []
    for path in package.rglob("*.py"):
        where = path.relative_to(package).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = {ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases}
                if bases & torch_classes:
                    subclasses.append((where, node.name))
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "setattr":
                text = ast.unparse(node)
                if "bespec" in text:
                    setattrs.append(where)
    assert subclasses == [("ir/lower.py", "LoweredBackendConfig")]
    assert setattrs == []


def test_version_2_facts_survive_load_then_dump_and_load_then_quantizer_rules() -> None:
    """load() returns a BackendConfig that keeps its intermediate form, so the public API
    given it (dump, the pt2e rule table behind quantizer) still sees the version 2 keys."""
    from backend_spec.pt2e import compile_table

    bc = backend_spec.loads(SPEC)
    text = backend_spec.dump(bc)
    assert "observer: moving_average_minmax" in text and "granularity: per_channel" in text
    assert "aten.max_pool2d_with_indices.default" in text and "if_input_quantized" in text
    assert backend_spec.dump(backend_spec.loads(text)) == text
    table, _report = compile_table(bc)
    pool = next(r for r in table["rules"] if len(r["chain"][0]) == 2)  # the spec's aten chain
    assert pool["chain"] == [["aten.max_pool2d.default", "aten.max_pool2d_with_indices.default"]]
    assert pool["policy"] == {"quantize": "if_input_quantized"}


def test_a_pattern_set_through_torch_replaces_its_entry_and_shows_in_dump() -> None:
    """torch's own mutators on a loaded config: a new pattern is lifted (version 1 facts), one
    replacing an entry drops that entry's version 2 facts, the others keep theirs."""
    from backend_spec._torch import BackendPatternConfig, ObservationType

    bc = backend_spec.loads(SPEC)
    bc.set_backend_pattern_config(BackendPatternConfig(nn.Hardswish))
    bc.set_backend_pattern_configs([BackendPatternConfig(nn.MaxPool2d)]).set_name("edited")
    ir = backend_of(bc)
    assert ir.name == "edited" and [e.key for e in ir][-1] is nn.Hardswish
    conv, pool, hardswish = ir
    assert conv.dtype_configs[0].mapping("input_dtype").observer  # kept as lowered
    assert pool.aten == () and pool.get("observation_type") is (
        ObservationType.OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT
    )
    text = backend_spec.dump(bc)
    assert "name: edited" in text and "nn.Hardswish" in text
    assert "aten.max_pool2d" not in text and "moving_average_minmax" in text
    assert backend_of(bc) is ir  # unchanged since: the same form, not lifted again
    assert repr(bc).startswith("BackendConfig({'name': 'edited'") and "_backend" not in repr(bc)


@pytest.mark.parametrize("name", sorted(BUILTIN_BACKENDS))
def test_lowering_a_lifted_builtin_gives_torch_s_config_back(name) -> None:
    """Lowering is lift's inverse on torch's fields: a spec extending a built-in gets the
    built-in's entries as torch builds them."""
    from backend_spec.ir.lift import lift
    from backend_spec.ir.lower import lower
    from backend_spec.names.vocabulary import builtin_backend_config

    torch_config = builtin_backend_config(name)
    lowered = lower(lift(torch_config))
    assert lowered.to_dict() == torch_config.to_dict()
    assert list(lowered._pattern_complex_format_to_config) == list(
        torch_config._pattern_complex_format_to_config
    )


def test_a_compiled_reference_hands_its_backend_down(tmp_path) -> None:
    """Every Compiled's BackendConfig keeps its Backend, so a reader given it does not lift
    again; one lifted from torch's config holds that config's own pattern configs."""
    from backend_spec.compiler.backends import load_compiled

    module = tmp_path / "mine.py"
    module.write_text(
        "from torch.ao.quantization.backend_config import BackendConfig, BackendPatternConfig\n"
        "import torch\n"
        "CONFIG = BackendConfig('mine').set_backend_pattern_config("
        "BackendPatternConfig(torch.nn.ReLU))\n"
    )
    spec = tmp_path / "v2.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    for ref in ("x86", f"{module}:CONFIG", str(spec)):
        compiled = load_compiled(ref)
        assert backend_of(compiled.backend_config) is compiled.backend
    imported = load_compiled(f"{module}:CONFIG")
    [config] = imported.backend_config.configs
    assert config is imported.lifted_from.configs[0]  # the user's own object
    assert imported.backend.entries[0].origin == Origin(f"{module}:CONFIG")
