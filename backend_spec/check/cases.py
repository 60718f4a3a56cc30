"""One check case: a pattern × one of its DTypeConfigs (post-training or QAT), or a fusion.

Per case (:func:`check_case`): synthesize a model containing the pattern, then prepare it with a
QConfig meeting the case's DTypeConfig (``prepare_fx``, or ``prepare_qat_fx`` for a pattern with
a ``qat_module``), calibrate, ``convert_to_reference_fx`` and ``convert_fx``, and verify that

(a) observers surround the pattern (it matched and its QConfig was accepted),
(b) the modules are the declared ones: ``fused_module`` after fusion, ``qat_module`` after
    prepare_qat, a module that fits ``root_module``, and ``reference_quantized_module`` in the
    reference model, whose first op reads dequantized inputs of the declared input dtype and
    whose last op's output is quantized to the declared output dtype,
(c) the lowered model runs (on an engine that has kernels for the dtypes; else the reference
    model stands in, and the report says so), and
(d) its output's SQNR against the float model reaches :data:`SQNR_THRESHOLDS`.

Each case also records a behaviour :mod:`signature` for the golden. Fusion-only patterns (no
DTypeConfigs) are a ``fusion`` case: ``fuse_fx`` must build the declared ``fused_module``.
Whatever cannot be exercised is a ``skip`` with a reason, never a silent pass.
"""

from __future__ import annotations

import contextlib
import copy
import io
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from backend_spec import ir
from backend_spec._torch import BackendConfig, DTypeConfig, ObservationType, quiet, torch
from backend_spec.analysis.qconfigs import (
    PatternQConfig,
    each_dtype_config,
    pattern_ops,
    qat_qconfig,
    runs_on,
)
from backend_spec.check import graphs
from backend_spec.check.engines import using_engine
from backend_spec.check.results import PatternResult
from backend_spec.check.signature import (
    Signature,
    class_name,
    converted_signature,
    graph_lines,
    prepared_signature,
)
from backend_spec.check.synthesize import SkipPattern, Synthesized, synthesize
from backend_spec.ir.lower import entries_of
from backend_spec.names.dtypes import dtype_name
from backend_spec.names.labels import object_label
from backend_spec.specfile.fields import ENTRY_FIELDS

with quiet():
    from torch.ao.quantization import QConfigMapping
    from torch.ao.quantization.fake_quantize import FixedQParamsFakeQuantize
    from torch.ao.quantization.fx.custom_config import PrepareCustomConfig
    from torch.ao.quantization.observer import FixedQParamsObserver
    from torch.ao.quantization.quantize_fx import (
        _attach_meta_to_node_if_not_exist,
        _fuse_fx,
        convert_fx,
        convert_to_reference_fx,
        fuse_fx,
        prepare_fx,
        prepare_qat_fx,
    )

#: Minimum SQNR (dB) of the lowered model's output against float, by quantization kind.
#: 8-bit uniform quantization of a normal signal gives ~40 dB per tensor; a pattern stacks two
#: or three quantizations (input, weight, output; x86 uses a 7-bit activation range), so 20 dB
#: is the usual acceptance bar for 8-bit static and dynamic. fp16 loses only ~60 dB worth of
#: mantissa; 4-bit weights give roughly 6 dB per bit less than 8-bit.
SQNR_THRESHOLDS: dict[str, float] = {
    "static": 20.0,
    "dynamic": 20.0,
    "fp16": 40.0,
    "weight-only": 25.0,
    "weight-only 4-bit": 10.0,
}

#: SQNR reported for an exact result (and the bound of every reported figure).
SQNR_CAP_DB = 200.0

#: The note of a result whose SQNR comes from the reference model (the engine has no kernels).
REFERENCE_FALLBACK = "reference model"


