"""compare.describe and compare.diff: equal builds describe equal; planted changes are found."""

from __future__ import annotations

import copy
import operator
from collections.abc import Callable
from typing import Any

import pytest

from backend_spec._torch import (
    BackendConfig,
    BackendPatternConfig,
    DTypeConfig,
    DTypeWithConstraints,
    ObservationType,
    torch,
)
from backend_spec.analysis.compare import Difference, Ref, describe, describe_backend, diff
from backend_spec.names.vocabulary import builtin_backend_config

nn = torch.nn
F = torch.nn.functional
nni = torch.ao.nn.intrinsic
nnqr = torch.ao.nn.quantized.reference
OT = ObservationType


def _getter(pattern: Any) -> Any:
    return pattern


def _other_getter(pattern: Any) -> Any:
    return pattern


def _fuser(is_qat: bool, conv: Any, relu: Any) -> Any:
    return nni.ConvReLU2d(conv, relu)


def _weighted() -> DTypeConfig:
    return DTypeConfig(
        input_dtype=DTypeWithConstraints(
            torch.quint8, quant_min_lower_bound=0, quant_max_upper_bound=255
        ),
        output_dtype=torch.quint8,
        weight_dtype=torch.qint8,
        bias_dtype=torch.float,
    )


def _sequential(cls: type) -> Callable[..., Any]:
    from torch.ao.quantization.fuser_method_mappings import _sequential_wrapper2

    return _sequential_wrapper2(cls)


def base() -> BackendConfig:
    """A config that sets every field at least once; built fresh each call."""
    return BackendConfig("base").set_backend_pattern_configs(
        [
            BackendPatternConfig(nn.Linear)
            .set_dtype_configs(
                [_weighted(), DTypeConfig(torch.quint8, torch.float, torch.qint8, is_dynamic=True)]
            )
            .set_root_module(nn.Linear)
            .set_qat_module(torch.ao.nn.qat.Linear)
            .set_reference_quantized_module(nnqr.Linear),
            BackendPatternConfig((nn.Conv2d, nn.ReLU))
            .set_dtype_configs([_weighted()])
            .set_fused_module(nni.ConvReLU2d)
            .set_fuser_method(_sequential(nni.ConvReLU2d)),
            BackendPatternConfig()
            ._set_pattern_complex_format(
                (operator.add, nn.Conv2d, torch.ao.quantization.utils.MatchAllNode)
            )
            .set_fuser_method(_fuser)
            ._set_root_node_getter(_getter)
            ._set_extra_inputs_getter(_getter),
            BackendPatternConfig(torch.add)._set_num_tensor_args_to_observation_type(
                {
                    0: OT.OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT,
                    1: OT.OUTPUT_SHARE_OBSERVER_WITH_INPUT,
                }
            ),
            BackendPatternConfig(F.linear)._set_input_type_to_index({"weight": 1, "bias": 2}),
            BackendPatternConfig("view").set_observation_type(OT.OUTPUT_SHARE_OBSERVER_WITH_INPUT),
        ]
    )


def config(bc: BackendConfig, index: int) -> BackendPatternConfig:
    return list(bc._pattern_complex_format_to_config.values())[index]


def test_fresh_builds_describe_equal_and_have_no_differences() -> None:
    assert describe(base()) == describe(base())
    assert diff(base(), base()) == []


def test_sequential_fusers_compare_by_class_other_functions_by_identity() -> None:
    described = describe(base())
    assert described["(nn.ReLU, nn.Conv2d)"]["fuser_method"] == {"sequential": Ref(nni.ConvReLU2d)}
    assert described["(operator.add, nn.Conv2d, MatchAllNode)"]["fuser_method"] == Ref(_fuser)
    assert Ref(_getter) != Ref(_other_getter)


def test_pattern_keys_use_torchs_reversed_nested_format() -> None:
    keys = list(describe(base()))
    assert keys == [
        "nn.Linear",
        "(nn.ReLU, nn.Conv2d)",
        "(operator.add, nn.Conv2d, MatchAllNode)",
        "torch.add",
        "F.linear",
        "method:view",
    ]


