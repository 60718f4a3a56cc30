"""Stage 2: the spec format as strict pydantic models (and, from them, the JSON Schema).

Models hold names as strings; turning names into torch objects is the resolver's job, so that
schema validation and ``bespec schema`` need no torch. Field names mirror torch's
``BackendPatternConfig`` setters and ``DTypeConfig.from_dict`` keys; the fields of a pattern
entry are not written here but built from the one field table, :mod:`backend_spec.specfile.fields`
(a new torch field is a row there; its kind decides its type here). The descriptions are the
user's documentation: editors show them from the JSON Schema, and the key tables of
``docs/format.md`` are generated from them (``make docs``).
"""

from __future__ import annotations

import math
import sys
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    StringConstraints,
    Tag,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)
from pydantic.json_schema import WithJsonSchema
from pydantic_core import PydanticCustomError
from typing_extensions import TypeAliasType

from backend_spec import codes
from backend_spec.names.dtypes import dtype_range
from backend_spec.specfile.fields import (
    CALIBRATING_OBSERVERS,
    INPUT_SHARING,
    OBSERVER_FIELDS,
    OBSERVER_IN_QAT,
    PATTERN_FIELDS,
    PT2E_PATTERN_FIELDS,
    FieldKind,
    PatternField,
)

_V2 = {"x-since": 2}
_V3 = {"x-since": 3}
_V4 = {"x-since": 4}
_V5 = {"x-since": 5}
_V6 = {"x-since": 6}
_V7 = {"x-since": 7}
_V8 = {"x-since": 8}
_V9 = {"x-since": 9}
_V10 = {"x-since": 10}
_V11 = {"x-since": 11}
_V12 = {"x-since": 12}

#: The most passes a ``transform_for_annotation`` pipeline (version 8) lists.
MAX_PASSES = 16

#: An ATen argument name a ``when`` condition tests (``min_val``), and the most it may test.
ARGUMENT_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,63}(\.shape\.[0-7])?$"
#: What marks a ``when`` condition on a tensor argument's size (version 8: ``weight.shape.1``).
SHAPE_CONDITION = ".shape."
MAX_CONDITIONS = 8
#: The last ``annotation_stage`` (version 8) and ``claim_stage`` (version 10): a quantizer's
#: annotation passes, counted from 0.
MAX_ANNOTATION_STAGE = 63

OBSERVATION_TYPES = (
    "output_use_different_observer_as_input",
    "output_share_observer_with_input",
    "input_output_not_observed",
)

#: The input types torch reads from ``input_type_to_index`` (prepare reads weight and bias;
#: the TensorRT config also names its input).
INPUT_TYPES = ("input", "weight", "bias")


def _not_one_of(code: str, what: str, value: str, choices: tuple[str, ...]) -> Exception:
    """A value outside a closed vocabulary; validate turns ``choices`` into a suggestion."""
    return PydanticCustomError(
        code, f"unknown {what} '{{value}}'", {"value": value, "choices": choices}
    )


def refuse_null(value: Any, info: ValidationInfo) -> Any:
    """A pt2e key set to null: refused where it is written, never read as its default (a
    ``chain_input:`` whose value was lost to a slip of the indentation must not pass
    silently). Leaving the key out is how a file asks for the default."""
    if value is None:
        raise PydanticCustomError(
            codes.NULL_VALUE,
            f"{info.field_name} is null; it takes a value",
            {"hint": f"write a value for {info.field_name}, or leave the key out for its default"},
        )
    return value


def check_observation_type(value: str) -> str:
    lowered = value.lower()
    if lowered not in OBSERVATION_TYPES:
        raise _not_one_of(
            codes.UNKNOWN_OBSERVATION_TYPE, "observation type", value, OBSERVATION_TYPES
        )
    return lowered


def _case_insensitive(word: str) -> str:
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in word)


ObservationTypeName = Annotated[
    str,
    AfterValidator(check_observation_type),
    Field(
        description="How observers are inserted (case-insensitive): "
        + ", ".join(OBSERVATION_TYPES),
        json_schema_extra={
            "pattern": "^(" + "|".join(_case_insensitive(t) for t in OBSERVATION_TYPES) + ")$"
        },
    ),
]


