"""Compiler stage: every key of the contract reaches the right BackendPatternConfig setter."""

from __future__ import annotations

import textwrap

import pytest
import torch
import torch.ao.nn.intrinsic as nni
from torch.ao.quantization.backend_config import ObservationType
from torch.ao.quantization.utils import MatchAllNode

import backend_spec
from backend_spec import codes
from backend_spec.analysis.compare import describe
from backend_spec.names.fusers import sequential_class


def load(text: str, **kwargs):
    return backend_spec.loads(textwrap.dedent(text), **kwargs)


def test_every_pattern_key_is_applied():
    bc = load(
        """
        name: full
        patterns:
          - pattern_complex_format: [torch.add, [nn.BatchNorm2d, nn.Conv2d], MatchAllNode]
            observation_type: OUTPUT_SHARE_OBSERVER_WITH_INPUT
            dtype_configs:
              - {input_dtype: quint8, output_dtype: quint8, weight_dtype: qint8,
                 bias_dtype: float, is_dynamic: false}
            root_module: nn.Conv2d
            qat_module: nniqat.ConvBn2d
            reference_quantized_module: nnqr.Conv2d
            fused_module: nni.ConvAdd2d
            fuser_method: torch.ao.quantization.backend_config.onednn._fuse_conv_bn_add_left
            root_node_getter: _conv_bn_add_root_node_getter_left
            extra_inputs_getter: _conv_bn_add_extra_inputs_getter_left
            num_tensor_args_to_observation_type:
              0: input_output_not_observed
              2: output_share_observer_with_input
            input_type_to_index: {weight: 1, bias: 2}
        """
    )
    (config,) = bc.configs
    assert config.pattern is None
    assert config._pattern_complex_format == (
        torch.add,
        (torch.nn.BatchNorm2d, torch.nn.Conv2d),
        MatchAllNode,
    )
    assert config.observation_type is ObservationType.OUTPUT_SHARE_OBSERVER_WITH_INPUT
    (dc,) = config.dtype_configs
    assert (dc.input_dtype, dc.output_dtype, dc.weight_dtype, dc.bias_dtype, dc.is_dynamic) == (
        torch.quint8,
        torch.quint8,
        torch.qint8,
        torch.float,
        False,
    )
    assert config.root_module is torch.nn.Conv2d
    assert config.qat_module is torch.ao.nn.intrinsic.qat.ConvBn2d
    assert config.reference_quantized_module is torch.ao.nn.quantized.reference.Conv2d
    assert config.fused_module is nni.ConvAdd2d
    from torch.ao.quantization.backend_config import onednn

    assert config.fuser_method is onednn._fuse_conv_bn_add_left
    assert config._root_node_getter is onednn._conv_bn_add_root_node_getter_left
    assert config._extra_inputs_getter is onednn._conv_bn_add_extra_inputs_getter_left
    assert config._num_tensor_args_to_observation_type == {
        0: ObservationType.INPUT_OUTPUT_NOT_OBSERVED,
        2: ObservationType.OUTPUT_SHARE_OBSERVER_WITH_INPUT,
    }
    assert config._input_type_to_index == {"weight": 1, "bias": 2}


def test_constraints_and_named_dtype_configs_are_shared_objects():
    bc = load(
        """
        name: c
        dtype_configs:
          w8:
            input_dtype: {dtype: quint8, quant_min_lower_bound: 0, quant_max_upper_bound: 127,
                          scale_min_lower_bound: 0.000244140625, scale_max_upper_bound: 2.0}
            output_dtype: {dtype: quint8, scale_exact_match: 0.00390625, zero_point_exact_match: 0}
            weight_dtype: qint8
        patterns:
          - {pattern: nn.Linear, dtype_configs: [w8]}
          - {pattern: nn.Conv2d, dtype_configs: [w8]}
        """
    )
    first, second = (c.dtype_configs[0] for c in bc.configs)
    assert first is second
    inp = first.input_dtype_with_constraints
    assert (inp.quant_min_lower_bound, inp.quant_max_upper_bound) == (0, 127)
    assert inp.scale_min_lower_bound == 2**-12 and inp.scale_max_upper_bound == 2.0
    out = first.output_dtype_with_constraints
    assert (out.scale_exact_match, out.zero_point_exact_match) == (2**-8, 0)


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("nn.Conv2d", torch.nn.Conv2d),
        ("torch.nn.modules.conv.Conv2d", torch.nn.Conv2d),
        ("F.relu", torch.nn.functional.relu),
        ("F.max_pool2d", torch.nn.functional.max_pool2d),
        ("operator.add", __import__("operator").add),
        ("torch.add", torch.add),
        ("method:view", "view"),
    ],
)
def test_names_resolve_to_torch_objects(pattern, expected):
    (config,) = load(f"name: n\npatterns:\n  - pattern: '{pattern}'\n").configs
    assert config.pattern is expected or config.pattern == expected