def sqnr_db(reference: Any, actual: Any) -> float | None:
    """Signal-to-quantization-noise ratio in dB; ``None`` for non-float outputs."""
    if isinstance(reference, (tuple, list)):
        reference, actual = reference[0], actual[0]
    if not (isinstance(reference, torch.Tensor) and reference.is_floating_point()):
        return None
    actual = actual.dequantize() if actual.is_quantized else actual
    noise = (reference.float() - actual.float()).norm().item()
    signal = reference.float().norm().item()
    if noise == 0 or signal == 0:
        # Exact results (or an all-zero reference) have no finite ratio; JSON needs a number.
        return SQNR_CAP_DB if noise == 0 else -SQNR_CAP_DB
    return round(max(-SQNR_CAP_DB, min(SQNR_CAP_DB, 20 * math.log10(signal / noise))), 2)


def run_model(model: torch.nn.Module, inputs: tuple) -> Any:
    """Run without grad on clones (in-place ops such as ``relu_`` must not change the next run's
    inputs); stderr is captured because a failing GraphModule prints its code there."""
    with torch.no_grad(), contextlib.redirect_stderr(io.StringIO()):
        return model(*(t.clone() if isinstance(t, torch.Tensor) else t for t in inputs))


# --- kinds ----------------------------------------------------------------------------------


def kind_of(dtype_config: DTypeConfig) -> str:
    """A DTypeConfig's quantization kind, in the vocabulary of :func:`graphs.node_kind`."""
    in_dtype, weight = dtype_config.input_dtype, dtype_config.weight_dtype
    if in_dtype == torch.float16:
        return "fp16"
    if dtype_config.is_dynamic:
        return f"dynamic {dtype_name(in_dtype)}"
    if in_dtype in (None, torch.float32):
        return f"weight-only {dtype_name(weight) if weight is not None else 'float'}"
    return f"static {dtype_name(in_dtype)}"


def threshold_for(kind: str) -> float:
    if kind.startswith("weight-only") and ("4x2" in kind or "2x4" in kind):
        return SQNR_THRESHOLDS["weight-only 4-bit"]
    return SQNR_THRESHOLDS.get(kind.split()[0], SQNR_THRESHOLDS["static"])


def _fixed_input_range(dtype_config: DTypeConfig) -> tuple[float, float] | None:
    """The float range a fixed-qparams input constraint can represent."""
    dwc = dtype_config.input_dtype_with_constraints
    if dwc.scale_exact_match is None or dwc.zero_point_exact_match is None:
        return None
    qmin = dwc.quant_min_lower_bound if dwc.quant_min_lower_bound is not None else 0
    qmax = dwc.quant_max_upper_bound if dwc.quant_max_upper_bound is not None else 255
    scale, zero_point = dwc.scale_exact_match, dwc.zero_point_exact_match
    return scale * (qmin - zero_point), scale * (qmax - zero_point)


# --- cases ----------------------------------------------------------------------------------


class PatternFailure(Exception):
    """A verification step failed; the message says which and why (``detail``: torch's text)."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


@dataclass
class Case:
    """One thing to check: ``mode`` is ``ptq`` or ``qat`` (with ``entry``'s DTypeConfig number
    ``index``) or ``fusion`` (a pattern without DTypeConfigs)."""

    label: str
    mode: str
    index: int | None
    entry: PatternQConfig
    backend_config: BackendConfig
    engine: str
    #: Filled in as the stages run, so a failing case still records what it produced.
    signature: Signature = field(default_factory=dict)
    #: What the spec does that costs accuracy, said with a low SQNR (see :func:`_clipped_input`).
    accuracy_note: str = ""

    @property
    def config(self) -> Any:
        return self.entry.config

    @property
    def key(self) -> str:
        """The key of this case's result (:attr:`PatternResult.key`)."""
        return PatternResult(self.label, "skip", mode=self.mode, dtype_index=self.index).key

    @property
    def dtype_config(self) -> DTypeConfig:
        assert self.entry.dtype_config is not None
        return self.entry.dtype_config


def pattern_label(config: Any) -> str:
    """A readable pattern name with bespec's aliases (``(nn.Conv2d, nn.ReLU)``; complex-format
    patterns say so)."""
    from backend_spec.names.labels import config_label

    return config_label(config)


