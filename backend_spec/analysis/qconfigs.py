"""A QConfigMapping that a BackendConfig will actually honour.

``prepare_fx`` silently leaves a pattern in fp32 when the user's QConfig does not satisfy one of
the pattern's DTypeConfigs (wrong dtype, a quantization range outside the backend's bounds, an
``eps`` below its minimum scale, a non-fixed observer on a fixed-qparams op, ...). Writing those
QConfigs by hand for a custom backend is tedious and error prone, so :func:`qconfig_mapping`
derives them from the BackendConfig itself: for every pattern it takes the first DTypeConfig it
can build a QConfig for, and builds the QConfig to meet that DTypeConfig's constraints.

The result is checked against torch's own acceptance test (:func:`satisfies`), which calls the
same ``_qconfig_satisfies_dtype_config_constraints`` that ``prepare_fx`` uses.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any, NamedTuple

from backend_spec import ir
from backend_spec._torch import BackendConfig, BackendPatternConfig, DTypeConfig, quiet, torch
from backend_spec.ir.lift import lift_dtype_config
from backend_spec.ir.lower import backend_of
from backend_spec.names.dtypes import dtype_name, dtype_range
from backend_spec.names.labels import dtype_label
from backend_spec.specfile.fields import (
    CALIBRATING_OBSERVERS,
    CONSTRAINT_FIELDS,
    DEFAULT_AVERAGING_CONSTANT,
    OBSERVER_IN_QAT,
)

with quiet():
    from torch.ao.quantization import QConfig, QConfigMapping
    from torch.ao.quantization.observer import (
        FixedQParamsObserver,
        HistogramObserver,
        MinMaxObserver,
        MovingAverageMinMaxObserver,
        MovingAveragePerChannelMinMaxObserver,
        PerChannelMinMaxObserver,
        PlaceholderObserver,
    )
    from torch.ao.quantization.utils import MatchAllNode

__all__ = [
    "PatternQConfig",
    "choose",
    "each_dtype_config",
    "fusion_conflicts",
    "kernels_for",
    "op_qconfigs",
    "pattern_ops",
    "qconfig_for",
    "qconfig_mapping",
    "resolve_backend_config",
    "fake_quant",
    "qat_qconfig",
    "runs_on",
    "satisfies",
    "takes_activation",
]

#: Integer range of each quantized dtype an observer can produce.
_QRANGE: dict[torch.dtype, tuple[int, int]] = {
    dtype: dtype_range(dtype_name(dtype))  # type: ignore[misc]
    for dtype in (
        torch.quint8,
        torch.qint8,
        torch.qint32,
        torch.quint4x2,
        torch.quint2x4,
        torch.uint8,
        torch.int8,
        torch.int16,
        torch.uint16,
        torch.int32,
    )
}

#: Dtypes that are packed below 8 bits and only exist as weight-only embedding tables.
_SUB_BYTE = (torch.quint4x2, torch.quint2x4)

_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


class Constraints(NamedTuple):
    """One DTypeWithConstraints as hashable data, the QConfig cache's key: the dtype, torch's
    constraints (``CONSTRAINT_FIELDS``, in that order) and the version 2 options that are set."""

    dtype: torch.dtype | None
    quant_min_lower_bound: int | None = None
    quant_max_upper_bound: int | None = None
    scale_min_lower_bound: float | None = None
    scale_max_upper_bound: float | None = None
    scale_exact_match: float | None = None
    zero_point_exact_match: int | None = None
    options: tuple[tuple[str, Any], ...] = ()


class Described(NamedTuple):
    """A DTypeConfig as hashable data: its three dtype mappings and its plain fields."""

    input: Constraints
    output: Constraints
    weight: Constraints
    bias_dtype: torch.dtype | None
    is_dynamic: bool


#: The weight constraints used when a DTypeConfig has no weight and no
#: weighted DTypeConfig shares its activation constraints: torch's default qint8 weights.
_DEFAULT_WEIGHT = Constraints(torch.qint8)

#: Version 2 ``observer`` names -> (per-tensor class, per-channel class or None).
_OBSERVER_KINDS = {
    "minmax": (MinMaxObserver, PerChannelMinMaxObserver),
    "moving_average_minmax": (MovingAverageMinMaxObserver, MovingAveragePerChannelMinMaxObserver),
    "histogram": (HistogramObserver, None),
}

#: Engines whose x86 kernels may overflow with a full 8-bit activation range (torch's own
#: defaults use ``reduce_range=True`` there).
_REDUCE_RANGE_ENGINES = ("x86", "fbgemm")

#: Engines whose static/dynamic kernels only take quint8 activations.
_QUINT8_ENGINES = ("x86", "fbgemm", "qnnpack", "onednn")


@dataclass(frozen=True)
class PatternQConfig:
    """The DTypeConfig chosen for one pattern and the QConfig built for it (``None`` if none is
    usable, with ``reason`` saying why)."""

    config: BackendPatternConfig
    dtype_config: DTypeConfig | None
    qconfig: QConfig | None
    reason: str = ""
    #: ``dtype_config`` in the intermediate form (its version 2 options included).
    facts: ir.DTypeConfig | None = None


def qconfig_mapping(
    spec_or_backend_config: BackendConfig | str | os.PathLike[str],
    *,
    engine: str | None = None,
    allow_imports: Iterable[str] = (),
    runnable_first: bool = True,
    qat: bool = False,
) -> QConfigMapping:
    """A QConfigMapping whose QConfigs satisfy each pattern's first usable DTypeConfig.

    ``spec_or_backend_config`` is a BackendConfig or the path of a spec file (loaded with
    :func:`backend_spec.load`, honouring ``allow_imports``). ``engine`` tunes the activation range
    for the kernels that will run the model (x86/fbgemm use a 7-bit range like torch's defaults);
    leave it ``None`` for a backend-neutral mapping. ``runnable_first`` passes over DTypeConfigs
    the engine has no kernels for (see :func:`choose`); turn it off to keep the spec's first
    choice everywhere (a model then runs as a reference model, but its fusions stay consistent).

    Every op of a pattern (a module class, a function or a method name) is mapped with
    ``set_object_type``; the first pattern mentioning an op decides its QConfig, and all ops of a
    fused pattern share one QConfig because torch requires it when it fuses them. With ``qat``
    the QConfigs are their QAT twins (:func:`qat_qconfig`), for ``prepare_qat_fx``.
    """
    backend_config = resolve_backend_config(spec_or_backend_config, allow_imports)
    mapping = QConfigMapping()
    for op, qconfig in op_qconfigs(backend_config, engine, runnable_first, qat=qat).items():
        mapping.set_object_type(op, qconfig)
    return mapping


def resolve_backend_config(
    spec_or_backend_config: BackendConfig | str | os.PathLike[str],
    allow_imports: Iterable[str] = (),
) -> BackendConfig:
    """A BackendConfig as is, or the one a spec file compiles to."""
    if isinstance(spec_or_backend_config, BackendConfig):
        return spec_or_backend_config
    from backend_spec.compiler.loader import load

    return load(os.fspath(spec_or_backend_config), allow_imports=list(allow_imports))


def op_qconfigs(
    backend_config: BackendConfig,
    engine: str | None,
    runnable_first: bool = True,
    *,
    qat: bool = False,
) -> dict[Any, QConfig]:
    """op -> QConfig (its QAT twin with ``qat``).

    An op's own single-op pattern decides its QConfig; ops that only appear inside multi-op
    patterns take the first such pattern's. A fused partner that has its own, different
    requirement keeps it (see :func:`fusion_conflicts`): every pattern stays satisfiable, and a
    model that really fuses the pair gets torch's explicit error instead of a silent fp32 op.
    """
    entries = [
        entry
        for entry in choose(backend_config, engine, runnable_first=runnable_first, qat=qat)
        if entry.qconfig is not None
    ]
    chosen: dict[Any, QConfig] = {}
    for entry in entries:
        ops = pattern_ops(entry.config)
        if len(ops) == 1:
            chosen.setdefault(ops[0], entry.qconfig)
    for entry in entries:
        ops = pattern_ops(entry.config)
        shared = chosen.get(ops[0], entry.qconfig)
        for op in ops:
            chosen.setdefault(op, shared)
    for config in backend_config.configs:
        # Fusion-only patterns (no DTypeConfigs): partners follow the first op, as torch requires.
        ops = pattern_ops(config)
        if not config.dtype_configs and len(ops) > 1 and ops[0] in chosen:
            for op in ops[1:]:
                chosen.setdefault(op, chosen[ops[0]])
    return chosen


def fusion_conflicts(
    backend_config: BackendConfig, engine: str | None = None
) -> list[tuple[BackendPatternConfig, Any]]:
    """Fused patterns whose partner op needs a QConfig different from the first op's.

    Such a backend cannot be served by any per-type QConfigMapping: torch refuses to fuse modules
    with different QConfigs, while the partner's own pattern needs its own (onednn's
    ``(nn.Linear, nn.Tanh)`` against the fixed-qparams ``nn.Tanh`` is the built-in example).
    """
    from torch.ao.quantization.qconfig import qconfig_equals

    chosen = op_qconfigs(backend_config, engine)
    conflicts = []
    for config in backend_config.configs:
        ops = pattern_ops(config)
        if config.fused_module is None or len(ops) < 2:
            continue
        for op in ops[1:]:
            if not qconfig_equals(chosen.get(op), chosen.get(ops[0])):
                conflicts.append((config, op))
    return conflicts


def choose(
    backend_config: BackendConfig,
    engine: str | None = None,
    *,
    runnable_first: bool = True,
    qat: bool = False,
) -> Iterator[PatternQConfig]:
    """For every pattern with DTypeConfigs: the first usable one and its QConfig (the QAT
    twin with ``qat``; a DTypeConfig whose ``fake_quant`` cannot be built is not usable).

    With an ``engine``, DTypeConfigs whose activations that engine's kernels cannot take (qint8
    activations on x86/fbgemm/qnnpack/onednn) are passed over when a later one is runnable.
    """
    for config, entries in _entries(backend_config, engine, qat):
        usable = [entry for entry in entries if entry.qconfig is not None]
        if not usable:
            reasons = "; ".join(entry.reason for entry in entries)
            yield PatternQConfig(config, None, None, reasons)
            continue
        runnable = [entry for entry in usable if runs_on(entry.dtype_config, engine)]
        runnable = runnable if runnable_first else []
        yield (runnable or usable)[0]


def each_dtype_config(
    backend_config: BackendConfig, engine: str | None = None
) -> Iterator[tuple[int, PatternQConfig]]:
    """Every (pattern, DTypeConfig) pair with its index in the pattern and the QConfig built for
    it (``qconfig`` is ``None`` with a ``reason`` when no QConfig can meet it)."""
    for _config, entries in _entries(backend_config, engine):
        yield from enumerate(entries)


def _entries(
    backend_config: BackendConfig, engine: str | None, qat: bool = False
) -> Iterator[tuple[BackendPatternConfig, list[PatternQConfig]]]:
    reduce_range = engine in _REDUCE_RANGE_ENGINES
    describe = _describer()
    pairs = list(zip(backend_config.configs, backend_of(backend_config), strict=True))
    partners = _weight_partners(pairs, describe)
    for config, entry in pairs:
        if not config.dtype_configs:
            continue
        entries = []
        for dtype_config, facts in zip(config.dtype_configs, entry.dtype_configs, strict=True):
            described = describe(facts)
            weight = partners.get(_activation_key(described), _DEFAULT_WEIGHT)
            qconfig, reason = _built(described, reduce_range, weight, qat)
            entries.append(PatternQConfig(config, dtype_config, qconfig, reason, facts))
        yield config, entries


def _built(described: Described, reduce_range: bool, weight: Any, qat: bool) -> tuple[Any, str]:
    """(the QConfig built for one described DTypeConfig, or ``None``; why not)."""
    qconfig, reason = _cached_qconfig(described, reduce_range, weight)
    if qat and qconfig is not None:
        return _cached_qat_qconfig(qconfig, described)
    if qconfig is not None:
        return _ptq_fake_quants(qconfig, described)
    return qconfig, reason


def own_qconfig(
    dtype_configs: Iterable[ir.DTypeConfig], engine: str | None = None, *, qat: bool = False
) -> Any:
    """The QConfig of an entry's first usable DTypeConfig, built for it alone (pt2e's
    ``qconfig: own``, version 11): not its first op's, which another entry may decide."""
    reduce_range = engine in _REDUCE_RANGE_ENGINES
    for dtype_config in dtype_configs:
        qconfig, _reason = _built(_describe(dtype_config), reduce_range, _DEFAULT_WEIGHT, qat)
        if qconfig is not None:
            return qconfig
    return None