def test_sequential_fusers_build_the_named_module_for_two_and_three_ops():
    bc = load(
        """
        name: s
        patterns:
          - pattern: [nn.Conv2d, nn.ReLU]
            fused_module: nni.ConvReLU2d
            fuser_method: {sequential: nni.ConvReLU2d}
          - pattern: [nn.Conv2d, nn.BatchNorm2d, nn.ReLU]
            fused_module: nni.ConvBnReLU2d
            fuser_method: {sequential: nni.ConvBnReLU2d}
        """
    )
    two, three = bc.configs
    conv, bn, relu = torch.nn.Conv2d(1, 1, 1), torch.nn.BatchNorm2d(1), torch.nn.ReLU()
    assert isinstance(two.fuser_method(False, conv, relu), nni.ConvReLU2d)
    assert isinstance(three.fuser_method(False, conv, bn, relu), nni.ConvBnReLU2d)
    assert sequential_class(two.fuser_method) is nni.ConvReLU2d
    assert sequential_class(three.fuser_method) is nni.ConvBnReLU2d


def test_custom_fuser_from_allowed_module_runs_through_prepare_fx():
    import bespec_custom_fusers
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    spec = """
        name: custom
        dtype_configs:
          int8: {input_dtype: quint8, output_dtype: quint8, weight_dtype: qint8, bias_dtype: float}
        patterns:
          - pattern: [nn.Linear, nn.ReLU]
            dtype_configs: [int8]
            fused_module: nni.LinearReLU
            fuser_method: bespec_custom_fusers.fuse_linear_relu
          - pattern: nni.LinearReLU
            dtype_configs: [int8]
            root_module: nn.Linear
            reference_quantized_module: nnqr.Linear
        """
    with pytest.raises(backend_spec.SpecError) as info:
        load(spec)
    assert info.value.diagnostics[0].code == "BS302"
    bc = load(spec, allow_imports=["bespec_custom_fusers"])
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()
    example = (torch.randn(2, 4),)
    bespec_custom_fusers.CALLS.clear()
    prepared = prepare_fx(model, get_default_qconfig_mapping(), example, backend_config=bc)
    prepared(*example)
    converted = convert_fx(prepared)
    assert bespec_custom_fusers.CALLS == ["fuse_linear_relu"]
    assert "LinearReLU" in type(converted.get_submodule("0")).__name__
    assert "quantized" in type(converted.get_submodule("0")).__module__


def test_extends_builtin_replaces_and_removes(tmp_path):
    child = tmp_path / "child.yaml"
    child.write_text(
        textwrap.dedent(
            """
            name: child
            extends: fbgemm
            remove: [nn.ReLU6]
            patterns:
              - pattern: nn.Linear
                observation_type: output_share_observer_with_input
            """
        )
    )
    from backend_spec.names.vocabulary import builtin_backend_config

    fbgemm = describe(builtin_backend_config("fbgemm"))
    got = describe(backend_spec.load(child))
    assert set(fbgemm) - set(got) == {"nn.ReLU6"}
    assert got["nn.Linear"]["observation_type"] != fbgemm["nn.Linear"]["observation_type"]
    assert list(got) == [k for k in fbgemm if k != "nn.ReLU6"]


def test_removing_a_pattern_the_base_lacks_names_the_pattern_and_the_base():
    text = "name: child\nextends: qnnpack\nremove: [nn.Conv2d, [nn.Linear, nn.Tanh]]\n"
    with pytest.raises(backend_spec.SpecError) as info:
        backend_spec.loads(text)
    (problem,) = info.value.diagnostics
    assert problem.code == codes.REMOVE_UNKNOWN
    assert (problem.line, problem.column) == (3, 21)
    assert problem.message == (
        "pattern [nn.Linear, nn.Tanh] is not among the patterns of base 'qnnpack'"
    )
    assert "bespec show qnnpack" in problem.hint


def test_extends_relative_path_and_cycle(tmp_path):
    (tmp_path / "a.yaml").write_text("name: a\nextends: b.yaml\n")
    (tmp_path / "b.yaml").write_text("name: b\nextends: ./a.yaml\n")
    with pytest.raises(backend_spec.SpecError) as info:
        backend_spec.load(tmp_path / "a.yaml")
    (diagnostic,) = info.value.diagnostics  # the base's problems are summarised, not quoted
    assert (diagnostic.code, diagnostic.line) == ("BS402", 2)
    assert "b.yaml:2:" in diagnostic.message and "BS402" in diagnostic.message
    (tmp_path / "b.yaml").write_text("name: b\npatterns:\n  - pattern: nn.Linear\n")
    bc = backend_spec.load(tmp_path / "a.yaml")
    assert bc.name == "a" and len(bc.configs) == 1


def test_compiled_names_its_dtype_configs_in_the_intermediate_form(tmp_path) -> None:
    # show names each DTypeConfig the spec named: the name is a field of the intermediate form
    # (no table of torch objects to look it up in); an inline one has none.
    from backend_spec.compiler.loader import compile_file

    spec = tmp_path / "named.yaml"
    spec.write_text(
        "name: named\ndtype_configs:\n  act: {input_dtype: quint8, output_dtype: quint8}\n"
        "patterns:\n  - pattern: nn.ReLU\n    dtype_configs: [act]\n"
        "  - pattern: nn.ReLU6\n    dtype_configs: [{input_dtype: quint8}]\n"
    )
    relu, relu6 = compile_file(spec).backend
    assert [dc.name for dc in relu.dtype_configs] == ["act"]
    assert [dc.name for dc in relu6.dtype_configs] == [None]