def build_cases(backend_config: BackendConfig, engine: str) -> list[Case]:
    """Every case of a backend, in pattern order: each DTypeConfig of each pattern (identical
    ones once), QAT for patterns with a ``qat_module`` (static and weight-only kinds), and a
    fusion case for each pattern without DTypeConfigs."""
    labels = _unique_labels(backend_config)
    by_config: dict[int, list[tuple[int, PatternQConfig]]] = {}
    for index, entry in each_dtype_config(backend_config, engine):
        by_config.setdefault(id(entry.config), []).append((index, entry))
    cases = []
    for config in backend_config.configs:
        label = labels[id(config)]
        if not config.dtype_configs:
            entry = PatternQConfig(config, None, None, "no dtype_configs")
            cases.append(Case(label, "fusion", None, entry, backend_config, engine))
            continue
        seen: set[str] = set()
        for index, entry in by_config[id(config)]:
            described = repr(_dtype_config_text(entry.facts))
            if described in seen:
                continue
            seen.add(described)
            cases.append(Case(label, "ptq", index, entry, backend_config, engine))
            if config.qat_module is not None and _qat_kind(entry):
                cases.append(Case(label, "qat", index, entry, backend_config, engine))
    return cases


def _qat_kind(entry: PatternQConfig) -> bool:
    """Static and weight-only configs train with fake-quantizes; torch's QAT embeddings only
    take float-qparams tables (quint8, quint4x2), so other weight-only dtypes have no QAT."""
    if entry.qconfig is None or entry.dtype_config is None:
        return False
    kind = kind_of(entry.dtype_config)
    if kind.startswith("weight-only"):
        return entry.dtype_config.weight_dtype in (torch.quint8, torch.quint4x2)
    return kind.startswith("static")


def _unique_labels(backend_config: BackendConfig) -> dict[int, str]:
    labels, seen = {}, {}
    for config in backend_config.configs:
        label = pattern_label(config)
        seen[label] = seen.get(label, 0) + 1
        labels[id(config)] = label if seen[label] == 1 else f"{label}#{seen[label]}"
    return labels


def _dtype_config_text(dtype_config: ir.DTypeConfig | None) -> list[str]:
    """The DTypeConfig under test (of the intermediate form) as spec text (identifies the case
    in the golden)."""
    if dtype_config is None:
        return []
    from backend_spec.compiler.described import dtype_config_doc

    return [f"{key}: {value}" for key, value in dtype_config_doc(dtype_config).items()]


def _plain(value: Any) -> Any:
    return value.name.lower() if isinstance(value, ObservationType) else value


def declared_text(backend_config: BackendConfig, config: Any) -> list[str]:
    """The pattern entry's fields as declared: an edit that these synthesized models cannot
    show (a fusion pattern's observation type, once torch matches the fused module instead)
    still drifts, naming the field."""
    from backend_spec.ir.lower import entries_of
    from backend_spec.names.fusers import sequential_class

    lines = []
    # The field table's entry fields (the pattern and the DTypeConfigs identify the case),
    # then the version 2 pattern keys: a field added to the table is recorded with no edit here.
    declared = [(f.key, getattr(config, f.getter, None)) for f in ENTRY_FIELDS]
    for key, value in [*declared, *entries_of(backend_config)(config).pt2e_options().items()]:
        if value is None or value == {}:
            continue
        if key == "fuser_method" and sequential_class(value) is not None:
            text = f"sequential {object_label(sequential_class(value))}"
        elif isinstance(value, ObservationType):
            text = value.name.lower()
        elif isinstance(value, dict):  # an observation type map shows the types by name
            text = repr({k: _plain(v) for k, v in sorted(value.items())})
        elif isinstance(value, (str, list)):
            text = repr(value)
        else:
            text = object_label(value)
        lines.append(f"{key}: {text}")
    return lines


def check_case(case: Case) -> PatternResult:
    """Exercise one case end to end; never raises for a pattern's own problems."""
    case.signature["declared"] = declared_text(case.backend_config, case.config)
    result = PatternResult(case.label, "skip", mode=case.mode, dtype_index=case.index)
    if case.mode == "fusion":
        result.kind = "fusion"
        return _finish(case, result, lambda: run_fusion_case(case))
    if case.entry.qconfig is None:
        result.kind = kind_of(case.dtype_config)
        result.reason = "no QConfig can meet this DTypeConfig"
        result.detail = case.entry.reason
        case.signature["dtype_config"] = _dtype_config_text(case.entry.facts)
        result.signature = case.signature
        return result
    result.kind = kind_of(case.dtype_config)
    return _finish(case, result, lambda: run_fx_case(case, result.kind))