def own_observers(
    dtype_config: ir.DTypeConfig, engine: str | None = None, *, qat: bool = False
) -> tuple[Any, Any] | None:
    """Version 9: (input, output) activation observers of a static dtype config whose input and
    output mappings both set observer options, different ones, for one dtype (another
    qscheme, observer, fake-quantize...), each built with its own mapping's options and the
    bounds of both; ``None`` when the two observe alike or one sets none (it takes the
    other's). pt2e observes each edge with its own qspec (Core ML's relu outputs are affine
    after a symmetric input); a QConfig has one activation observer, so FX observes both with
    one (the input's options, or the output's when the input sets none)."""
    described = _describe(dtype_config)
    inp, out = described.input, described.output
    if described.is_dynamic or out.dtype != inp.dtype or not (inp.options and out.options):
        return None  # a mapping that sets no option takes the other's, as in a QConfig
    if _as_activation(out).options == _as_activation(inp).options:
        return None
    built = []
    reduce_range = engine in _REDUCE_RANGE_ENGINES
    for mine, other in ((inp, out), (out, inp)):
        merged = _merge_constraints(mine, other)
        if merged is None:
            return None
        merged = merged._replace(options=mine.options)  # its own options, not the other's
        own = described._replace(input=merged, output=merged)
        qconfig, _reason = _cached_qconfig(own, reduce_range, _DEFAULT_WEIGHT)
        if qconfig is not None:
            qconfig, _reason = (_cached_qat_qconfig if qat else _ptq_fake_quants)(qconfig, own)
        if qconfig is None:
            return None
        built.append(qconfig.activation)
    return built[0], built[1]


