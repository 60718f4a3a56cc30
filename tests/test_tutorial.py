"""The three outcomes of PyTorch's BackendConfig tutorial, with the compiled tutorial spec."""

from __future__ import annotations

import pytest
import torch
from torch.ao.quantization import (
    MinMaxObserver,
    QConfig,
    QConfigMapping,
    default_weight_observer,
    get_default_qconfig_mapping,
)
from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

import backend_spec
from backend_spec.analysis.compare import describe
from backend_spec.analysis.explain import TutorialModel

SPECS = ["tutorial.yaml", "tutorial.toml"]


def tutorial_qconfig_mapping() -> QConfigMapping:
    activation = MinMaxObserver.with_args(quant_min=0, quant_max=127, eps=2**-12)
    qconfig = QConfig(activation=activation, weight=default_weight_observer)
    return (
        QConfigMapping()
        .set_object_type(torch.nn.Linear, qconfig)
        .set_object_type(torch.nn.Conv2d, qconfig)
        .set_object_type(torch.nn.BatchNorm2d, qconfig)
        .set_object_type(torch.nn.ReLU, qconfig)
    )


def quantize(spec, use_bn: bool, mapping: QConfigMapping) -> torch.nn.Module:
    torch.manual_seed(0)
    model = TutorialModel(use_bn).eval()
    example = (torch.rand(1, 3, 10, 10),)
    prepared = prepare_fx(model, mapping, example, backend_config=backend_spec.load(spec))
    prepared(*example)
    return convert_fx(prepared)


@pytest.mark.parametrize("name", SPECS)
def test_linear_and_conv_relu_are_quantized(specs_dir, name):
    converted = quantize(specs_dir / name, False, tutorial_qconfig_mapping())
    assert type(converted.linear).__name__ == "Linear"
    assert type(converted.linear).__module__.startswith("torch.ao.nn.quantized")
    assert type(converted.conv).__name__ == "ConvReLU2d"
    assert type(converted.conv).__module__.startswith("torch.ao.nn.intrinsic.quantized")


@pytest.mark.parametrize("name", SPECS)
def test_batchnorm_between_conv_and_relu_leaves_only_linear_quantized(specs_dir, name):
    converted = quantize(specs_dir / name, True, tutorial_qconfig_mapping())
    assert type(converted.linear).__module__.startswith("torch.ao.nn.quantized")
    assert type(converted.conv) is torch.nn.Conv2d
    assert type(converted.bn) is torch.nn.BatchNorm2d


@pytest.mark.parametrize("name", SPECS)
def test_default_mapping_misses_the_constraints_so_nothing_is_quantized(specs_dir, name):
    converted = quantize(specs_dir / name, True, get_default_qconfig_mapping())
    assert type(converted.linear) is torch.nn.Linear
    assert type(converted.conv) is torch.nn.Conv2d
    assert "quantize_per_tensor" not in converted.code


def test_yaml_and_toml_tutorials_compile_to_the_same_config(specs_dir):
    yaml_bc = backend_spec.load(specs_dir / "tutorial.yaml")
    toml_bc = backend_spec.load(specs_dir / "tutorial.toml")
    assert yaml_bc.name == toml_bc.name == "my_backend"
    assert describe(yaml_bc) == describe(toml_bc)
    assert len(yaml_bc.configs) == 5