def test_describe_lists_every_dtype_field() -> None:
    (weighted, dynamic) = describe(base())["nn.Linear"]["dtype_configs"]
    assert weighted["input_dtype"] == {
        "dtype": "quint8",
        "quant_min_lower_bound": 0,
        "quant_max_upper_bound": 255,
        "scale_min_lower_bound": None,
        "scale_max_upper_bound": None,
        "scale_exact_match": None,
        "zero_point_exact_match": None,
        # the version 2 observer keys, unset on torch's own objects
        **dict.fromkeys(("observer", "qscheme", "granularity", "ch_axis", "reduce_range")),
        "fake_quant": None,
        "ptq_fake_quant": None,
        "customized_qrange": None,
        "averaging_constant": None,
    }
    # dtypes as a spec writes them (backend_spec.names.dtypes.dtype_name): float32 is "float"
    assert weighted["bias_dtype"] == "float" and weighted["is_dynamic"] is None
    assert dynamic["is_dynamic"] is True and dynamic["output_dtype"]["dtype"] == "float"


def _set(attr: str, value: Any) -> Callable[[BackendPatternConfig], None]:
    def mutate(c: BackendPatternConfig) -> None:
        setattr(c, attr, value)

    return mutate


def _set_dtype(
    index: int, key: str, field: str, value: Any
) -> Callable[[BackendPatternConfig], None]:
    def mutate(c: BackendPatternConfig) -> None:
        dtype_configs = copy.deepcopy(c.dtype_configs)
        target = dtype_configs[index]
        if key in ("bias_dtype", "is_dynamic"):
            setattr(target, key, value)
        else:
            setattr(getattr(target, f"{key}_with_constraints"), field, value)
        c.dtype_configs = dtype_configs

    return mutate


PLANTS: list[tuple[int, Callable[[BackendPatternConfig], None], str, Any, Any]] = [
    (
        0,
        _set("observation_type", OT.OUTPUT_SHARE_OBSERVER_WITH_INPUT),
        "observation_type",
        "output_use_different_observer_as_input",
        "output_share_observer_with_input",
    ),
    (0, _set("root_module", nn.Conv2d), "root_module", Ref(nn.Linear), Ref(nn.Conv2d)),
    (0, _set("qat_module", None), "qat_module", Ref(torch.ao.nn.qat.Linear), None),
    (
        0,
        _set("reference_quantized_module", nnqr.Conv2d),
        "reference_quantized_module",
        Ref(nnqr.Linear),
        Ref(nnqr.Conv2d),
    ),
    (
        1,
        _set("fused_module", nni.LinearReLU),
        "fused_module",
        Ref(nni.ConvReLU2d),
        Ref(nni.LinearReLU),
    ),
    (
        1,
        _set("fuser_method", _sequential(nni.LinearReLU)),
        "fuser_method.sequential",
        Ref(nni.ConvReLU2d),
        Ref(nni.LinearReLU),
    ),
    (
        2,
        _set("fuser_method", _sequential(nni.ConvReLU2d)),
        "fuser_method",
        Ref(_fuser),
        {"sequential": Ref(nni.ConvReLU2d)},
    ),
    (
        2,
        _set("_root_node_getter", _other_getter),
        "root_node_getter",
        Ref(_getter),
        Ref(_other_getter),
    ),
    (2, _set("_extra_inputs_getter", None), "extra_inputs_getter", Ref(_getter), None),
    (
        3,
        _set(
            "_num_tensor_args_to_observation_type", {0: OT.OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT}
        ),
        "num_tensor_args_to_observation_type[1]",
        "output_share_observer_with_input",
        None,
    ),
    (4, _set("_input_type_to_index", {"weight": 1, "bias": 3}), "input_type_to_index.bias", 2, 3),
    (
        0,
        _set_dtype(0, "input_dtype", "scale_min_lower_bound", 2**-12),
        "dtype_configs[0].input_dtype.scale_min_lower_bound",
        None,
        2**-12,
    ),
    (
        0,
        _set_dtype(0, "input_dtype", "quant_max_upper_bound", 255.0),
        "dtype_configs[0].input_dtype.quant_max_upper_bound",
        255,
        255.0,
    ),
    (
        0,
        _set_dtype(0, "weight_dtype", "dtype", torch.quint8),
        "dtype_configs[0].weight_dtype.dtype",
        "qint8",
        "quint8",
    ),
    (
        0,
        _set_dtype(1, "output_dtype", "scale_exact_match", 0.5),
        "dtype_configs[1].output_dtype.scale_exact_match",
        None,
        0.5,
    ),
    (
        0,
        _set_dtype(1, "output_dtype", "zero_point_exact_match", 3),
        "dtype_configs[1].output_dtype.zero_point_exact_match",
        None,
        3,
    ),
    (
        0,
        _set_dtype(0, "bias_dtype", "", torch.float16),
        "dtype_configs[0].bias_dtype",
        "float",
        "float16",
    ),
    (0, _set_dtype(1, "is_dynamic", "", None), "dtype_configs[1].is_dynamic", True, None),
]