def runs_on(dtype_config: DTypeConfig, engine: str | None) -> bool:
    """Whether ``engine``'s quantized CPU kernels take this DTypeConfig's dtypes."""
    weight_only = not dtype_config.is_dynamic and dtype_config.input_dtype in (None, torch.float32)
    if weight_only:
        return kernels_for("weight-only", dtype_config.weight_dtype, engine)
    return takes_activation(dtype_config.input_dtype, engine)


def kernels_for(mode: str, dtype: torch.dtype | None, engine: str | None) -> bool:
    """Whether ``engine`` has kernels for ``mode`` (``static``, ``dynamic``, ``weight-only``)
    quantization to ``dtype``: activations must suit :func:`takes_activation`; torch lowers
    weight-only ops only as quantized embeddings, whose tables are quint8 or quint4x2."""
    if mode == "weight-only":
        known = engine is None or engine not in _QUINT8_ENGINES
        return known or dtype in (None, torch.quint8, torch.quint4x2)
    return takes_activation(dtype, engine)


def takes_activation(dtype: torch.dtype | None, engine: str | None) -> bool:
    """Whether ``engine``'s kernels take activations of ``dtype``.

    torch's server and mobile engines only implement unsigned 8-bit activations (plus float
    ones for dynamic, fp16 and weight-only kernels); ``None`` means no particular engine.
    """
    if engine is None or engine not in _QUINT8_ENGINES:
        return True
    return dtype in (None, torch.quint8, *_FLOATS)


