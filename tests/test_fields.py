"""The field table (backend_spec.specfile.fields) against torch's BackendPatternConfig: a field
torch adds, renames or drops fails here until the table (the one place to add it) is updated."""

from __future__ import annotations

import typing

import pytest

from backend_spec._torch import BackendPatternConfig, ObservationType, torch
from backend_spec.analysis.compare import describe_pattern
from backend_spec.specfile.fields import PATTERN_FIELDS, PT2E_PATTERN_FIELDS, FieldKind
from backend_spec.specfile.models import PatternModel

#: torch setters that are not fields: ``add_dtype_config`` appends to ``dtype_configs``.
_NOT_FIELDS = {"add_dtype_config"}


def _torch_setters() -> set[str]:
    return {
        name
        for name in vars(BackendPatternConfig)
        if name.startswith(("set_", "_set_", "add_")) and name not in _NOT_FIELDS
    }


def _sample(kind: FieldKind) -> typing.Any:
    """A non-default value of each kind, so ``to_dict()`` lists the field."""
    samples = {
        FieldKind.PATTERN: torch.nn.Linear,
        FieldKind.COMPLEX_PATTERN: (torch.nn.ReLU, torch.nn.Linear),
        FieldKind.OBSERVATION_TYPE: ObservationType.OUTPUT_SHARE_OBSERVER_WITH_INPUT,
        FieldKind.DTYPE_CONFIGS: [],
        FieldKind.MODULE: torch.nn.Linear,
        FieldKind.FUSED_MODULE: torch.nn.Linear,
        FieldKind.FUSER: len,
        FieldKind.FUNCTION: len,
        FieldKind.OBSERVATION_TYPE_MAP: {0: ObservationType.INPUT_OUTPUT_NOT_OBSERVED},
        FieldKind.INDEX_MAP: {"weight": 1},
    }
    return samples[kind]


def test_every_torch_setter_is_in_the_table_and_nothing_else() -> None:
    assert {f.setter for f in PATTERN_FIELDS} == _torch_setters()


def test_every_to_dict_key_is_a_spec_key() -> None:
    """Set every field but the complex pattern (torch allows one pattern form) and read back."""
    keys: set[str] = set()
    for complex_form in (False, True):
        config = BackendPatternConfig()
        for spec in PATTERN_FIELDS:
            if spec.kind is (FieldKind.PATTERN if complex_form else FieldKind.COMPLEX_PATTERN):
                continue
            getattr(config, spec.setter)(_sample(spec.kind))
        keys |= set(config.to_dict())
    assert keys == {f.torch_dict_key for f in PATTERN_FIELDS}


def test_torch_dict_key_constants_are_spec_keys() -> None:
    """torch names each from_dict/to_dict key in a ``*_DICT_KEY`` constant."""
    from torch.ao.quantization.backend_config import backend_config as module

    pattern_keys = {
        value
        for name, value in vars(module).items()
        if name.endswith("_DICT_KEY") and isinstance(value, str)
    }
    spec_keys = {f.torch_dict_key for f in PATTERN_FIELDS}
    # The module's other constants name DTypeConfig and BackendConfig keys.
    assert spec_keys <= pattern_keys
    unknown = pattern_keys - spec_keys
    from backend_spec.specfile.models import DTypeConfigModel

    dtype_keys = set(DTypeConfigModel.model_fields) | {"name", "configs"}
    assert unknown <= dtype_keys, f"torch keys missing from the field table: {unknown}"


@pytest.mark.parametrize("spec", PATTERN_FIELDS, ids=lambda f: f.key)
def test_getter_reads_what_the_setter_wrote(spec) -> None:
    config = BackendPatternConfig()
    value = _sample(spec.kind)
    getattr(config, spec.setter)(value)
    assert getattr(config, spec.getter) == value


def test_the_model_has_exactly_the_table_fields_in_order() -> None:
    """The torch fields of the table, then the version 2 pt2e keys (no torch field)."""
    expected = [f.key for f in PATTERN_FIELDS] + list(PT2E_PATTERN_FIELDS)
    assert list(PatternModel.model_fields) == expected


def test_compare_describes_every_non_pattern_field() -> None:
    described = describe_pattern(BackendPatternConfig(torch.nn.Linear))
    expected = ["pattern_format"] + [
        f.key
        for f in PATTERN_FIELDS
        if f.kind not in (FieldKind.PATTERN, FieldKind.COMPLEX_PATTERN)
    ]
    assert list(described) == [*expected, *PT2E_PATTERN_FIELDS]  # the version 2 keys too


def test_module_fields_have_a_short_tag() -> None:
    for spec in PATTERN_FIELDS:
        if spec.kind in (FieldKind.MODULE, FieldKind.FUSED_MODULE):
            assert spec.short, spec.key