@pytest.mark.parametrize(
    ("index", "mutate", "path", "old", "new"), PLANTS, ids=[p[2] for p in PLANTS]
)
def test_diff_finds_each_planted_field_change(
    index: int, mutate: Callable[[BackendPatternConfig], None], path: str, old: Any, new: Any
) -> None:
    a, b = base(), base()
    mutate(config(b, index))
    pattern = list(describe(a))[index]
    assert diff(a, b) == [Difference("changed", pattern, path, old, new)]
    assert describe(a) != describe(b) or path.endswith("quant_max_upper_bound")


def test_pattern_format_matters() -> None:
    """A pattern given in the complex format keeps its fuser unreversed: a real difference."""
    a = BackendConfig().set_backend_pattern_config(BackendPatternConfig((nn.Conv2d, nn.ReLU)))
    b = BackendConfig().set_backend_pattern_config(
        BackendPatternConfig()._set_pattern_complex_format((nn.ReLU, nn.Conv2d))
    )
    assert diff(a, b) == [
        Difference("changed", "(nn.ReLU, nn.Conv2d)", "pattern_format", "forward", "complex")
    ]


def test_dtype_config_list_length_change_is_one_difference() -> None:
    a, b = base(), base()
    config(b, 0).dtype_configs = config(b, 0).dtype_configs[:1]
    (difference,) = diff(a, b)
    assert (
        difference.field == "dtype_configs"
        and len(difference.old) == 2
        and len(difference.new) == 1
    )


def test_added_removed_renamed_and_reordered() -> None:
    a = base()
    b = BackendConfig("renamed").set_backend_pattern_configs(list(reversed(base().configs[1:])))
    b.set_backend_pattern_config(BackendPatternConfig(nn.Hardswish))
    kinds = [(d.kind, d.pattern, d.field) for d in diff(a, b)]
    assert kinds == [
        ("changed", "", "name"),
        ("removed", "nn.Linear", ""),
        ("added", "nn.Hardswish", ""),
        ("reordered", "", "order"),
    ]
    assert [str(d) for d in diff(a, b)][:3] == [
        "~ name: 'base' -> 'renamed'",
        "- nn.Linear",
        "+ nn.Hardswish",
    ]


def test_unnameable_objects_are_described_not_rejected() -> None:
    bc = BackendConfig().set_backend_pattern_config(
        BackendPatternConfig((nn.Linear, nn.ReLU)).set_fuser_method(lambda q, a, b: a)
    )
    fuser = describe(bc)["(nn.ReLU, nn.Linear)"]["fuser_method"]
    assert "<lambda>" in repr(fuser)


@pytest.mark.parametrize("name", ["native", "onednn"])
def test_builtin_configs_describe_equal_across_builds(name: str) -> None:
    a, b = builtin_backend_config(name), builtin_backend_config(name)
    assert describe_backend(a) == describe_backend(b)
    assert diff(a, b) == []