def _finish(
    case: Case, result: PatternResult, action: Callable[[], tuple[float | None, bool]]
) -> PatternResult:
    try:
        with using_engine(case.engine):
            sqnr, fallback = action()
    except SkipPattern as exc:
        result.reason, result.detail = shorten(str(exc)), str(exc)
        result.hint = getattr(exc, "hint", "")
    except PatternFailure as exc:
        result.status, result.reason, result.detail = "fail", shorten(str(exc)), exc.detail
    except Exception as exc:  # a torch error we did not anticipate: still the pattern's failure
        result.status, result.reason = "fail", f"unexpected {short_exc(exc)}"
        result.detail = full_exc(exc)
    else:
        result.status, result.sqnr_db, result.reference_fallback = "pass", sqnr, fallback
        bar = threshold_for(result.kind)
        if sqnr is not None and result.kind != "fusion" and sqnr < bar:
            result.status = "fail"
            result.reason = f"SQNR {sqnr:.1f} dB < {bar:.0f} dB"
            if case.accuracy_note:
                result.detail = f"{result.reason}: {case.accuracy_note}"
                result.reason = shorten(result.detail)
    result.signature = case.signature
    return result


#: Longest reason shown in a table; the full text is the result's ``detail``.
REASON_CHARS = 100


def shorten(text: str, limit: int = REASON_CHARS) -> str:
    """The first line of ``text``, cut at a word boundary before ``limit`` characters."""
    lines = text.strip().splitlines()
    first = lines[0] if lines else ""
    if len(first) <= limit:
        return first
    cut = first[: limit - 1]
    if " " in cut[limit // 2 :]:  # end at a word boundary when one is near
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(" ,:;(") + "…"


#: torch's long "no kernel" errors -> a short reason (the full text stays in ``detail``).
_NO_KERNEL = (
    re.compile(r"Could not run '(?P<op>[^']+)' with arguments from the '(?P<where>[^']+)'"),
    re.compile(r"Didn't find engine for operation (?P<op>\S+?)\.?(?P<where>[A-Za-z0-9]*)$", re.M),
)


def short_exc(exc: BaseException) -> str:
    """``Type: first line``, shortened (the full text goes to ``detail``); torch's missing
    kernel errors become ``no QuantizedCPU kernel for aten::sigmoid.out``."""
    text = str(exc).strip()
    for pattern in _NO_KERNEL:
        found = pattern.search(text)
        if found:
            where = found.group("where")
            return f"no {where + ' ' if where else ''}kernel for {found.group('op')}"
    return shorten(f"{type(exc).__name__}: {text}")


def full_exc(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).strip()}"


def _stage(name: str, action: Callable[[], Any], hint: str = "") -> Any:
    try:
        return action()
    except (SkipPattern, PatternFailure):
        raise
    except Exception as exc:
        message = f"{name}: {hint}" if hint else f"{name}: {short_exc(exc)}"
        raise PatternFailure(message, f"{name}: {full_exc(exc)}") from exc


# --- the FX flow ----------------------------------------------------------------------------


def run_fusion_case(case: Case) -> tuple[float | None, bool]:
    """A pattern without DTypeConfigs: ``fuse_fx`` must turn it into ``fused_module``."""
    config = case.config
    if config.fuser_method is None and config.fused_module is None:
        raise SkipPattern("no dtype_configs and no fusion: nothing to exercise")
    synth = synthesize(config, backend_config=case.backend_config)
    fused = _verify_fused_module(case, synth)
    case.signature["fused"] = graph_lines(fused)
    float_out = run_model(synth.model, synth.example_inputs)
    return sqnr_db(float_out, run_model(fused, synth.example_inputs)), False


