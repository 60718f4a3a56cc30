"""THE table of ``BackendPatternConfig`` fields: the one place to add a torch field.

Each row says how a field is spelled in a spec, how torch reads it (getter attribute) and sets it
(setter method), and its kind. Everything that lists fields iterates this table: the pydantic
model (:mod:`backend_spec.specfile.models`), the compiler, the canonical description and diff
(:mod:`backend_spec.analysis.compare`), the exporter's document, the standalone Python module,
``bespec show`` and ``bespec docs``. Each of them handles fields by *kind*, so a new field of an
existing kind is one row here; a new kind fails loudly (a ``KeyError`` on the kind) in each
consumer until it is taught the kind. ``tests/test_fields.py`` compares the table with torch's
setters and ``to_dict()`` keys, so a field torch adds fails the suite until it is listed.

The order is the order of keys in a spec entry (and of the exporter's output).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class FieldKind(Enum):
    """What a field holds, which decides how it is validated, resolved, written and compared."""

    PATTERN = "op pattern in forward order"
    COMPLEX_PATTERN = "op pattern in torch's reversed nested format"
    OBSERVATION_TYPE = "observation type"
    DTYPE_CONFIGS = "list of dtype configs"
    MODULE = "module class used when quantizing (root, QAT, reference)"
    FUSED_MODULE = "module class a fusion produces"
    FUSER = "fuser function, or a function form ({sequential: FusedModuleClass}, {call: ...})"
    FUNCTION = "function, or a function form ({call: factory, args: [...]})"
    OBSERVATION_TYPE_MAP = "mapping int -> observation type"
    INDEX_MAP = "mapping str -> argument index"


@dataclass(frozen=True)
class PatternField:
    """One ``BackendPatternConfig`` field.

    ``key`` is the spec key, ``getter`` the attribute torch stores it in, ``setter`` the method
    that sets it, ``short`` the tag of compact displays (``bespec show``), ``description`` the
    JSON Schema's text ("" for none) and ``dict_key`` torch's ``to_dict()``/``from_dict()`` key
    when it is not ``key``.
    """

    key: str
    getter: str
    setter: str
    kind: FieldKind
    short: str = ""
    description: str = ""
    dict_key: str = ""

    @property
    def torch_dict_key(self) -> str:
        """The key of this field in ``BackendPatternConfig.to_dict()``."""
        return self.dict_key or self.key


PATTERN_FIELDS: tuple[PatternField, ...] = (
    PatternField(
        "pattern",
        "pattern",
        "set_pattern",
        FieldKind.PATTERN,
        description="One op, or 2-3 ops in forward order (e.g. [nn.Conv2d, nn.ReLU]); from "
        "version 2 an item may itself be a nested list, kept as torch keeps it.",
    ),
    PatternField(
        "pattern_complex_format",
        "_pattern_complex_format",
        "_set_pattern_complex_format",
        FieldKind.COMPLEX_PATTERN,
        description="torch's legacy reversed nested format, instead of 'pattern'.",
    ),
    PatternField(
        "observation_type",
        "observation_type",
        "set_observation_type",
        FieldKind.OBSERVATION_TYPE,
        description="How observers are inserted around the pattern (case-insensitive).",
    ),
    PatternField(
        "dtype_configs",
        "dtype_configs",
        "set_dtype_configs",
        FieldKind.DTYPE_CONFIGS,
        description="Names of top-level dtype configs, or inline ones.",
    ),
    PatternField(
        "root_module",
        "root_module",
        "set_root_module",
        FieldKind.MODULE,
        short="root",
        description="nn.Module class at the root.",
    ),
    PatternField(
        "qat_module",
        "qat_module",
        "set_qat_module",
        FieldKind.MODULE,
        short="qat",
        description="QAT module class for the root.",
    ),
    PatternField(
        "reference_quantized_module",
        "reference_quantized_module",
        "set_reference_quantized_module",
        FieldKind.MODULE,
        short="ref",
        description="Reference quantized module class for the root.",
        dict_key="reference_quantized_module_for_root",
    ),
    PatternField(
        "fused_module",
        "fused_module",
        "set_fused_module",
        FieldKind.FUSED_MODULE,
        short="fused",
        description="Module class the fusion produces.",
    ),
    PatternField(
        "fuser_method",
        "fuser_method",
        "set_fuser_method",
        FieldKind.FUSER,
        description="A function name, {sequential: FusedModuleClass}, or (version 2) "
        "{reverse_sequential: ...}, {reverse2: ...}, {reverse3: ...}, "
        "{call: factory, args: [...]}.",
    ),
    PatternField(
        "root_node_getter",
        "_root_node_getter",
        "_set_root_node_getter",
        FieldKind.FUNCTION,
        description="A function name that picks the root node of a matched fusion, or "
        "(version 2) {call: factory, args: [...]}.",
    ),
    PatternField(
        "extra_inputs_getter",
        "_extra_inputs_getter",
        "_set_extra_inputs_getter",
        FieldKind.FUNCTION,
        description="A function name that gives the extra inputs of a fused root, or "
        "(version 2) {call: factory, args: [...]}.",
    ),
    PatternField(
        "num_tensor_args_to_observation_type",
        "_num_tensor_args_to_observation_type",
        "_set_num_tensor_args_to_observation_type",
        FieldKind.OBSERVATION_TYPE_MAP,
        description="Observation type by number of tensor arguments (for add, mul).",
    ),
    PatternField(
        "input_type_to_index",
        "_input_type_to_index",
        "_set_input_type_to_index",
        FieldKind.INDEX_MAP,
        description="Argument index of each input kind, such as {weight: 1, bias: 2}.",
    ),
)

#: Kinds whose value is a module class.
MODULE_KINDS = frozenset({FieldKind.MODULE, FieldKind.FUSED_MODULE})

#: Kinds that hold the pattern itself (exactly one of them is set per entry).
PATTERN_KINDS = frozenset({FieldKind.PATTERN, FieldKind.COMPLEX_PATTERN})


def fields_of(*kinds: FieldKind) -> tuple[PatternField, ...]:
    """The fields of the given kinds, in table order."""
    return tuple(f for f in PATTERN_FIELDS if f.kind in kinds)


# -- the rest of the format: dtype mappings, DTypeConfigs, version 2 pattern keys ----------------
# torch's BackendConfig has no field for the version 2 keys; bespec keeps them beside it. Every
# consumer that must see the whole form (equality and ``bespec diff``, export, the check's case
# identity) iterates these tuples, so a key added here is compared and written everywhere.

#: ``DTypeWithConstraints`` fields other than ``dtype``, in the order a spec lists them.
CONSTRAINT_FIELDS: tuple[str, ...] = (
    "quant_min_lower_bound",
    "quant_max_upper_bound",
    "scale_min_lower_bound",
    "scale_max_upper_bound",
    "scale_exact_match",
    "zero_point_exact_match",
)

#: Observer keys of a dtype mapping (version 2; ``ptq_fake_quant`` version 6; ``customized_qrange``
#: version 8; ``averaging_constant`` version 9; defaults: what version 1 builds), in spec order.
OBSERVER_FIELDS: tuple[str, ...] = (
    "observer",
    "qscheme",
    "granularity",
    "ch_axis",
    "reduce_range",
    "fake_quant",
    "ptq_fake_quant",
    "customized_qrange",
    "averaging_constant",
)

#: torch's moving-average observers' ``averaging_constant`` (what a mapping means without the
#: version 9 key).
DEFAULT_AVERAGING_CONSTANT = 0.01

#: The ``observer`` values that calibrate a dynamic activation (version 9: what a dynamic QAT
#: fake-quantize wraps; any other, and any in an older file, is a placeholder there).
CALIBRATING_OBSERVERS: tuple[str, ...] = ("minmax", "moving_average_minmax")

#: The pt2e keys of a pattern entry (no torch field): ``aten`` and ``quantize`` (version 2),
#: then the version 3 policy keys, then the version 4 ``bias_qspec``, then the version 5
#: ``input_observer`` and ``producers``, then the version 7 ``when`` (argument conditions),
#: then the version 8 ``annotation_stage`` (the order in which entries annotate), then the
#: version 10 ``claim_stage`` (the order in which entries claim nodes), then the version 11
#: ``qconfig`` (whose QConfig quantizes the entry), then the version 12 ``input_sharing`` (the
#: spec-wide key of that name, for one entry's inputs).
PT2E_PATTERN_FIELDS: tuple[str, ...] = (
    "aten",
    "quantize",
    "output",
    "extra_inputs",
    "chain_input",
    "input_shapes",
    "scalars",
    "consumers",
    "bias_qspec",
    "input_observer",
    "producers",
    "when",
    "annotation_stage",
    "claim_stage",
    "qconfig",
    "input_sharing",
)

#: The pt2e keys of the whole spec (no torch field; version 5): ``graph_inputs``, the dtype
#: config whose activation observer every float graph input (placeholder) gets, and
#: ``input_sharing``, when an input reuses its producer's output observer; and (version 8)
#: ``transform_for_annotation``, the graph passes run before annotating.
PT2E_BACKEND_FIELDS: tuple[str, ...] = ("graph_inputs", "input_sharing", "transform_for_annotation")

#: The version 10 ``fake_quant`` value that keeps a mapping's PTQ observer in QAT: no
#: fake-quantize (torchao's EmbeddingQuantizer's weight observer beside a QAT config).
OBSERVER_IN_QAT = "observer"

#: ``input_sharing`` values: ``dtype`` (FX: an input reuses its producer's output observer
#: whenever their dtypes agree) or ``qspec`` (torchao with a hand-written quantizer: only when
#: the two qspecs are the same; otherwise the edge is observed again).
INPUT_SHARING = ("dtype", "qspec")

#: Every key of a dtype mapping after ``dtype``: torch's constraints, then the observer keys.
DTYPE_MAPPING_FIELDS: tuple[str, ...] = CONSTRAINT_FIELDS + OBSERVER_FIELDS

#: The dtype mappings of a DTypeConfig (each a ``DTypeWithConstraints``), then its plain fields.
DTYPE_CONFIG_MAPPINGS: tuple[str, ...] = ("input_dtype", "output_dtype", "weight_dtype")
DTYPE_CONFIG_PLAIN: tuple[str, ...] = ("bias_dtype", "is_dynamic")

#: The table's fields a pattern entry declares beyond its pattern and its DTypeConfigs.
ENTRY_FIELDS: tuple[PatternField, ...] = tuple(
    f
    for f in PATTERN_FIELDS
    if f.kind not in PATTERN_KINDS and f.kind is not FieldKind.DTYPE_CONFIGS
)