def _integral(value: Any) -> Any:
    """Integral floats (``0.0``, TOML's ``255.0``) count as integers in every integer field,
    as JSON Schema's ``integer`` does; other floats stay floats and are refused."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


#: An integer field: ints, and floats with no fractional part; never bools or strings.
Integer = Annotated[int, BeforeValidator(_integral)]


def check_input_type(value: str) -> str:
    if value not in INPUT_TYPES:
        raise _not_one_of(codes.UNKNOWN_INPUT_TYPE, "input type", value, INPUT_TYPES)
    return value


InputType = Annotated[str, AfterValidator(check_input_type)]

#: ``num_tensor_args_to_observation_type`` keys: an integer, or its decimal text (TOML and
#: JSON keys are strings).
TENSOR_ARGS_KEY = "^[0-9]+$"


def _tensor_args_count(value: Any) -> Any:
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    return value


TensorArgCount = Annotated[int, BeforeValidator(_tensor_args_count), Field(ge=0)]

Name = Annotated[
    str,
    Field(
        min_length=1,
        max_length=512,
        description="A torch object: an alias name (nn.Conv2d, F.relu, nni.ConvReLU2d), a fully "
        "qualified dotted name, method:NAME, MatchAllNode, or a bare built-in fuser name.",
    ),
]

#: A real number (ints are accepted and widened; bools and strings are not).
Number = float


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


#: Bounds that must be in order (low <= high), checked once both are valid.
_ORDERED_PAIRS = (
    ("quant_min_lower_bound", "quant_max_upper_bound"),
    ("scale_min_lower_bound", "scale_max_upper_bound"),
)


#: A mapping's ``fake_quant``: the QAT fake-quantize kinds (version 2), or (version 10) the
#: observer itself.
FakeQuantKind = Literal["fused_moving_avg", "fake_quantize", "learnable", "observer"]


class DTypeWithConstraintsModel(_Strict):
    """A dtype plus the constraints a QConfig must meet (torch's ``DTypeWithConstraints``)."""

    dtype: Annotated[str, Field(description="A torch.dtype attribute name: quint8, qint8, ...")]
    quant_min_lower_bound: Integer | None = Field(None, description="Lowest allowed quant_min.")
    quant_max_upper_bound: Integer | None = Field(None, description="Highest allowed quant_max.")
    scale_min_lower_bound: Number | None = Field(
        None, description="Lowest allowed scale (the observer's eps)."
    )
    scale_max_upper_bound: Number | None = Field(None, description="Highest allowed scale.")
    scale_exact_match: Number | None = Field(
        None, description="Fixed scale (FixedQParamsObserver) for ops such as sigmoid."
    )
    zero_point_exact_match: Integer | None = Field(
        None, description="Fixed zero point, with scale_exact_match."
    )
    observer: Literal["minmax", "moving_average_minmax", "histogram", "placeholder"] | None = Field(
        None,
        description="Observer kind (version 2; default minmax).",
        json_schema_extra=_V2,
    )
    qscheme: Literal["affine", "symmetric"] | None = Field(
        None,
        description="Version 2; default: affine for activations, symmetric for signed weights.",
        json_schema_extra=_V2,
    )
    granularity: Literal["per_tensor", "per_channel"] | None = Field(
        None, description="Version 2; default per_tensor (weights only).", json_schema_extra=_V2
    )
    ch_axis: Annotated[int, Field(ge=0, le=7)] | None = Field(
        None,
        description="Channel axis of per_channel weights (version 2; default 0).",
        json_schema_extra=_V2,
    )
    reduce_range: bool | None = Field(
        None,
        description="Halve the quantization range (version 2; default false, true for "
        "engine=x86/fbgemm activations).",
        json_schema_extra=_V2,
    )
    fake_quant: FakeQuantKind | None = Field(
        None,
        description="QAT fake-quantize kind (version 2; default fake_quantize), or (version 10) "
        "observer: QAT observes with the observer itself, no fake-quantize (torchao's "
        "EmbeddingQuantizer's weight beside a QAT config).",
        json_schema_extra=_V2,
    )
    ptq_fake_quant: bool | None = Field(
        None,
        description="PTQ observes with this mapping's fake-quantize (fake_quant) too, as a "
        "config of fake-quantizes given to prepare_pt2e does (version 6; default false).",
        json_schema_extra=_V6,
    )
    customized_qrange: bool | None = Field(
        None,
        description="false: the observer is built without quant_min/quant_max, as a qspec that "
        "leaves them unset (torch's has_customized_qrange false: a symmetric uint8 zero point "
        "is then 128, not (quant_min + quant_max) // 2 = 127); version 8, default true.",
        json_schema_extra=_V8,
    )
    averaging_constant: Annotated[float, Field(gt=0, le=1)] | None = Field(
        None,
        description="The moving-average observer's averaging_constant: how much of each batch's "
        "min/max enters the running range (1: the last batch's only, as a dynamic QAT "
        "fake-quantize observes); for observer moving_average_minmax or fake_quant "
        "fused_moving_avg; version 9, default torch's 0.01.",
        json_schema_extra=_V9,
    )

    @field_validator("dtype")
    @classmethod
    def _known_dtype(cls, value: str) -> str:
        return check_dtype_name(value)

    @field_validator("scale_min_lower_bound", "scale_max_upper_bound", "scale_exact_match")
    @classmethod
    def _positive_scale(cls, value: float | None, info: ValidationInfo) -> float | None:
        """Checked per field (not in the model check) so that a bad scale does not hide the
        other fields' mistakes: each field that is wrong gets its own diagnostic."""
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise PydanticCustomError(
                codes.NONPOSITIVE_SCALE,
                "{field} must be a positive finite number, got {value}",
                {"field": info.field_name, "value": value},
            )
        return value

    @field_validator("quant_min_lower_bound", "quant_max_upper_bound", "zero_point_exact_match")
    @classmethod
    def _inside_dtype_range(cls, value: int | None, info: ValidationInfo) -> int | None:
        """Per field, like ``_positive_scale``; ``dtype`` is declared first, so it is in
        ``info.data`` whenever it is valid (an unknown dtype is reported on its own)."""
        dtype = info.data.get("dtype")
        bounds = dtype_range(dtype) if isinstance(dtype, str) else None
        if value is None or bounds is None:
            return value
        lowest, highest = bounds
        if not lowest <= value <= highest:
            raise PydanticCustomError(
                codes.OUT_OF_RANGE,
                "{field} {value} is outside the range of {dtype} [{lowest}, {highest}]",
                {
                    "field": info.field_name,
                    "value": value,
                    "dtype": dtype,
                    "lowest": lowest,
                    "highest": highest,
                },
            )
        return value

    def since(self) -> list[tuple[tuple[str | int, ...], int]]:
        """Values (not keys) that need a newer format: the version 10 ``fake_quant`` value."""
        return [(("fake_quant",), 10)] if self.fake_quant == OBSERVER_IN_QAT else []

    @model_validator(mode="after")
    def _ordered_bounds(self) -> DTypeWithConstraintsModel:
        """The cross-field order checks: they run only once every field is valid."""
        for low_key, high_key in _ORDERED_PAIRS:
            low, high = getattr(self, low_key), getattr(self, high_key)
            if low is not None and high is not None and low > high:
                raise PydanticCustomError(
                    codes.INVERTED_BOUNDS,
                    f"{low_key} {{low}} is above {high_key} {{high}}",
                    {"low": low, "high": high, "label": high_key},
                )
        return self


def check_dtype_name(value: str) -> str:
    from backend_spec.names.dtypes import dtype_names

    if value not in dtype_names():
        raise PydanticCustomError(
            codes.UNKNOWN_DTYPE, "unknown dtype '{value}'", {"value": value, "namespace": "dtype"}
        )
    return value


def _kind(value: Any, container: type, tag: str) -> str | None:
    """A union's branch: ``name`` for a string, ``tag`` for a ``container``, else None (one
    "expected X or Y" error rather than one error per branch)."""
    if isinstance(value, str):
        return "name"
    return tag if isinstance(value, container) else None


def _dtype_kind(value: Any) -> str | None:
    return _kind(value, dict, "constrained")


DTypeName = Annotated[str, Field(description="A torch.dtype attribute name.")]

DTypeSpec = Annotated[
    Annotated[DTypeName, Tag("name")] | Annotated[DTypeWithConstraintsModel, Tag("constrained")],
    Discriminator(_dtype_kind),
]


class DTypeConfigModel(_Strict):
    """One supported combination of dtypes (torch's ``DTypeConfig``)."""

    input_dtype: DTypeSpec | None = Field(
        None, description="The activation entering the op: a dtype, or a dtype with constraints."
    )
    output_dtype: DTypeSpec | None = Field(
        None, description="The activation the op produces: a dtype, or a dtype with constraints."
    )
    weight_dtype: DTypeSpec | None = Field(
        None, description="The weight of a weighted op: a dtype, or a dtype with constraints."
    )
    bias_dtype: DTypeSpec | None = Field(
        None, description="The bias: a dtype only (torch has no bias constraints)."
    )
    is_dynamic: bool | None = Field(
        None, description="Dynamic quantization: activations quantized at run time."
    )

    @field_validator("input_dtype", "output_dtype", "weight_dtype", "bias_dtype")
    @classmethod
    def _dtype_name(cls, value: Any) -> Any:
        return check_dtype_name(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _dynamic_moving_average(self) -> DTypeConfigModel:
        for mapping in (self.input_dtype, self.output_dtype):
            constant = getattr(mapping, "averaging_constant", None)
            moving = getattr(mapping, "observer", None) == "moving_average_minmax"
            if self.is_dynamic and moving and constant not in (None, 1):
                raise PydanticCustomError(
                    codes.DYNAMIC_AVERAGING_CONSTANT,
                    "a dynamic moving-average observer takes averaging_constant 1, not "
                    "{constant}: torch refuses dynamic quantization with any other",
                    {"constant": constant},
                )
        return self

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


def dynamic_output(is_dynamic: Any, output: Any) -> bool:
    """Whether a dtype config (its ``is_dynamic`` and ``output_dtype`` as written: a name or a
    mapping with ``dtype``) is dynamic with a quantized output (version 8)."""
    name = getattr(output, "dtype", None) or (
        output.get("dtype") if isinstance(output, dict) else output
    )
    return bool(is_dynamic) and isinstance(name, str) and name not in _FLOAT_NAMES


def dynamic_observer(is_dynamic: Any, *activations: Any) -> bool:
    """Whether a dynamic dtype config names a calibrating observer for an activation (its
    ``input_dtype`` / ``output_dtype`` as written): version 9 gives it its meaning (what a
    dynamic QAT fake-quantize wraps); older files' activations keep a placeholder."""

    def observer(mapping: Any) -> Any:
        return (
            mapping.get("observer")
            if isinstance(mapping, dict)
            else getattr(mapping, "observer", None)
        )

    return bool(is_dynamic) and any(
        observer(mapping) in CALIBRATING_OBSERVERS for mapping in activations
    )


def own_output(is_dynamic: Any, input_dtype: Any, output_dtype: Any) -> bool:
    """Whether a static dtype config (its mappings as written) sets observer options on both
    its input and its output, different ones, for the same dtype: version 9 observes each
    edge with its own in pt2e (older files take one set for both, as FX's one-observer
    QConfig does; a mapping that sets none takes the other's in every version)."""
    mappings = [{"dtype": m} if isinstance(m, str) else m for m in (input_dtype, output_dtype)]
    if is_dynamic or not all(isinstance(m, dict) for m in mappings):
        return False
    inp, out = mappings
    if inp.get("dtype") != out.get("dtype"):
        return False
    options = [{key: m[key] for key in OBSERVER_FIELDS if m.get(key) is not None} for m in mappings]
    return all(options) and options[0] != options[1]


#: Output dtype names that are no quantized dtype.
_FLOAT_NAMES = frozenset({"float", "float32", "float16", "half", "bfloat16", "float64", "double"})


def _dtype_config_ref_kind(value: Any) -> str | None:
    return _kind(value, dict, "inline")


DTypeConfigRef = Annotated[
    Annotated[
        Annotated[str, Field(description="The name of a top-level dtype config.")], Tag("name")
    ]
    | Annotated[DTypeConfigModel, Tag("inline")],
    Discriminator(_dtype_config_ref_kind),
]


#: The marker of a field (or form) that exists from that format version on.
SINCE = "x-since"
V2: dict[str, Any] = {SINCE: 2}

#: The keys of a function form; exactly one of them is given.
FORM_KEYS: tuple[str, ...] = ("sequential", "reverse_sequential", "reverse2", "reverse3", "call")


def _function_ref_kind(value: Any) -> str | None:
    return _kind(value, dict, "form")


FunctionRef = Annotated[
    Annotated[Name, Tag("name")] | Annotated["FunctionForm", Tag("form")],
    Discriminator(_function_ref_kind),
]


class LiteralArg(_Strict):
    """A string argument of a factory (a bare string in ``args`` is a name)."""

    literal: str = Field(max_length=4096, json_schema_extra=V2)


def _factory_arg_kind(value: Any) -> str | None:
    if isinstance(value, bool):
        return "bool"
    for kind, tag in ((int, "int"), (float, "float"), (str, "name"), (list, "tuple")):
        if isinstance(value, kind):
            return tag
    if isinstance(value, dict):
        return "literal" if "literal" in value else "form"
    return None


FactoryArg = TypeAliasType(
    "FactoryArg",
    Annotated[
        Annotated[Name, Tag("name")]
        | Annotated[bool, Tag("bool")]
        | Annotated[int, Tag("int")]
        | Annotated[float, Tag("float")]
        | Annotated[LiteralArg, Tag("literal")]
        | Annotated[list["FactoryArg"], Field(max_length=64), Tag("tuple")]
        | Annotated["FunctionForm", Tag("form")],
        Discriminator(_factory_arg_kind),
    ],
)


class FunctionForm(_Strict):
    """A fuser or getter given by how it is built rather than by its name.

    ``sequential``: a fuser returning ``Cls(m1, m2[, m3])`` (torch's ``_sequential_wrapper2``);
    ``reverse_sequential``: torch 1.13's ``reverse_sequential_wrapper2`` (``Cls(m2, m1)``);
    ``reverse2``/``reverse3``: torch's ``_reverse2``/``_reverse3`` around another fuser;
    ``call`` (with ``args``/``kwargs``): the closure a factory function returns.
    """

    sequential: Name | None = Field(None, description="Fused module class: Cls(m1, m2[, m3]).")
    reverse_sequential: Name | None = Field(
        None,
        description="Fused module class: Cls(m2, m1) (torch 1.13's reverse_sequential_wrapper2).",
        json_schema_extra=V2,
    )
    reverse2: FunctionRef | None = Field(
        None, description="torch's _reverse2 around a fuser.", json_schema_extra=V2
    )
    reverse3: FunctionRef | None = Field(
        None, description="torch's _reverse3 around a fuser.", json_schema_extra=V2
    )
    call: Name | None = Field(
        None,
        description="A factory function (in torch.ao.quantization or an allowed module) whose "
        "result is the fuser or getter.",
        json_schema_extra=V2,
    )
    args: list[FactoryArg] | None = Field(
        None,
        max_length=64,
        description="Positional arguments of 'call': names, numbers, booleans, "
        "{literal: text}, lists (tuples) and nested forms.",
        json_schema_extra=V2,
    )
    kwargs: dict[str, FactoryArg] | None = Field(
        None, max_length=64, description="Keyword arguments of 'call'.", json_schema_extra=V2
    )

    @model_validator(mode="after")
    def _one_form(self) -> FunctionForm:
        given = [key for key in FORM_KEYS if getattr(self, key) is not None]
        if len(given) != 1:
            raise PydanticCustomError(
                codes.INVALID_VALUE,
                "a function form gives exactly one of {keys}"
                + (f", not {' and '.join(given)}" if given else ""),
                {
                    "keys": ", ".join(FORM_KEYS),
                    "hint": "e.g. {sequential: nni.ConvReLU2d} or "
                    "{call: factory, args: [...]}; split two forms into two entries",
                },
            )
        if given != ["call"] and (self.args is not None or self.kwargs is not None):
            raise PydanticCustomError(
                codes.INVALID_VALUE,
                "'args' and 'kwargs' go with 'call' only, not with '{form}'",
                {
                    "form": given[0],
                    "hint": "drop args/kwargs, or write {call: factory, args: [...]}",
                },
            )
        return self

    @property
    def form(self) -> str:
        """Which form this is: one of :data:`FORM_KEYS`."""
        return next(key for key in FORM_KEYS if getattr(self, key) is not None)


_COMPLEX_MARKER = "x-bespec-complex-pattern"

ComplexPattern = Annotated[
    Any,
    Field(
        description="torch's legacy reversed nested pattern: a name, or a list whose first item "
        "is the last op and whose other items are its argument patterns.",
        json_schema_extra={_COMPLEX_MARKER: True},
    ),
]


AtenName = Annotated[
    str,
    Field(
        pattern=r"^aten\.[A-Za-z0-9_]+\.[A-Za-z0-9_]+$",
        max_length=128,
        description="An ATen overload: aten.<op>.<overload>.",
    ),
]


def _aten_ops_kind(value: Any) -> str | None:
    return _kind(value, list, "sequence")


AtenOps = Annotated[
    Annotated[AtenName, Tag("name")]
    | Annotated[list[AtenName], Field(min_length=1, max_length=8), Tag("sequence")],
    Discriminator(_aten_ops_kind),
]


def _simple_pattern_kind(value: Any) -> str | None:
    return _kind(value, list, "sequence")


ForwardOp = Annotated[
    Annotated[Name, Tag("name")]
    | Annotated[list[ComplexPattern], Field(min_length=1), Tag("sequence")],
    Discriminator(_simple_pattern_kind),
]

SimplePattern = Annotated[
    Annotated[Name, Tag("name")]
    | Annotated[list[ForwardOp], Field(min_length=2, max_length=3), Tag("sequence")],
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
    FieldKind.FUSER: FunctionRef | None,
    FieldKind.FUNCTION: FunctionRef | None,
    FieldKind.OBSERVATION_TYPE_MAP: dict[TensorArgCount, ObservationTypeName] | None,
    FieldKind.INDEX_MAP: dict[InputType, Integer] | None,
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


def _condition_kind(value: Any) -> str | None:
    """The tag of a ``when`` value: one error for a wrong one, not one per type it may be."""
    for kind, tag in ((bool, "bool"), (int, "int"), (float, "float"), (str, "str")):
        if isinstance(value, kind):
            return tag
    return None


#: A ``when`` value (version 7): what an ATen argument may be compared with.
ConditionValue = Annotated[
    Annotated[bool, Tag("bool")]
    | Annotated[int, Tag("int")]
    | Annotated[float, Tag("float")]
    | Annotated[str, Field(max_length=64), Tag("str")],
    Discriminator(_condition_kind),
    # One JSON type list: a oneOf of integer and number would refuse every integer.
    WithJsonSchema({"type": ["boolean", "number", "string"], "maxLength": 64}),
]


class PatternModel(_PatternFields):  # type: ignore[misc, valid-type]
    """One supported op pattern (torch's ``BackendPatternConfig``)."""

    def since(self) -> list[tuple[tuple[str | int, ...], int]]:
        """Values (not keys) that need a newer format: nested items in a forward pattern, the
        version 3 ``quantize`` value."""
        found = [(("pattern", i), 2) for i in nested_forward_items(self.pattern)]
        if self.quantize == "if_all_inputs_quantized":
            found.append((("quantize",), 3))
        if self.consumers == "quantizable":
            found.append((("consumers",), 8))
        found += [(("when", key), 8) for key in self.when or () if SHAPE_CONDITION in key]
        found += [
            (("pattern_complex_format", *where), 3)
            for where in literal_items(self.pattern_complex_format)
        ]
        return found

    aten: list[Annotated[list[AtenOps], Field(min_length=1, max_length=8)]] = Field(  # type: ignore[assignment]
        None,
        description="pt2e (version 2): extra ATen chains for this entry, in forward order; each "
        "op is an ATen overload or a list of alternatives ([aten.conv2d.default, "
        "aten.conv2d.padding]).",
        json_schema_extra=_V2,
        max_length=16,
    )
    quantize: Literal["always", "if_input_quantized", "if_all_inputs_quantized"] = Field(  # type: ignore[assignment]  # None: unset; null is refused
        None,
        description="pt2e (version 2): quantize always (default), only when the first input "
        "is already quantized, or (version 3) only when every input is (pooling, cat, flatten "
        "in X86InductorQuantizer's recipe).",
        json_schema_extra=_V2,
    )
    output: Literal["always", "never", "if_consumer_quantized"] = Field(  # type: ignore[assignment]  # None: unset; null is refused
        None,
        description="pt2e (version 3): observe the pattern's output always (default), never, or "
        "if_consumer_quantized: not here, but it counts as quantized for consumers that "
        "quantize their input (X86's int8 in, fp32 out).",
        json_schema_extra=_V3,
    )
    extra_inputs: Literal["float", "quantized"] = Field(  # type: ignore[assignment]  # None: unset; null is refused
        None,
        description="pt2e (version 3): the inputs of the pattern's later ops that are not the "
        "previous op (the other input of conv + add): float (default) or quantized.",
        json_schema_extra=_V3,
    )
    chain_input: Literal["first", "any"] = Field(  # type: ignore[assignment]  # None: unset; null is refused
        None,
        description="pt2e (version 3): each op reads the previous one as its first argument "
        "(default), or as any argument (x + conv(y)).",
        json_schema_extra=_V3,
    )
    input_shapes: Literal["any", "equal"] = Field(  # type: ignore[assignment]  # None: unset; null is refused
        None,
        description="pt2e (version 3): any (default), or equal: the first op's inputs must be "
        "tensors of one shape (no scalar, no broadcast), else the entry does not match.",
        json_schema_extra=_V3,
    )
    scalars: Literal["keep", "tensor"] = Field(  # type: ignore[assignment]  # None: unset; null is refused
        None,
        description="pt2e (version 3): number arguments of the first op stay numbers (default) "
        "or become constant tensors that are quantized like any input (XNNPACK's x * 2.0).",
        json_schema_extra=_V3,
    )
    consumers: Literal["any", "quantizing", "quantizable"] = Field(  # type: ignore[assignment]  # None: unset; null is refused
        None,
        description="pt2e (version 3): quantize whatever reads the output (default), or only "
        "when a consumer is itself quantized by some entry (X86's flatten before a linear), "
        "or (version 8) quantizable: only when a consumer's op is the first op of some entry, "
        "one that leaves it float included (X86's flatten before a linear it leaves float: "
        "its test is the consumer's op type).",
        json_schema_extra=_V3,
    )
    bias_qspec: Literal["float", "derived", "derived_narrow"] = Field(  # type: ignore[assignment]  # None: unset; null is refused
        None,
        description="pt2e (version 4): the first op's bias stays float (default) or is derived: "
        "int32, scale = input scale x weight scale, zero point 0, per channel when the weight "
        "is (the int32 bias of integer kernels); derived_narrow leaves out int32's lowest value "
        "(TOSA's symmetric range).",
        json_schema_extra=_V4,
    )
    input_observer: Literal["own", "upstream", "upstream_only"] = Field(  # type: ignore[assignment]  # None: unset; null is refused
        None,
        description="pt2e (version 5): the first input's own observer (default), or upstream: "
        "read from an op whose output is not observed, it shares the observer of the nearest "
        "observed op up the chain of first arguments (EnnQuantizer's conv and linear); an "
        "output_share_observer_with_input entry with one input joins that op's group with its "
        "output instead, its input left unobserved (EnnQuantizer's view ops); upstream_only: "
        "never an observer of its own on that input, only a producer's or, through an edge "
        "from it, the upstream op's (EnnQuantizer's softmax).",
        json_schema_extra=_V5,
    )
    producers: Literal["split", "join"] = Field(  # type: ignore[assignment]  # None: unset; null is refused
        None,
        description="pt2e (version 5), for output_share_observer_with_input entries: split "
        "(default, FX: the producers of the other inputs lose their own observer groups) or "
        "join: they keep them and all are united into one (torchao's SharedQuantizationSpec, "
        "as hand-written quantizers' cat and add).",
        json_schema_extra=_V5,
    )

    when: dict[  # type: ignore[assignment]  # None: unset; null is refused
        Annotated[str, StringConstraints(pattern=ARGUMENT_NAME)], ConditionValue
    ] = Field(
        None,
        description="pt2e (version 7): argument conditions, ATen argument name -> value "
        "({min_val: 0.0}): the entry matches only where every op of its chain that has the "
        "argument was called with that value (a default counts), and some op has it "
        "(EnnQuantizer fuses conv + hardtanh only when min_val == 0); (version 8) "
        "ARGUMENT.shape.N -> an integer: the size of a tensor argument along dimension N "
        "({weight.shape.1: 1}: one input channel per group, the convs dynamic XNNPACK leaves "
        "float).",
        json_schema_extra={**_V7, "additionalProperties": False},
        min_length=1,
        max_length=MAX_CONDITIONS,
    )

    annotation_stage: int = Field(  # type: ignore[assignment]  # None: unset; null is refused
        None,
        description="pt2e (version 8): the annotation pass the entry belongs to, 0 (default) "
        "to 63: entries annotate stage by stage, in graph order within a stage, so a "
        "condition on a producer (quantize: if_input_quantized, input_observer: upstream_only) "
        "sees only producers annotated in an earlier stage or earlier in graph order in this "
        "one (LiteRT's annotators run op by op, its pool after conv and linear only).",
        json_schema_extra=_V8,
        ge=0,
        le=MAX_ANNOTATION_STAGE,
        strict=True,
    )

    claim_stage: int = Field(  # type: ignore[assignment]  # None: unset; null is refused
        None,
        description="pt2e (version 10): the pass in which the entry claims its nodes, 0 "
        "(default) to 63: entries claim pass by pass, lowest first, each pass longest chain "
        "first then in spec order, so an entry of an earlier pass takes nodes a longer entry of "
        "a later pass would have matched (X86InductorQuantizer annotates a per-type config, "
        "Linear + add, before the global one's conv + BatchNorm + add).",
        json_schema_extra=_V10,
        ge=0,
        le=MAX_ANNOTATION_STAGE,
        strict=True,
    )

    qconfig: Literal["first_op", "own"] = Field(  # type: ignore[assignment]  # None: unset; null is refused
        None,
        description="pt2e (version 11): whose QConfig quantizes the entry's nodes: first_op "
        "(default, FX: the QConfig of its first op, which that op's own entry decides, so a "
        "chain whose dtype configs it does not satisfy stays float) or own: the QConfig of the "
        "entry's own first usable dtype config (a static XNNPACK composed after a dynamic one "
        "quantizes conv + relu statically and a lone conv dynamically).",
        json_schema_extra=_V11,
    )

    input_sharing: Literal["spec", "dtype", "qspec"] = Field(  # type: ignore[assignment]  # None: unset; null is refused
        None,
        description="pt2e (version 12): when this entry's inputs reuse the observer of their "
        "producer's output: spec (default: the spec-wide input_sharing), dtype (whenever "
        "their dtypes agree) or qspec (only when both are the same qspec: an input after an "
        "output observed otherwise is observed again). Core ML's conv and linear read an "
        "annotated producer's own qspec, its add and mul their own.",
        json_schema_extra=_V12,
    )

    _not_null = field_validator(*PT2E_PATTERN_FIELDS, mode="before")(refuse_null)

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


def literal_items(pattern: Any, path: tuple[int, ...] = ()) -> list[tuple[int, ...]]:
    """Where a complex-format pattern holds an integer literal argument (version 3):
    ``[operator.getitem, aten.max_pool2d_with_indices.default, 0]``."""
    if isinstance(pattern, list):
        return [
            where for i, item in enumerate(pattern) for where in literal_items(item, (*path, i))
        ]
    return [path] if isinstance(pattern, int) and not isinstance(pattern, bool) else []


def nested_forward_items(pattern: Any) -> list[int]:
    """Indices of the items of a forward pattern that are nested lists (version 2)."""
    if not isinstance(pattern, list):
        return []
    return [i for i, op in enumerate(pattern) if isinstance(op, list)]


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

    spec_version: Literal[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12] = Field(
        1,
        description="The format version: 1 (default), 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 or 12 for the "
        "keys marked x-since 2 / 3 / 4 / 5 / 6 / 7 / 8 / 9 / 10 / 11 / 12.",
    )

    @field_validator("spec_version", mode="before")
    @classmethod
    def _version_not_bool(cls, value: Any) -> Any:
        # ``true == 1`` in Python; JSON Schema's ``const: 1`` refuses it, and so do we.
        if isinstance(value, bool):
            raise PydanticCustomError("literal_error", "spec_version must be a number", {})
        return value

    name: str = Field(description="The backend's name (BackendConfig.name).", min_length=1)
    extends: str | None = Field(
        None,
        description="A built-in torch backend (native, fbgemm, qnnpack, x86, onednn, executorch, "
        "tensorrt) or a path relative to this file.",
        min_length=1,  # so the schema, too, refuses an empty base
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
    graph_inputs: str = Field(  # type: ignore[assignment]
        None,
        min_length=1,
        description="pt2e (version 5): the name of a top-level dtype config whose activation "
        "observer every float graph input (model input) gets, whether or not an entry "
        "quantizes its consumers (executorch's EnnQuantizer); absent: graph inputs are "
        "observed only where an entry quantizes the op that reads them.",
        json_schema_extra=_V5,
    )
    input_sharing: Literal[INPUT_SHARING] = Field(  # type: ignore[valid-type, assignment]
        None,
        description="pt2e (version 5): when an input reuses the observer of its producer's "
        "output. 'dtype' (the default, as FX does): whenever their dtypes agree. 'qspec' (as "
        "torchao does for a hand-written Quantizer): only when both are the same qspec; an "
        "input after an output with other qparams (fixed ones, another observer) is observed "
        "again.",
        json_schema_extra=_V5,
    )

    transform_for_annotation: list[FunctionRef] = Field(  # type: ignore[assignment]
        None,
        min_length=1,
        max_length=MAX_PASSES,
        description="pt2e (version 8): the graph passes the quantizer runs before annotating, "
        "in order: each a function of an allowed module that takes the exported GraphModule "
        "and returns it (a name, or {call: factory, args: [...]} whose result is that "
        "function); entries then match the graph the passes produce (Arm's TOSA quantizer "
        "decomposes ops first).",
        json_schema_extra=_V8,
    )

    _not_null = field_validator(
        "graph_inputs", "input_sharing", "transform_for_annotation", mode="before"
    )(refuse_null)

    # Error recovery (set by spec.validate): the entries that validated keep their index in
    # the file, and what was set aside is remembered so that no follow-up error is reported
    # for it (a pattern naming a dtype config that failed validation, 'remove' whose
    # 'extends' failed...).
    _pattern_indices: tuple[int, ...] | None = PrivateAttr(None)
    _set_aside: frozenset[tuple[str | int, ...]] = PrivateAttr(frozenset())

    def numbered_patterns(self) -> list[tuple[int, PatternModel]]:
        """Each pattern entry with its index in the file (entries that failed are skipped)."""
        if self._pattern_indices is None:
            return list(enumerate(self.patterns))
        return list(zip(self._pattern_indices, self.patterns, strict=True))

    def set_aside(self, path: tuple[str | int, ...]) -> bool:
        """Whether the value at ``path`` (``("dtype_configs", name)``, ``("extends",)``) was
        written but failed validation, so references to it must not be reported again."""
        return path in self._set_aside


FunctionForm.model_rebuild()
PatternModel.model_rebuild()
SpecModel.model_rebuild()


def _since(info: Any) -> int:
    """The format version a field exists from (its ``x-since`` marker; 1 when unmarked)."""
    extra = info.json_schema_extra
    return extra.get(SINCE, 1) if isinstance(extra, dict) else 1


def version_uses(
    node: Any, path: tuple[str | int, ...] = ()
) -> list[tuple[tuple[str | int, ...], int]]:
    """Where a validated spec (or part of it) uses something of format version 2 or later,
    with that version.

    Generic over the models: a field declared with ``json_schema_extra={"x-since": N}`` that
    is set, anywhere in the tree, plus the values a model's ``since()`` reports. Scalars hold
    nothing further, so the walk does not descend into them (most of a spec's values).
    """
    found: list[tuple[tuple[str | int, ...], int]] = []
    if isinstance(node, BaseModel):
        for name, info in type(node).model_fields.items():
            value = getattr(node, name)
            if value is None:
                continue
            if _since(info) >= 2 and name in node.model_fields_set:
                found.append(((*path, name), _since(info)))
            elif not isinstance(value, _SCALARS):
                found += version_uses(value, (*path, name))
        since = getattr(node, "since", None)
        if callable(since):
            found += [((*path, *where), version) for where, version in since() if version >= 2]
    elif isinstance(node, dict):
        for key, value in node.items():
            if not isinstance(value, _SCALARS):
                found += version_uses(value, (*path, key))
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            if not isinstance(value, _SCALARS):
                found += version_uses(value, (*path, i))
    return found


_SCALARS = (str, int, float)


def field_since(model: type[BaseModel], name: str) -> int:
    """The format version that added field ``name`` of ``model`` (a key of one model, where
    :func:`keys_since` merges the models: ``input_sharing`` is version 5 on the spec and
    version 12 on a pattern entry)."""
    return _since(model.model_fields[name])


def keys_since() -> dict[str, int]:
    """Every key that some model of the format declares as version 2 or later, with it."""
    keys: dict[str, int] = {}
    pending: list[type[BaseModel]] = [_Strict]
    while pending:
        model = pending.pop()
        pending += model.__subclasses__()
        for name, info in model.model_fields.items():
            if _since(info) >= 2:
                keys[name] = max(keys.get(name, 0), _since(info))
    return keys


def json_schema() -> dict[str, Any]:
    """The JSON Schema of the format, for editors (yaml-language-server) and CI validators.

    pydantic's schema says the types; :func:`_refine` adds what the validators check and JSON
    Schema can express (dtype names, ranges, one pattern form, remove needs extends...), so
    editors and the loader agree. What JSON Schema cannot say: whether names resolve, whether
    a named dtype config exists, and the order of two fields (quant_min <= quant_max).
    """
    schema = _link_complex_patterns(SpecModel.model_json_schema())
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://bespec.dev/schemas/backend-spec.schema.json"
    schema.setdefault("$defs", {})["ComplexPattern"] = {
        "anyOf": [
            {"type": "string"},
            {
                "type": "array",
                "minItems": 1,
                "prefixItems": [{"$ref": "#/$defs/ComplexPattern"}],  # the op: never a literal
                "items": {"$ref": "#/$defs/ComplexItem"},
            },
        ]
    }
    schema["$defs"]["ComplexItem"] = {
        "anyOf": [
            {"$ref": "#/$defs/ComplexPattern"},
            {"type": "integer", "description": "An argument literal (version 3)."},
        ]
    }
    schema["additionalProperties"] = False
    _refine(schema)
    # The model picks a factory argument's branch by its Python type; in JSON Schema ``1`` is
    # both an integer and a number, so ``oneOf`` would refuse it for matching twice.
    factory_arg = schema["$defs"]["FactoryArg"]
    factory_arg["anyOf"] = factory_arg.pop("oneOf")
    return schema


def _not_null(field: str) -> dict[str, Any]:
    return {"required": [field], "properties": {field: {"not": {"type": "null"}}}}


def _refine(schema: dict[str, Any]) -> None:
    from backend_spec.specfile.dtypes import SPEC_DTYPE_RANGES, SPEC_DTYPES

    defs = schema["$defs"]
    names = sorted(SPEC_DTYPES)  # the format's list, not the installed torch's
    dtype_enum = {"enum": names, "description": "A torch.dtype attribute name."}
    constrained = defs["DTypeWithConstraintsModel"]
    fields = constrained["properties"]
    fields["dtype"].update(dtype_enum)
    # Positive and finite; ``not maximum 0`` also refuses NaN (which every comparison passes).
    finite = {"exclusiveMinimum": 0, "maximum": sys.float_info.max, "not": {"maximum": 0}}
    for name in ("scale_min_lower_bound", "scale_max_upper_bound", "scale_exact_match"):
        fields[name]["anyOf"][0].update(finite)
    constrained["allOf"] = [
        {
            "if": {"properties": {"dtype": {"const": name}}, "required": ["dtype"]},
            "then": {
                "properties": {
                    field: {"minimum": low, "maximum": high} for field in _INTEGER_CONSTRAINTS
                }
            },
        }
        for name, (low, high) in sorted(SPEC_DTYPE_RANGES.items())
    ]
    configs = defs["DTypeConfigModel"]["properties"]
    for key in ("input_dtype", "output_dtype", "weight_dtype", "bias_dtype"):
        configs[key]["anyOf"][0]["oneOf"][0].update(dtype_enum)
    configs["bias_dtype"]["anyOf"][0]["oneOf"][1] = {
        "type": "object",
        "properties": {"dtype": dtype_enum},
        "required": ["dtype"],
        "additionalProperties": False,
        "description": "bias_dtype takes a dtype only; torch has no bias constraints.",
    }
    pattern = defs["PatternModel"]
    pattern["oneOf"] = [_not_null("pattern"), _not_null("pattern_complex_format")]
    counts = pattern["properties"]["num_tensor_args_to_observation_type"]["anyOf"][0]
    counts["propertyNames"] = {"pattern": TENSOR_ARGS_KEY}
    indices = pattern["properties"]["input_type_to_index"]["anyOf"][0]
    indices["propertyNames"] = {"enum": list(INPUT_TYPES)}
    schema["dependentRequired"] = {"remove": ["extends"]}
    schema["dependentSchemas"] = {"remove": {"properties": {"extends": {"type": "string"}}}}


_INTEGER_CONSTRAINTS = ("quant_min_lower_bound", "quant_max_upper_bound", "zero_point_exact_match")


def _link_complex_patterns(node: Any) -> Any:
    """pydantic cannot emit a recursive ``Any``: point the marked field at ``$defs``."""
    if isinstance(node, dict):
        if node.pop(_COMPLEX_MARKER, False):
            return {"description": node.get("description", ""), "$ref": "#/$defs/ComplexPattern"}
        return {key: _link_complex_patterns(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_link_complex_patterns(item) for item in node]
    return node
