"""qconfig_mapping: the QConfigs it builds pass torch's own acceptance test for every built-in."""

from __future__ import annotations

import pytest

from backend_spec._torch import quiet, torch
from backend_spec.analysis.qconfigs import (
    choose,
    fusion_conflicts,
    pattern_ops,
    qconfig_for,
    qconfig_mapping,
    satisfies,
)
from backend_spec.names.vocabulary import BUILTIN_BACKENDS, builtin_backend_config

with quiet():
    from torch.ao.quantization import get_default_qconfig
    from torch.ao.quantization.fx.utils import _qconfig_satisfies_dtype_config_constraints
    from torch.ao.quantization.observer import FixedQParamsObserver, PlaceholderObserver

nn = torch.nn


def _entry(backend: str, pattern, engine=None):
    bc = builtin_backend_config(backend)
    return next(e for e in choose(bc, engine) if e.config.pattern == pattern)


@pytest.mark.parametrize("backend", sorted(BUILTIN_BACKENDS))
@pytest.mark.parametrize("engine", [None, "x86", "qnnpack"])
def test_every_pattern_is_satisfied_per_torch(backend: str, engine: str | None) -> None:
    bc = builtin_backend_config(backend)
    mapping = qconfig_mapping(bc, engine=engine).object_type_qconfigs
    entries = list(choose(bc, engine))
    assert entries, backend
    for entry in entries:
        assert entry.qconfig is not None, (entry.config.pattern, entry.reason)
        # The QConfig torch will use for the pattern is the one of its first op.
        qconfig = mapping[pattern_ops(entry.config)[0]]
        assert satisfies(qconfig, entry.dtype_config), entry.config.pattern


def test_satisfies_delegates_constraints_to_torch() -> None:
    entry = _entry("qnnpack", nn.Linear)  # qint8 activations with a 2**-12 minimum scale
    torch_default = get_default_qconfig("qnnpack")  # eps = float32 eps, too small
    assert not satisfies(torch_default, entry.dtype_config)
    assert satisfies(entry.qconfig, entry.dtype_config)
    for dwc, is_activation in [
        (entry.dtype_config.input_dtype_with_constraints, True),
        (entry.dtype_config.weight_dtype_with_constraints, False),
    ]:
        assert _qconfig_satisfies_dtype_config_constraints(entry.qconfig, dwc, is_activation)


def test_qnnpack_constraints_are_met() -> None:
    entry = _entry("qnnpack", nn.Linear)
    activation, weight = entry.qconfig.activation(), entry.qconfig.weight()
    assert activation.dtype == torch.qint8 and activation.eps >= 2**-12
    assert (weight.quant_min, weight.quant_max) == (-127, 127) and weight.eps >= 2**-12
    # With the qnnpack engine, the quint8 DTypeConfig its kernels run is chosen instead.
    runnable = _entry("qnnpack", nn.Linear, engine="qnnpack")
    assert runnable.qconfig.activation().dtype == torch.quint8


def test_fixed_qparams_get_the_exact_scale() -> None:
    observer = _entry("native", nn.Sigmoid).qconfig.activation()
    assert isinstance(observer, FixedQParamsObserver)
    assert (float(observer.scale), int(observer.zero_point)) == (1.0 / 256.0, 0)
    tanh = _entry("native", nn.Tanh).qconfig.activation()
    assert (float(tanh.scale), int(tanh.zero_point)) == (2.0 / 256.0, 128)


def test_dynamic_weight_only_and_fp16() -> None:
    bc = builtin_backend_config("native")
    linear = next(c for c in bc.configs if c.pattern is nn.Linear)
    dynamic, fp16 = linear.dtype_configs[1], linear.dtype_configs[2]
    act = qconfig_for(dynamic).activation()
    assert isinstance(act, PlaceholderObserver) and act.is_dynamic and act.dtype == torch.quint8
    act16 = qconfig_for(fp16)
    assert act16.activation().dtype == torch.float16 and act16.weight().dtype == torch.float16
    embedding = _entry("native", nn.Embedding).qconfig
    assert embedding.activation().dtype == torch.float32
    weight = embedding.weight()
    assert weight.dtype == torch.quint8 and weight.qscheme == torch.per_channel_affine_float_qparams


def test_fused_partners_share_a_qconfig() -> None:
    from torch.ao.quantization.qconfig import qconfig_equals

    mapping = qconfig_mapping(builtin_backend_config("native")).object_type_qconfigs
    # torch fuses modules only when their QConfigs are equal, weight observer included.
    assert qconfig_equals(mapping[nn.Conv2d], mapping[nn.ReLU])
    assert qconfig_equals(mapping[nn.Conv2d], mapping[nn.BatchNorm2d])
    assert "relu" in mapping and mapping[torch.add] is not None


def test_conflicting_fusion_is_reported() -> None:
    conflicts = fusion_conflicts(builtin_backend_config("onednn"))
    assert any(op is nn.Tanh for _, op in conflicts)
    assert fusion_conflicts(builtin_backend_config("native")) == []


def test_accepts_a_spec_path(tmp_path) -> None:
    spec = tmp_path / "b.yaml"
    spec.write_text("name: mine\nextends: qnnpack\n")
    mapping = qconfig_mapping(spec).object_type_qconfigs
    assert mapping[nn.Linear].activation().dtype == torch.qint8


def test_activation_options_written_at_their_defaults_keep_partners_fusable() -> None:
    """A conv whose input spells out ``qscheme: affine, granularity: per_tensor`` observes like
    a ReLU whose input is plain ``qint8``: both must share the conv's per-channel weight
    observer, or torch refuses to fuse (Conv2d, ReLU) ("same qconfigs for all module types")."""
    from torch.ao.quantization.qconfig import qconfig_equals

    import backend_spec

    act = "{dtype: qint8, quant_min_lower_bound: -128, quant_max_upper_bound: 127"
    spec = backend_spec.loads(
        "spec_version: 2\nname: npu\ndtype_configs:\n"
        f"  w8a8:\n    input_dtype: {act}, qscheme: affine, granularity: per_tensor}}\n"
        f"    output_dtype: {act}}}\n"
        "    weight_dtype: {dtype: qint8, granularity: per_channel}\n    bias_dtype: float\n"
        f"  a8:\n    input_dtype: {act}}}\n    output_dtype: {act}}}\n"
        "patterns:\n  - pattern: nn.Conv2d\n    dtype_configs: [w8a8]\n"
        "  - pattern: nn.ReLU\n    dtype_configs: [a8]\n"
    )
    mapping = qconfig_mapping(spec).object_type_qconfigs
    assert qconfig_equals(mapping[nn.Conv2d], mapping[nn.ReLU])
    assert fusion_conflicts(spec) == []


def test_the_qconfig_cache_key_names_the_field_table_constraints() -> None:
    # The key is a named tuple whose constraint fields are the table's, in the table's order:
    # a constraint added to specfile/fields.py must be added here, or this fails.
    from backend_spec.analysis.qconfigs import Constraints
    from backend_spec.specfile.fields import CONSTRAINT_FIELDS

    assert Constraints._fields == ("dtype", *CONSTRAINT_FIELDS, "options")