def run_fx_case(case: Case, kind: str) -> tuple[float | None, bool]:
    """The FX graph mode flow of a ``ptq`` or ``qat`` case; returns (SQNR, whether it is the
    reference model's because the engine has no kernels). A sibling flow (pt2e) can take the
    same :class:`Case` and return the same pair."""
    config, qat = case.config, case.mode == "qat"
    case.signature["dtype_config"] = _dtype_config_text(case.entry.facts)
    qconfig = _qat_twin(case) if qat else case.entry.qconfig
    synth = synthesize(
        config,
        qconfig=qconfig,
        input_range=_fixed_input_range(case.dtype_config),
        backend_config=case.backend_config,
    )
    float_out = run_model(synth.model, synth.example_inputs)
    if config.fused_module is not None and not qat:
        _verify_fused_module(case, synth)
    prepared = _prepare(case, synth, qconfig, qat)
    for batch in synth.calibration:
        _stage("calibration", lambda batch=batch: run_model(prepared, batch))
    case.signature.update(prepared_signature(prepared))
    not_observed = config.observation_type == ObservationType.INPUT_OUTPUT_NOT_OBSERVED
    first, last = _locate(prepared, synth)
    case.accuracy_note = _clipped_input(prepared, first, synth)
    _verify_prepared_modules(case, prepared, first, qat)
    _verify_observed(prepared, first, last, kind, not_observed)
    reference = _stage(
        "convert_to_reference_fx",
        lambda: convert_to_reference_fx(
            copy.deepcopy(prepared), backend_config=case.backend_config
        ),
        hint=_reference_hint(config),
    )
    fallback = not runs_on(case.dtype_config, case.engine)
    lowered = None
    if not fallback:  # convert_fx consumes the prepared model: its signature is taken
        lowered = _stage(
            "convert_fx", lambda: convert_fx(prepared, backend_config=case.backend_config)
        )
    case.signature.update(converted_signature(reference, lowered))
    if not not_observed:
        _verify_reference(case, reference, first.name, last.name, kind)
    if fallback:
        return sqnr_db(float_out, run_model(reference, synth.example_inputs)), True
    out = _stage(f"running on {case.engine}", lambda: run_model(lowered, synth.example_inputs))
    return sqnr_db(float_out, out), False


def _qat_twin(case: Case) -> Any:
    """The case's QAT QConfig; a ``fake_quant`` kind that cannot be built fails the case."""
    try:
        return qat_qconfig(case.entry.qconfig, case.entry.facts)
    except ValueError as exc:
        raise PatternFailure(f"no QAT QConfig: {exc}") from None


def _custom_leaves(case: Case) -> PrepareCustomConfig:
    """The pattern's own (non-torch) module classes as non-traceable leaves: FX would trace
    through them otherwise, and the pattern, which names the module, could never match."""
    custom = [
        op
        for op in pattern_ops(case.config)
        if isinstance(op, type)
        and issubclass(op, torch.nn.Module)
        and not op.__module__.startswith("torch.")
    ]
    return PrepareCustomConfig().set_non_traceable_module_classes(custom)


def _prepare(case: Case, synth: Synthesized, qconfig: Any, qat: bool) -> Any:
    mapping = QConfigMapping().set_global(qconfig)
    model = copy.deepcopy(synth.model)
    options = {"backend_config": case.backend_config, "prepare_custom_config": _custom_leaves(case)}
    if not qat:
        return _stage(
            "prepare_fx", lambda: prepare_fx(model, mapping, synth.example_inputs, **options)
        )
    prepared = _stage(
        "prepare_qat_fx",
        lambda: prepare_qat_fx(model.train(), mapping, synth.example_inputs, **options),
    )
    # Observe in eval mode: BatchNorm keeps the float model's statistics, so SQNR compares like
    # with like (fake-quantizes observe in either mode).
    return prepared.eval()


def _reference_hint(config: Any) -> str:
    ref, root = config.reference_quantized_module, config.root_module
    if ref is None:
        return ""
    root_name = object_label(root) if root is not None else "?"
    return f"is reference_quantized_module {object_label(ref)} right for {root_name}?"


def _first_node(gm: Any, synth: Synthesized) -> Any:
    return _locate(gm, synth)[0]