#: Version 2 ``fake_quant`` kinds and the one a mapping that does not say gets: version 1
#: trained with torch's ``FakeQuantize`` around the PTQ observer, so that stays the default.
FAKE_QUANT_KINDS = ("fake_quantize", "fused_moving_avg", "learnable")
DEFAULT_FAKE_QUANT = "fake_quantize"


def qat_qconfig(
    qconfig: QConfig, dtype_config: DTypeConfig | ir.DTypeConfig | None = None
) -> QConfig:
    """The QAT twin of a QConfig from this module, honouring the ``fake_quant`` kinds of
    ``dtype_config`` (see :func:`fake_quant`); raises ``ValueError`` when a kind cannot be built."""
    described = _describe(dtype_config) if dtype_config is not None else None
    made, reason = _cached_qat_qconfig(qconfig, described)
    if made is None:
        raise ValueError(reason)
    return made


@cache
def _cached_qat_qconfig(qconfig: QConfig, described: tuple | None) -> tuple[QConfig | None, str]:
    """Cached, so that the fused ops of one pattern get one (equal) QAT QConfig, as torch's
    fusion requires."""
    activation_kind = weight_kind = DEFAULT_FAKE_QUANT
    activation_constant = weight_constant = None
    if described is not None:
        inp, out, weight = described[:3]
        activation_kind = (
            _option(inp, "fake_quant") or _option(out, "fake_quant") or activation_kind
        )
        weight_kind = _option(weight, "fake_quant") or weight_kind
        activation_constant = _option(inp, "averaging_constant") or _option(
            out, "averaging_constant"
        )
        weight_constant = _option(weight, "averaging_constant")
    with quiet():
        activation, reason = fake_quant(qconfig.activation, activation_kind, activation_constant)
        if reason:
            return None, f"input/output fake_quant {activation_kind}: {reason}"
        weight_fq, reason = fake_quant(qconfig.weight, weight_kind, weight_constant)
        if reason:
            return None, f"weight fake_quant {weight_kind}: {reason}"
    return QConfig(activation=activation, weight=weight_fq), ""


def _ptq_fake_quants(qconfig: QConfig, described: Described) -> tuple[QConfig | None, str]:
    """Version 6 ``ptq_fake_quant``: the activation (input or output mapping) and the weight
    that set it observe with their QAT fake-quantize in PTQ too (a config of fake-quantizes
    given to ``prepare_pt2e``, Core ML's); the others keep their observers."""
    inp, out, weight = described[:3]
    activation = _option(inp, "ptq_fake_quant") or _option(out, "ptq_fake_quant")
    weights = _option(weight, "ptq_fake_quant")
    if not (activation or weights):
        return qconfig, ""
    twin, reason = _cached_qat_qconfig(qconfig, described)
    if twin is None:
        return None, reason
    return QConfig(
        activation=twin.activation if activation else qconfig.activation,
        weight=twin.weight if weights else qconfig.weight,
    ), ""


def _option(constraints: tuple, key: str) -> Any:
    return dict(constraints[7]).get(key)


