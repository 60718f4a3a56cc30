"""Lossless round trips: BackendConfig -> dump -> loads -> the same BackendConfig (by compare)."""

from __future__ import annotations

import functools
import operator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import backend_spec
from backend_spec._torch import (
    BackendConfig,
    BackendPatternConfig,
    DTypeConfig,
    DTypeWithConstraints,
    ObservationType,
    torch,
)
from backend_spec.analysis.compare import describe, describe_backend, diff
from backend_spec.compiler.backends import load_backend
from backend_spec.export import dump
from backend_spec.names.vocabulary import BUILTIN_BACKENDS

nn = torch.nn
nni = torch.ao.nn.intrinsic
FORMATS = ["yaml", "toml"]


@functools.cache
def builtin(name: str) -> BackendConfig:
    return load_backend(name)


def round_trip(bc: BackendConfig, fmt: str) -> BackendConfig:
    return backend_spec.loads(dump(bc, format=fmt), format=fmt)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", list(BUILTIN_BACKENDS))
def test_builtin_backends_round_trip_losslessly(name: str, fmt: str) -> None:
    bc = builtin(name)
    loaded = round_trip(bc, fmt)
    assert diff(bc, loaded) == []
    assert describe(loaded) == describe(bc)
    assert describe_backend(loaded) == describe_backend(bc)  # name and pattern order too


@pytest.mark.parametrize("fmt", FORMATS)
def test_export_of_a_loaded_spec_is_a_fixed_point(fmt: str) -> None:
    text = dump(builtin("onednn"), format=fmt)
    assert dump(backend_spec.loads(text, format=fmt), format=fmt) == text


def custom_fuser(is_qat: bool, linear: Any, relu: Any) -> Any:
    return nni.LinearReLU(linear, relu)


def _custom() -> BackendConfig:
    """Every field kind, plus values torch's built-ins never use (is_dynamic=False, bounds)."""
    constrained = DTypeConfig(
        input_dtype=DTypeWithConstraints(
            torch.quint8,
            quant_min_lower_bound=0,
            quant_max_upper_bound=127,
            scale_min_lower_bound=2**-12,
            scale_max_upper_bound=1e3,
        ),
        output_dtype=DTypeWithConstraints(
            torch.quint8, scale_exact_match=1 / 3, zero_point_exact_match=7
        ),
        weight_dtype=DTypeWithConstraints(
            torch.qint8, quant_min_lower_bound=-127, quant_max_upper_bound=127
        ),
        bias_dtype=torch.float16,
        is_dynamic=False,
    )
    return BackendConfig("custom 'name' \"quoted\"").set_backend_pattern_configs(
        [
            BackendPatternConfig((nn.Linear, nn.ReLU))
            .set_dtype_configs([constrained, DTypeConfig(torch.qint32, torch.float32)])
            .set_fuser_method(custom_fuser)
            .set_fused_module(nni.LinearReLU),
            BackendPatternConfig("view").set_observation_type(
                ObservationType.INPUT_OUTPUT_NOT_OBSERVED
            ),
            BackendPatternConfig(operator.floordiv)._set_num_tensor_args_to_observation_type(
                {2: ObservationType.OUTPUT_SHARE_OBSERVER_WITH_INPUT}
            ),
            BackendPatternConfig(torch.nn.functional.group_norm)._set_input_type_to_index(
                {"weight": 2}
            ),
        ]
    )


@pytest.mark.parametrize("fmt", FORMATS)
def test_custom_config_round_trips_with_allowed_module(fmt: str) -> None:
    bc = _custom()
    text = dump(bc, format=fmt)
    assert f"{__name__}.custom_fuser" in text
    loaded = backend_spec.loads(text, format=fmt, allow_imports=[__name__])
    assert diff(bc, loaded) == []


def test_three_op_sequential_fuser_survives_export() -> None:
    """bespec's own 3-module ``{sequential: ...}`` fuser exports back as ``{sequential: ...}``."""
    text = """
name: three
patterns:
  - pattern: [nn.Conv2d, nn.BatchNorm2d, nn.ReLU]
    fused_module: nni.ConvBnReLU2d
    fuser_method: {sequential: nni.ConvBnReLU2d}
"""
    bc = backend_spec.loads(text)
    exported = dump(bc)
    assert "fuser_method: {sequential: nni.ConvBnReLU2d}" in exported
    assert diff(bc, backend_spec.loads(exported)) == []


_SCALES = st.floats(min_value=1e-300, max_value=1e300, allow_nan=False, allow_infinity=False)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    scale_min=_SCALES,
    scale_exact=_SCALES,
    qmin=st.integers(-128, 0),
    qmax=st.integers(0, 127),
    dynamic=st.sampled_from([None, True, False]),
    fmt=st.sampled_from(FORMATS),
)
def test_arbitrary_constraints_round_trip_exactly(
    scale_min: float, scale_exact: float, qmin: int, qmax: int, dynamic: bool | None, fmt: str
) -> None:
    dc = DTypeConfig(
        input_dtype=DTypeWithConstraints(
            torch.qint8,
            quant_min_lower_bound=qmin,
            quant_max_upper_bound=qmax,
            scale_min_lower_bound=scale_min,
        ),
        output_dtype=DTypeWithConstraints(torch.qint8, scale_exact_match=scale_exact),
        weight_dtype=torch.qint8,
        is_dynamic=dynamic,
    )
    bc = BackendConfig("h").set_backend_pattern_config(
        BackendPatternConfig(nn.Linear).set_dtype_configs([dc])
    )
    loaded = round_trip(bc, fmt)
    assert diff(bc, loaded) == []
    (loaded_dc,) = loaded.configs[0].dtype_configs
    assert loaded_dc.input_dtype_with_constraints.scale_min_lower_bound == scale_min
    assert loaded_dc.output_dtype_with_constraints.scale_exact_match == scale_exact
