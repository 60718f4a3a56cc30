"""One spelling of objects, patterns and dtypes in every message (backend_spec.names.labels)."""

from __future__ import annotations

import operator

from backend_spec._torch import BackendPatternConfig, torch
from backend_spec.names.labels import (
    config_label,
    dtype_label,
    object_label,
    pattern_label,
    qualified_name,
)


def _local() -> None:
    """A function with no spec name."""


def test_objects_by_spec_name_else_qualified_name() -> None:
    assert object_label(torch.nn.Conv2d) == "nn.Conv2d"
    assert object_label(operator.add) == "operator.add"
    assert object_label("view") == "method:view"
    assert object_label(None) == ""
    assert object_label(_local) == qualified_name(_local) == f"{__name__}._local"


def test_patterns_in_the_order_given() -> None:
    conv, relu = torch.nn.Conv2d, torch.nn.ReLU
    assert pattern_label(conv) == "nn.Conv2d"
    assert pattern_label((conv, relu)) == "(nn.Conv2d, nn.ReLU)"
    assert pattern_label((relu, (conv, relu))) == "(nn.ReLU, (nn.Conv2d, nn.ReLU))"


def test_configs_by_their_spec_pattern() -> None:
    forward = BackendPatternConfig((torch.nn.Conv2d, torch.nn.ReLU))
    assert config_label(forward) == "(nn.Conv2d, nn.ReLU)"
    complex_format = BackendPatternConfig()._set_pattern_complex_format(
        (torch.nn.ReLU, torch.nn.Conv2d)
    )
    assert config_label(complex_format) == "(nn.ReLU, nn.Conv2d) (complex format)"


def test_dtypes_as_a_spec_writes_them() -> None:
    assert dtype_label(torch.float32) == "float"
    assert dtype_label(torch.quint8) == "quint8"
    assert dtype_label(None) == "none"