def fake_quant(
    observer: Any, kind: str, averaging_constant: float | None = None
) -> tuple[Any, str]:
    """(the fake-quantize constructor of ``kind`` around ``observer``, or ``None``; reason).

    The one place a ``fake_quant`` kind becomes a class: ``fake_quantize`` is torch's
    ``FakeQuantize`` around the PTQ observer; ``fused_moving_avg`` is
    ``FusedMovingAvgObsFakeQuantize``, which only fuses moving-average min/max observation, so
    it takes the moving-average observer of the same dtype, range, qscheme and eps (as torch's
    default QAT QConfig does, whatever the PTQ observer); ``learnable`` is
    ``_LearnableFakeQuantize`` (per-tensor: its per-channel form needs the channel count up
    front). Fixed qparams keep ``FixedQParamsFakeQuantize``; placeholders stay as they are.
    ``averaging_constant`` (version 9) is the fused observer's when the PTQ one takes none.
    ``observer`` (version 10) is the PTQ observer itself: QAT observes without fake-quantizing.
    The pt2e quantizer reads its fake-quantize specs off these constructors.
    """
    from torch.ao.quantization._learnable_fake_quantize import _LearnableFakeQuantize
    from torch.ao.quantization.fake_quantize import (
        FakeQuantize,
        FixedQParamsFakeQuantize,
        FusedMovingAvgObsFakeQuantize,
    )

    if observer is None or kind == OBSERVER_IN_QAT:
        return observer, ""
    instance = observer()
    if isinstance(instance, PlaceholderObserver):
        return observer, ""
    if isinstance(instance, FixedQParamsObserver):
        return FixedQParamsFakeQuantize.with_args(observer=observer), ""
    per_channel = isinstance(instance, PerChannelMinMaxObserver)
    # Both wrappers default to 0..255 whatever the dtype, so they get the observer's range.
    bounds = {"quant_min": instance.quant_min, "quant_max": instance.quant_max}
    if not getattr(instance, "has_customized_qrange", True):
        bounds = {}  # customized_qrange: false (version 8): the wrapper keeps none either
    if kind == "fused_moving_avg":
        moving = (
            MovingAveragePerChannelMinMaxObserver if per_channel else MovingAverageMinMaxObserver
        )
        kwargs = {key: value for key, value in observer.p.keywords.items() if key != "bins"}
        if averaging_constant is not None:
            kwargs["averaging_constant"] = averaging_constant
        return FusedMovingAvgObsFakeQuantize.with_args(
            observer=moving.with_args(**kwargs), **bounds
        ), ""
    if kind == "learnable":
        if per_channel:
            return None, "a per-channel learnable fake-quantize needs the channel count up front"
        return _LearnableFakeQuantize.with_args(observer=observer, **bounds), ""
    # A dynamic observer's wrapper says so itself (torch reads is_dynamic off the fake-quantize).
    dynamic = {"is_dynamic": True} if getattr(instance, "is_dynamic", False) else {}
    return FakeQuantize.with_args(observer=observer, **dynamic), ""


def _weight_partners(
    pairs: list[tuple[BackendPatternConfig, ir.Entry]],
    describe: Callable[[ir.DTypeConfig], Described],
) -> dict[tuple, tuple]:
    """Activation constraints -> the weight constraints weighted ops pair them with.

    A weightless op (ReLU, BatchNorm, add) ignores its QConfig's weight observer, but torch only
    fuses modules whose QConfigs are *equal*, weight observer included. Giving weightless ops the
    weight observer of a weighted op with the same activation constraints keeps (Conv2d, ReLU)
    fusable.
    """
    partners: dict[tuple, tuple] = {}
    for _config, entry in pairs:
        for dtype_config in entry.dtype_configs:
            described = describe(dtype_config)
            if described.weight.dtype is not None:
                partners.setdefault(_activation_key(described), described.weight)
    return partners


#: Version 2 options an activation observer gets when they are not written (or that it ignores):
#: an input written ``{qscheme: affine, granularity: per_tensor}`` observes exactly as a plain
#: ``qint8`` does, so both must find the same weight partner (else (Conv2d, ReLU) cannot fuse).
_ACTIVATION_DEFAULTS = {
    "observer": "minmax",
    "qscheme": "affine",
    "granularity": "per_tensor",
    "fake_quant": DEFAULT_FAKE_QUANT,
    "ptq_fake_quant": False,
    "customized_qrange": True,
    "averaging_constant": DEFAULT_AVERAGING_CONSTANT,
}


def _activation_key(described: Described) -> tuple[Constraints, Constraints, bool]:
    inp, out, _weight, _bias, is_dynamic = described
    return _as_activation(inp), _as_activation(out), is_dynamic


def _as_activation(constraints: Constraints) -> Constraints:
    """``constraints`` without the options that do not change an activation observer."""
    options = tuple(
        (key, value)
        for key, value in constraints.options
        if key != "ch_axis" and _ACTIVATION_DEFAULTS.get(key) != value
    )
    return constraints._replace(options=options)


def qconfig_for(
    dtype_config: DTypeConfig | ir.DTypeConfig, *, reduce_range: bool = False
) -> QConfig | None:
    """A QConfig meeting ``dtype_config`` and its constraints, or ``None`` if there is none."""
    return _cached_qconfig(_describe(dtype_config), reduce_range, _DEFAULT_WEIGHT)[0]


def _describer() -> Callable[[ir.DTypeConfig], Described]:
    """:func:`_describe` memoized for one pass over a BackendConfig, whose patterns share their
    DTypeConfig objects (every one stays alive meanwhile, so ids are not reused)."""
    memo: dict[int, Described] = {}

    def describe(dtype_config: ir.DTypeConfig) -> Described:
        key = id(dtype_config)
        if key not in memo:
            memo[key] = _describe(dtype_config)
        return memo[key]

    return describe