def _locate(gm: Any, synth: Synthesized) -> tuple[Any, Any]:
    """The pattern's first and last node in a graph. Fusion folds the later ops into the first
    op's module, so the last node is the last op that is still there."""
    found = [graphs.find_ref(gm, ref.kind, ref.target) for ref in synth.ops]
    if not found[0]:
        raise PatternFailure("the pattern's first op is not in the graph")
    last = next(nodes for nodes in reversed(found) if nodes)
    return found[0][0], last[-1]


def _clipped_input(prepared: Any, first: Any, synth: Synthesized) -> str:
    """The input of a fixed-qparams op observed with fixed qparams whose range the data leaves
    ("" otherwise). FX observes such an op's input with its QConfig's activation, the output's
    fixed observer, wherever no producer observes it: a sigmoid after a float op (or a model
    input) sees its input clipped to [0, 1)."""
    values = [t for t in synth.example_inputs if isinstance(t, torch.Tensor)]
    floats = [t for t in values if t.is_floating_point() and t.numel()]
    if not floats:
        return ""
    low, high = min(float(t.min()) for t in floats), max(float(t.max()) for t in floats)
    for arg in graphs.tensor_args(first):
        observer = _module_at(prepared, arg)
        if not isinstance(observer, (FixedQParamsObserver, FixedQParamsFakeQuantize)):
            continue
        scale, zero = float(observer.scale), int(observer.zero_point)
        lo, hi = (observer.quant_min - zero) * scale, (observer.quant_max - zero) * scale
        if low < lo or high > hi:
            return (
                f"its input is observed with the output's fixed qparams (range [{lo:g}, "
                f"{hi:g}]; inputs here span [{low:.3g}, {high:.3g}]): FX does so wherever no "
                "producer observes the input, so the input is clipped. Give input_dtype the "
                "same fixed qparams to state it, and quantize the producer in models"
            )
    return ""


def _module_at(gm: Any, node: Any) -> torch.nn.Module | None:
    return gm.get_submodule(str(node.target)) if node.op == "call_module" else None


def _verify_fused_module(case: Case, synth: Synthesized) -> Any:
    """Fusion must build the declared ``fused_module``, in eval mode (``fuse_fx``, as
    prepare_fx fuses) or else in training mode (as prepare_qat_fx does; conv-bn fusers fold the
    BatchNorm away in eval mode and build the fused module only for QAT). Returns the fused
    model in eval mode."""
    expected = case.config.fused_module
    fused = _stage(
        "fuse_fx", lambda: fuse_fx(copy.deepcopy(synth.model), backend_config=case.backend_config)
    )
    built = type(_module_at(fused, _first_node(fused, synth)))
    if expected is None or built is expected:
        return fused
    try:
        trained = _fuse_for_qat(synth.model, case.backend_config)
    except Exception:  # fusers without QAT support refuse training mode: eval decides
        trained = None
    if trained is not None and type(_module_at(trained, _first_node(trained, synth))) is expected:
        return trained.eval()
    raise PatternFailure(
        f"fusion built {class_name(built)}, not fused_module {class_name(expected)}"
    )


def _fuse_for_qat(model: torch.nn.Module, backend_config: BackendConfig) -> Any:
    graph_module = torch.fx.symbolic_trace(copy.deepcopy(model).train())
    _attach_meta_to_node_if_not_exist(graph_module)
    return _fuse_fx(graph_module, True, None, backend_config)


def _verify_prepared_modules(case: Case, prepared: Any, first: Any, qat: bool) -> None:
    """(b) before convert: the QAT and root modules are the declared ones."""
    config = case.config
    module = _module_at(prepared, first)
    if module is None:
        return
    if qat and config.qat_module is not None:
        if type(module) is not config.qat_module:
            raise PatternFailure(
                f"prepare_qat_fx built {class_name(type(module))}, "
                f"not qat_module {class_name(config.qat_module)}"
            )
        if not _has_pattern(case, config.qat_module):
            raise MissingEntry(
                f"QAT not exercised: no pattern quantizes qat_module "
                f"{class_name(config.qat_module)} (add the entry shown below)",
                qat_entry_hint(case),
            )
    if not qat and config.fused_module is not None and not _has_pattern(case, type(module)):
        raise PatternFailure(
            f"no pattern quantizes the fused module {class_name(type(module))}: add one"
        )
    root = config.root_module
    if root is None or isinstance(module, root):
        return
    first_part = module[0] if isinstance(module, torch.nn.Sequential) and len(module) else None
    if not isinstance(first_part, root):
        raise PatternFailure(
            f"root_module {class_name(root)} does not fit the pattern's module "
            f"{class_name(type(module))}"
        )


