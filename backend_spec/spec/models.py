"""Stage 2: the spec format as strict pydantic models (and, from them, the JSON Schema).

Models hold names as strings; turning names into torch objects is the resolver's job, so that
schema validation and ``bespec schema`` need no torch. Field names mirror torch's
``BackendPatternConfig`` setters and ``DTypeConfig.from_dict`` keys; the fields of a pattern
entry are not written here but built from the one field table, :mod:`backend_spec.spec.fields`
(a new torch field is a row there; its kind decides its type here).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Strict,
    Tag,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from backend_spec import codes
from backend_spec.names.dtypes import dtype_range
from backend_spec.spec.fields import PATTERN_FIELDS, FieldKind, PatternField, fields_of

#: ``DTypeWithConstraints`` fields other than ``dtype``, in the order a spec lists them.
CONSTRAINT_FIELDS: tuple[str, ...] = (
    "quant_min_lower_bound",
    "quant_max_upper_bound",
    "scale_min_lower_bound",
    "scale_max_upper_bound",
    "scale_exact_match",
    "zero_point_exact_match",
)

OBSERVATION_TYPES = (
    "output_use_different_observer_as_input",
    "output_share_observer_with_input",
    "input_output_not_observed",
)

ObservationTypeName = Annotated[
    str,
    Field(
        description="How observers are inserted (case-insensitive).",
        json_schema_extra={"enum": [*OBSERVATION_TYPES, *(t.upper() for t in OBSERVATION_TYPES)]},
    ),
]

Name = Annotated[
    str,
    Field(
        min_length=1,
        max_length=512,
        description="A torch object: an alias name (nn.Conv2d, F.relu, nni.ConvReLU2d), a fully "
        "qualified dotted name, method:NAME, MatchAllNode, or a bare built-in fuser name.",
    ),
]

Number = Annotated[int | float, Field()]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class DTypeWithConstraintsModel(_Strict):
    """A dtype plus the constraints a QConfig must meet (torch's ``DTypeWithConstraints``)."""

    dtype: Annotated[str, Field(description="A torch.dtype attribute name: quint8, qint8, ...")]
    quant_min_lower_bound: Number | None = Field(None, description="Lowest allowed quant_min.")
    quant_max_upper_bound: Number | None = Field(None, description="Highest allowed quant_max.")
    scale_min_lower_bound: Number | None = Field(
        None, description="Lowest allowed scale (the observer's eps)."
    )
    scale_max_upper_bound: Number | None = Field(None, description="Highest allowed scale.")
    scale_exact_match: Number | None = Field(
        None, description="Fixed scale (FixedQParamsObserver) for ops such as sigmoid."
    )
    zero_point_exact_match: int | None = Field(None, description="Fixed zero point.")

    @field_validator("dtype")
    @classmethod
    def _known_dtype(cls, value: str) -> str:
        return check_dtype_name(value)

    @model_validator(mode="after")
    def _sane_constraints(self) -> DTypeWithConstraintsModel:
        low, high = self.quant_min_lower_bound, self.quant_max_upper_bound
        if low is not None and high is not None and low > high:
            raise PydanticCustomError(
                codes.INVERTED_BOUNDS,
                "quant_min_lower_bound {low} is above quant_max_upper_bound {high}",
                {"low": low, "high": high},
            )
        smin, smax = self.scale_min_lower_bound, self.scale_max_upper_bound
        for label, value in (
            ("scale_min_lower_bound", smin),
            ("scale_max_upper_bound", smax),
            ("scale_exact_match", self.scale_exact_match),
        ):
            if value is not None and not value > 0:
                raise PydanticCustomError(
                    codes.NONPOSITIVE_SCALE,
                    "{label} must be > 0, got {value}",
                    {"label": label, "value": value},
                )
        if smin is not None and smax is not None and smin > smax:
            raise PydanticCustomError(
                codes.INVERTED_BOUNDS,
                "scale_min_lower_bound {low} is above scale_max_upper_bound {high}",
                {"low": smin, "high": smax},
            )
        self._inside_dtype_range()
        return self

    def _inside_dtype_range(self) -> None:
        bounds = dtype_range(self.dtype)
        if bounds is None:
            return
        lowest, highest = bounds
        for label, value in (
            ("quant_min_lower_bound", self.quant_min_lower_bound),
            ("quant_max_upper_bound", self.quant_max_upper_bound),
            ("zero_point_exact_match", self.zero_point_exact_match),
        ):
            if value is not None and not lowest <= value <= highest:
                raise PydanticCustomError(
                    codes.OUT_OF_RANGE,
                    "{label} {value} is outside the range of {dtype} [{lowest}, {highest}]",
                    {
                        "label": label,
                        "value": value,
                        "dtype": self.dtype,
                        "lowest": lowest,
                        "highest": highest,
                    },
                )


def check_dtype_name(value: str) -> str:
    from backend_spec.names.dtypes import dtype_names

    if value not in dtype_names():
        raise PydanticCustomError(
            codes.UNKNOWN_DTYPE, "unknown dtype '{value}'", {"value": value, "namespace": "dtype"}
        )
    return value


def _dtype_kind(value: Any) -> str:
    return "name" if isinstance(value, str) else "constrained"


DTypeName = Annotated[str, Field(description="A torch.dtype attribute name.")]

DTypeSpec = Annotated[
    Annotated[DTypeName, Tag("name")] | Annotated[DTypeWithConstraintsModel, Tag("constrained")],
    Discriminator(_dtype_kind),
]


class DTypeConfigModel(_Strict):
    """One supported combination of dtypes (torch's ``DTypeConfig``)."""

    input_dtype: DTypeSpec | None = None
    output_dtype: DTypeSpec | None = None
    weight_dtype: DTypeSpec | None = None
    bias_dtype: DTypeSpec | None = None
    is_dynamic: bool | None = None

    @field_validator("input_dtype", "output_dtype", "weight_dtype", "bias_dtype")
    @classmethod
    def _dtype_name(cls, value: Any) -> Any:
        return check_dtype_name(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _bias_without_constraints(self) -> DTypeConfigModel:
        bias = self.bias_dtype
        if isinstance(bias, DTypeWithConstraintsModel) and bias.model_fields_set - {"dtype"}:
            raise PydanticCustomError(
                codes.BIAS_CONSTRAINTS,
                "bias_dtype takes a dtype only; torch has no bias constraints",
                {},
            )
        return self


def _dtype_config_ref_kind(value: Any) -> str:
    return "name" if isinstance(value, str) else "inline"


DTypeConfigRef = Annotated[
    Annotated[
        Annotated[str, Field(description="The name of a top-level dtype config.")], Tag("name")
    ]
    | Annotated[DTypeConfigModel, Tag("inline")],
    Discriminator(_dtype_config_ref_kind),
]


class SequentialFuser(_Strict):
    """A fuser that returns ``sequential(m1, m2[, m3])``, like torch's ``_sequential_wrapper2``."""

    sequential: Name


def _fuser_kind(value: Any) -> str:
    return "name" if isinstance(value, str) else "sequential"


FuserMethod = Annotated[
    Annotated[Name, Tag("name")] | Annotated[SequentialFuser, Tag("sequential")],
    Discriminator(_fuser_kind),
]

_COMPLEX_MARKER = "x-bespec-complex-pattern"

ComplexPattern = Annotated[
    Any,
    Field(
        description="torch's legacy reversed nested pattern: a name, or a list whose first item "
        "is the last op and whose other items are its argument patterns.",
        json_schema_extra={_COMPLEX_MARKER: True},
    ),
]


def _simple_pattern_kind(value: Any) -> str:
    return "name" if isinstance(value, str) else "sequence"


SimplePattern = Annotated[
    Annotated[Name, Tag("name")]
    | Annotated[list[Name], Field(min_length=2, max_length=3), Tag("sequence")],
    Discriminator(_simple_pattern_kind),
]


#: How each kind of field is typed in the format (the fields themselves: :mod:`.fields`).
_KIND_TYPES: dict[FieldKind, Any] = {
    FieldKind.PATTERN: SimplePattern | None,
    FieldKind.COMPLEX_PATTERN: ComplexPattern | None,
    FieldKind.OBSERVATION_TYPE: ObservationTypeName | None,
    FieldKind.DTYPE_CONFIGS: list[DTypeConfigRef],
    FieldKind.MODULE: Name | None,
    FieldKind.FUSED_MODULE: Name | None,
    FieldKind.FUSER: FuserMethod | None,
    FieldKind.FUNCTION: Name | None,
    FieldKind.OBSERVATION_TYPE_MAP: (
        dict[Annotated[int, Strict(False)], ObservationTypeName] | None
    ),
    FieldKind.INDEX_MAP: dict[str, int] | None,
}


def _pattern_field(spec: PatternField) -> tuple[Any, Any]:
    """(annotation, pydantic Field) of one row of the field table."""
    extra: dict[str, Any] = {"description": spec.description} if spec.description else {}
    if spec.kind is FieldKind.DTYPE_CONFIGS:
        return _KIND_TYPES[spec.kind], Field(default_factory=list, **extra)
    return _KIND_TYPES[spec.kind], Field(None, **extra)


_PatternFields = create_model(
    "_PatternFields",
    __base__=_Strict,
    **{spec.key: _pattern_field(spec) for spec in PATTERN_FIELDS},  # type: ignore[call-overload]
)

_OBSERVATION_TYPE_KEYS = tuple(f.key for f in fields_of(FieldKind.OBSERVATION_TYPE))
_OBSERVATION_MAP_KEYS = tuple(f.key for f in fields_of(FieldKind.OBSERVATION_TYPE_MAP))


class PatternModel(_PatternFields):  # type: ignore[misc, valid-type]
    """One supported op pattern (torch's ``BackendPatternConfig``)."""

    @field_validator(*_OBSERVATION_TYPE_KEYS)
    @classmethod
    def _observation_type(cls, value: str | None) -> str | None:
        return None if value is None else check_observation_type(value)

    @field_validator(*_OBSERVATION_MAP_KEYS)
    @classmethod
    def _observation_types(cls, value: dict[int, str] | None) -> dict[int, str] | None:
        if value is None:
            return None
        return {k: check_observation_type(v) for k, v in value.items()}

    @model_validator(mode="after")
    def _one_pattern(self) -> PatternModel:
        has_simple = self.pattern is not None
        has_complex = self.pattern_complex_format is not None
        if has_simple == has_complex:
            raise PydanticCustomError(
                codes.ONE_PATTERN_FORM,
                "exactly one of 'pattern' and 'pattern_complex_format' is required"
                + (", not both" if has_simple else ""),
                {},
            )
        return self


def check_observation_type(value: str) -> str:
    lowered = value.lower()
    if lowered not in OBSERVATION_TYPES:
        raise PydanticCustomError(
            codes.UNKNOWN_OBSERVATION_TYPE,
            "unknown observation type '{value}'",
            {"value": value, "choices": OBSERVATION_TYPES},
        )
    return lowered


PatternRef = Annotated[
    Annotated[Name, Tag("name")]
    | Annotated[list[Name], Field(min_length=2, max_length=3), Tag("sequence")],
    Discriminator(_simple_pattern_kind),
]


class SpecModel(_Strict):
    """A backend spec file, version 1."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        frozen=True,
        title="bespec backend spec",
        json_schema_extra={"patternProperties": {"^x-": {}}},
    )

    spec_version: Literal[1] = Field(1, description="The format version; only 1 exists.")
    name: str = Field(description="BackendConfig.name", min_length=1)
    extends: str | None = Field(
        None,
        description="A built-in torch backend (native, fbgemm, qnnpack, x86, onednn, executorch, "
        "tensorrt) or a path relative to this file.",
    )
    remove: list[PatternRef] = Field(
        default_factory=list, description="Patterns taken out of what 'extends' brought."
    )
    dtype_configs: dict[str, DTypeConfigModel] = Field(
        default_factory=dict, description="Named, reusable DTypeConfigs."
    )
    patterns: list[PatternModel] = Field(
        default_factory=list, description="BackendPatternConfigs, in order."
    )


def json_schema() -> dict[str, Any]:
    """The JSON Schema of the format, for editors (yaml-language-server) and CI validators."""
    schema = _link_complex_patterns(SpecModel.model_json_schema())
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://bespec.dev/schemas/backend-spec.schema.json"
    schema.setdefault("$defs", {})["ComplexPattern"] = {
        "anyOf": [
            {"type": "string"},
            {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/ComplexPattern"}},
        ]
    }
    schema["additionalProperties"] = False
    return schema


def _link_complex_patterns(node: Any) -> Any:
    """pydantic cannot emit a recursive ``Any``: point the marked field at ``$defs``."""
    if isinstance(node, dict):
        if node.pop(_COMPLEX_MARKER, False):
            return {"description": node.get("description", ""), "$ref": "#/$defs/ComplexPattern"}
        return {key: _link_complex_patterns(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_link_complex_patterns(item) for item in node]
    return node