def _describe(dtype_config: DTypeConfig | ir.DTypeConfig) -> Described:
    """A DTypeConfig as hashable data; a torch one is read through the intermediate form (it
    has no version 2 options)."""
    if not isinstance(dtype_config, ir.DTypeConfig):
        dtype_config = lift_dtype_config(dtype_config)

    def constraints(mapping: ir.DTypeMapping) -> Constraints:
        options = tuple(sorted(mapping.observer.items()))
        return Constraints(mapping.dtype, *(mapping.get(f) for f in CONSTRAINT_FIELDS), options)

    return Described(
        constraints(dtype_config.mapping("input_dtype")),
        constraints(dtype_config.mapping("output_dtype")),
        constraints(dtype_config.mapping("weight_dtype")),
        dtype_config.bias_dtype,
        bool(dtype_config.is_dynamic),
    )


@cache
def _cached_qconfig(
    described: Described, reduce_range: bool, weight_if_none: Constraints
) -> tuple[QConfig | None, str]:
    """Cached on the DTypeConfig's description, so identical DTypeConfigs share one QConfig."""
    inp, out, weight, _bias, is_dynamic = described
    in_dtype, out_dtype = inp.dtype, out.dtype
    if in_dtype in (None, torch.float32) and out_dtype in (None, torch.float32) and not is_dynamic:
        with quiet():
            return _weight_only_qconfig(weight)
    if weight.dtype is None:
        weight = weight_if_none
    with quiet():
        if is_dynamic:
            return _dynamic_qconfig(inp, weight)
        if in_dtype in (torch.float16, torch.bfloat16):
            return _float_qconfig(in_dtype, weight.dtype)
        if in_dtype in _QRANGE and out_dtype in (None, *_QRANGE):
            return _static_qconfig(inp, out, weight, reduce_range)
    return (
        None,
        f"no QConfig can produce input {dtype_label(in_dtype)} / output {dtype_label(out_dtype)}",
    )


def _static_qconfig(inp: Constraints, out: Constraints, weight: Constraints, reduce_range: bool):
    """Observed activations (input and output share one observer constructor in a QConfig)."""
    activation, reason = _activation_observer(inp, out, reduce_range)
    if activation is None:
        return None, reason
    weight_obs, reason = _weight_observer(weight)
    if weight_obs is None:
        return None, reason
    return QConfig(activation=activation, weight=weight_obs), ""


def _activation_observer(inp: Constraints, out: Constraints, reduce_range: bool):
    if out.dtype not in (None, inp.dtype):
        # A QConfig has one activation observer, used for both a node's inputs and its output.
        return None, f"input {inp.dtype} and output {out.dtype} differ; one QConfig cannot do both"
    merged = _merge_constraints(inp, out)
    if merged is None:
        return None, "input and output constraints contradict each other"
    dtype, qmin_lb, qmax_ub, scale_min, _scale_max, scale_exact, zp_exact, options = merged
    if scale_exact is not None and zp_exact is not None:
        qmin, qmax = _quant_range(dtype, qmin_lb, qmax_ub, reduce=False)
        return FixedQParamsObserver.with_args(
            scale=scale_exact, zero_point=zp_exact, dtype=dtype, quant_min=qmin, quant_max=qmax
        ), ""
    chosen = dict(options)
    if chosen.get("granularity") == "per_channel":
        return None, "per_channel applies to weights only, not activations"
    if chosen.get("observer") == "placeholder":
        return None, "a placeholder observer cannot calibrate static activations"
    reduce = chosen.get("reduce_range", reduce_range)
    qmin, qmax = _quant_range(dtype, qmin_lb, qmax_ub, reduce=reduce)
    if qmin >= qmax:
        return None, f"empty quantization range [{qmin_lb}, {qmax_ub}] for {dtype_label(dtype)}"
    observer = _OBSERVER_KINDS[chosen.get("observer", "minmax")][0]
    qscheme = torch.per_tensor_symmetric if chosen.get("qscheme") == "symmetric" else None
    extra = {} if qscheme is None else {"qscheme": qscheme}
    return observer.with_args(
        dtype=dtype,
        **_qrange(dtype, qmin, qmax, chosen),
        eps=_eps(scale_min),
        **extra,
        **_averaging(observer, chosen),
    ), ""


def _averaging(observer: type, options: dict[str, Any]) -> dict[str, float]:
    """A moving-average observer's ``averaging_constant`` argument (version 9), when the
    mapping sets one; other observers take none (lint BS548 reports it unused)."""
    constant = options.get("averaging_constant")
    if constant is None or not issubclass(
        observer, MovingAverageMinMaxObserver | MovingAveragePerChannelMinMaxObserver
    ):
        return {}
    return {"averaging_constant": float(constant)}


def _qrange(dtype: torch.dtype, qmin: int, qmax: int, options: dict[str, Any]) -> dict[str, int]:
    """An observer's ``quant_min``/``quant_max`` arguments: none at all for a mapping that says
    ``customized_qrange: false`` (version 8) and keeps its dtype's own range, as a pt2e qspec
    that leaves them unset (torch's observer then has no customized range, and puts a
    symmetric uint8 zero point at 128); the range otherwise (BS547 reports a narrowed one)."""
    if options.get("customized_qrange") is False and (qmin, qmax) == _QRANGE[dtype]:
        return {}
    return {"quant_min": qmin, "quant_max": qmax}