class MissingEntry(SkipPattern):
    """A case that would run with one more pattern entry; ``hint`` is that entry in YAML."""

    def __init__(self, reason: str, hint: str) -> None:
        super().__init__(reason)
        self.hint = hint


def qat_entry_hint(case: Case) -> str:
    """The pattern entry that quantizes the case's ``qat_module``, as a YAML list item: the
    QAT class with the entry's dtype configs, root and reference modules (as torch's own
    backends declare ``nnqat.Linear`` beside ``nn.Linear``)."""
    config = case.config
    names = [d.name for d in entries_of(case.backend_config)(config).dtype_configs]
    configs = f"[{', '.join(names)}]" if names and all(names) else "<this entry's dtype_configs>"
    lines = [f"- pattern: {object_label(config.qat_module)}", f"  dtype_configs: {configs}"]
    for key in ("root_module", "reference_quantized_module"):
        value = getattr(config, key)
        if value is not None:
            lines.append(f"  {key}: {object_label(value)}")
    return "\n".join(lines)


def _has_pattern(case: Case, module_class: type) -> bool:
    return any(c.pattern is module_class for c in case.backend_config.configs)


def _verify_observed(prepared: Any, first: Any, last: Any, kind: str, not_observed: bool) -> None:
    """(a): observers on the pattern's inputs and, for static kinds, on its output."""
    modules = dict(prepared.named_modules(remove_duplicate=False))
    inputs_observed = any(graphs.is_observer(arg, modules) for arg in graphs.tensor_args(first))
    output_observed = any(graphs.is_observer(user, modules) for user in last.users)
    if not_observed:
        if inputs_observed and output_observed:
            raise PatternFailure("declared input_output_not_observed, yet observers surround it")
        return
    if kind.startswith("weight-only"):
        return  # float activations: the weight observer lives inside the module
    if not inputs_observed:
        raise PatternFailure(
            "not quantized: no observer on its inputs (the pattern did not match, or torch "
            "rejected the QConfig for its DTypeConfig)"
        )
    if kind.startswith("static") and not output_observed:
        raise PatternFailure("not quantized: no observer on its output")


def _verify_reference(case: Case, reference: Any, first_name: str, last_name: str, kind: str):
    """(b) after convert: dequantize -> op -> quantize with the declared dtypes; the reference
    module."""
    nodes = {node.name: node for node in reference.graph.nodes}
    first, last = nodes.get(first_name), nodes.get(last_name)
    if first is None or last is None:
        raise PatternFailure("the pattern's nodes disappeared in the reference model")
    dtype_config = case.dtype_config
    expected_ref = case.config.reference_quantized_module
    if expected_ref is not None and first.op == "call_module":
        found = graphs.reference_module(reference, first)
        if not isinstance(found, expected_ref):
            actual = object_label(type(found or reference.get_submodule(str(first.target))))
            raise PatternFailure(  # spec spellings: "Conv2d, not Conv2d" told the user nothing
                f"reference model holds {actual}, not reference_quantized_module "
                f"{object_label(expected_ref)} (convert_to_reference_fx)"
            )
    if kind.startswith("weight-only"):
        return
    incoming = graphs.input_quantization(first)
    expected_in = dtype_config.input_dtype
    if incoming is None or incoming[1] != expected_in:
        got = "float inputs" if incoming is None else dtype_name(incoming[1])
        raise PatternFailure(f"reference model feeds it {got}, not {dtype_name(expected_in)}")
    if kind.startswith("static"):
        outgoing = graphs.output_quantization(last)
        expected_out = dtype_config.output_dtype
        if outgoing is None or outgoing[1] != expected_out:
            got = "a float output" if outgoing is None else dtype_name(outgoing[1])
            raise PatternFailure(
                f"reference model quantizes its output to {got}, not {dtype_name(expected_out)}"
            )