def _merge_constraints(a: Constraints, b: Constraints) -> Constraints | None:
    """The tighter of two DTypeWithConstraints descriptions of the same dtype."""
    if b.dtype is None:
        return a
    lo = [v for v in (a.quant_min_lower_bound, b.quant_min_lower_bound) if v is not None]
    hi = [v for v in (a.quant_max_upper_bound, b.quant_max_upper_bound) if v is not None]
    smin = [v for v in (a.scale_min_lower_bound, b.scale_min_lower_bound) if v is not None]
    pairs = ((c.scale_exact_match, c.zero_point_exact_match) for c in (a, b))
    exact = {(s, z) for s, z in pairs if s is not None and z is not None}
    if len(exact) > 1:
        return None
    scale_exact, zp_exact = next(iter(exact)) if exact else (None, None)
    return Constraints(
        a.dtype,
        max(lo) if lo else None,
        min(hi) if hi else None,
        max(smin) if smin else None,
        None,
        scale_exact,
        zp_exact,
        a.options or b.options,
    )


def _quant_range(dtype: torch.dtype, lower: int | None, upper: int | None, *, reduce: bool):
    """The dtype's full range (halved when ``reduce``), clipped to the backend's bounds."""
    qmin, qmax = _QRANGE[dtype]
    if reduce and dtype in (torch.quint8, torch.uint8):
        qmax = 127
    elif reduce and dtype in (torch.qint8, torch.int8):
        qmin, qmax = -64, 63
    if lower is not None:
        qmin = max(qmin, lower)
    if upper is not None:
        qmax = min(qmax, upper)
    return qmin, qmax


def _eps(scale_min: float | None) -> float:
    """Observer ``eps`` is torch's stand-in for the minimum scale a backend accepts: the
    bound itself when positive (below the default too: OpenVINO's observers take 1e-16)."""
    default = torch.finfo(torch.float32).eps
    return scale_min if scale_min is not None and scale_min > 0 else default


def _weight_observer(weight: Constraints):
    """Per-tensor symmetric for int weights (every engine and reference module accepts it),
    unless the spec (version 2) asks for another observer, qscheme or per-channel weights."""
    dtype, qmin_lb, qmax_ub, scale_min = weight[:4]
    options = dict(weight.options)
    if dtype is None:
        return None, ""
    if dtype in _FLOATS or options.get("observer") == "placeholder":
        return _placeholder(dtype), ""
    if dtype in _SUB_BYTE:
        return (
            None,
            f"{dtype_label(dtype)} weights only exist with float activations "
            "(weight-only embeddings)",
        )
    if dtype not in _QRANGE:
        return None, f"unsupported weight dtype {dtype_label(dtype)}"
    qmin, qmax = _quant_range(dtype, qmin_lb, qmax_ub, reduce=options.get("reduce_range", False))
    symmetric = options.get("qscheme", "symmetric" if qmin < 0 else "affine") == "symmetric"
    per_tensor, per_channel = _OBSERVER_KINDS[options.get("observer", "minmax")]
    kwargs = {"dtype": dtype, **_qrange(dtype, qmin, qmax, options), "eps": _eps(scale_min)}
    if options.get("granularity") == "per_channel":
        if per_channel is None:
            return None, f"no per-channel {options['observer']} observer"
        qscheme = torch.per_channel_symmetric if symmetric else torch.per_channel_affine
        return per_channel.with_args(
            qscheme=qscheme,
            ch_axis=options.get("ch_axis", 0),
            **kwargs,
            **_averaging(per_channel, options),
        ), ""
    qscheme = torch.per_tensor_symmetric if symmetric else torch.per_tensor_affine
    return per_tensor.with_args(qscheme=qscheme, **kwargs, **_averaging(per_tensor, options)), ""


def _weight_only_qconfig(weight: Constraints):
    """Float activations, quantized weights: embeddings (float qparams) or weight-only linear."""
    dtype = weight.dtype
    if dtype is None or dtype in _FLOATS:
        return None, "nothing to quantize: float input, output and weight"
    if dtype in (torch.quint8, *_SUB_BYTE):
        # Like torch's float_qparams_weight_only_qconfig(_4bit): per-row float scale and offset.
        # ``scale_min_lower_bound`` is its eps, as for every other observer.
        observer = PerChannelMinMaxObserver.with_args(
            dtype=dtype,
            qscheme=torch.per_channel_affine_float_qparams,
            ch_axis=0,
            eps=_eps(weight.scale_min_lower_bound),
        )
    else:
        observer, reason = _weight_observer(weight)
        if observer is None:
            return None, reason
    return QConfig(activation=_placeholder(torch.float32), weight=observer), ""


def _dynamic_qconfig(inp: Constraints, weight: Constraints):
    """Like torch's default_dynamic_qconfig / float16_dynamic_qconfig: the activation observer is
    a placeholder flagged dynamic, carrying the dtype the kernel quantizes to at run time.

    A mapping that names a calibrating ``observer`` (version 9: older files' is dropped when
    they are read) gets that observer, flagged dynamic: what a dynamic QAT fake-quantize
    wraps (XNNPACK's and X86's: a moving average with ``averaging_constant`` 1)."""
    dtype, qmin_lb, qmax_ub, scale_min = inp[:4]
    options = dict(inp.options)
    observer = _OBSERVER_KINDS.get(options.get("observer", "placeholder"), (None,))[0]
    if options.get("observer") not in CALIBRATING_OBSERVERS:
        observer = None
    if dtype in _FLOATS:
        activation = PlaceholderObserver.with_args(dtype=dtype, is_dynamic=True)
    elif dtype in _QRANGE:
        qmin, qmax = _quant_range(dtype, qmin_lb, qmax_ub, reduce=False)
        kwargs = {"dtype": dtype, "quant_min": qmin, "quant_max": qmax, "eps": _eps(scale_min)}
        if observer is None:
            activation = PlaceholderObserver.with_args(**kwargs, is_dynamic=True)
        else:
            if options.get("qscheme") == "symmetric":
                kwargs["qscheme"] = torch.per_tensor_symmetric
            # torch's dynamic moving average takes only 1 (BS218 refuses a spec's other).
            averaging = _averaging(observer, {"averaging_constant": 1, **options})
            activation = observer.with_args(**kwargs, is_dynamic=True, **averaging)
    else:
        return None, f"no dynamic observer produces {dtype_label(dtype)}"
    weight_obs, reason = _weight_observer(weight)
    if weight_obs is None:
        return None, reason
    return QConfig(activation=activation, weight=weight_obs), ""


def _float_qconfig(dtype: torch.dtype, weight_dtype: torch.dtype | None):
    """Static fp16/bf16 "quantization": casts, like torch's float16_static_qconfig."""
    weight = _placeholder(weight_dtype if weight_dtype in _FLOATS else dtype)
    return QConfig(activation=_placeholder(dtype), weight=weight), ""


def _placeholder(dtype: torch.dtype):
    return PlaceholderObserver.with_args(dtype=dtype)


def pattern_ops(config: BackendPatternConfig) -> list[Any]:
    """The ops of a pattern config in forward order (see :func:`forward_ops`)."""
    return forward_ops(config.pattern, config._pattern_complex_format)


def forward_ops(pattern: Any, complex_format: Any = None) -> list[Any]:
    """The ops of a pattern in forward order (module classes, functions or method names),
    from its ``pattern`` or else its legacy ``complex_format``.

    The legacy complex format is reversed and nested; its ``MatchAllNode`` placeholders and
    integer argument literals are not ops and are left out.
    """
    if pattern is not None:
        return list(pattern) if isinstance(pattern, tuple) else [pattern]
    ops: list[Any] = []

    def walk(node: Any) -> None:
        if isinstance(node, tuple):
            for child in node:
                walk(child)
        elif node is not MatchAllNode and not (isinstance(node, int) and type(node) is not bool):
            ops.append(node)

    walk(complex_format)
    return list(reversed(ops))


def satisfies(qconfig: QConfig | None, dtype_config: DTypeConfig) -> bool:
    """Whether torch's prepare would accept ``qconfig`` for ``dtype_config``.

    Mirrors ``_is_input_arg_dtype_supported_by_backend`` / ``_is_output_dtype_supported_by_backend``
    (dtype and dynamic-ness checks) and delegates the constraint checks to torch's own
    ``_qconfig_satisfies_dtype_config_constraints``.
    """
    from torch.ao.quantization.fx.utils import _qconfig_satisfies_dtype_config_constraints

    if qconfig is None:
        return False
    with quiet():
        activation = qconfig.activation()
        weight = qconfig.weight() if qconfig.weight is not None else None
        act_dtype, act_dynamic = activation.dtype, bool(getattr(activation, "is_dynamic", False))
        output_dtype = torch.float32 if act_dynamic else act_dtype
        checks = [
            dtype_config.input_dtype is None
            or (
                dtype_config.input_dtype == act_dtype
                and bool(dtype_config.is_dynamic) == act_dynamic
                and _qconfig_satisfies_dtype_config_constraints(
                    qconfig, dtype_config.input_dtype_with_constraints
                )
            ),
            dtype_config.output_dtype is None
            or (
                dtype_config.output_dtype == output_dtype
                and _qconfig_satisfies_dtype_config_constraints(
                    qconfig, dtype_config.output_dtype_with_constraints
                )
            ),
            dtype_config.weight_dtype is None
            or (
                weight is not None
                and dtype_config.weight_dtype == weight.dtype
                and _qconfig_satisfies_dtype_config_constraints(
                    qconfig, dtype_config.weight_dtype_with_constraints, is_activation=False
                )
            ),
        ]
    return all(checks)
