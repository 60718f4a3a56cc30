"""Quantize, on the host CPU, a minimal model per pattern and the zoo models; report what happened.

Per pattern (:func:`check_pattern`): synthesize a model containing the pattern, then
``prepare_fx`` with a QConfig meeting the pattern's chosen DTypeConfig, calibrate,
``convert_to_reference_fx`` and ``convert_fx``, and verify that

(a) observers surround the pattern (it matched and its QConfig was accepted),
(b) in the reference model its first op reads dequantized inputs of the declared input dtype and
    its last op's output is quantized to the declared output dtype (weighted modules: the declared
    reference quantized module is in place; dynamic and weight-only shapes have their own rules),
(c) the lowered model runs, and
(d) its output's SQNR against the float model reaches :data:`SQNR_THRESHOLDS`.

Whatever cannot be exercised is a ``skip`` with a reason, never a silent pass.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import math
import os
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from backend_spec._torch import BackendConfig, DTypeConfig, ObservationType, quiet, torch
from backend_spec.analysis.qconfigs import PatternQConfig, choose, qconfig_mapping, runs_on
from backend_spec.check import graphs
from backend_spec.check.results import CheckReport, ModelResult, PatternResult
from backend_spec.check.synthesize import SkipPattern, Synthesized, synthesize

with quiet():
    from torch.ao.quantization import QConfigMapping
    from torch.ao.quantization.quantize_fx import convert_fx, convert_to_reference_fx, prepare_fx

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

#: Engines tried, in order, when none is given.
ENGINE_PREFERENCE = ("x86", "fbgemm", "qnnpack")


def host_engine(engine: str | None = None) -> str:
    """``engine`` if this torch supports it, else the first supported of x86/fbgemm/qnnpack."""
    supported = torch.backends.quantized.supported_engines
    if engine is not None:
        if engine not in supported:
            raise ValueError(f"engine {engine!r} is not supported here (have {supported})")
        return engine
    for candidate in ENGINE_PREFERENCE:
        if candidate in supported:
            return candidate
    raise RuntimeError(f"no quantized CPU engine available (have {supported})")


@contextlib.contextmanager
def using_engine(engine: str) -> Iterator[None]:
    """Run with ``torch.backends.quantized.engine`` set, restoring the previous one after."""
    previous = torch.backends.quantized.engine
    torch.backends.quantized.engine = engine
    try:
        with quiet(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        torch.backends.quantized.engine = previous


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


def _run(model: torch.nn.Module, inputs: tuple) -> Any:
    # Inputs are cloned: in-place ops (relu_, sigmoid_) must not change the next run's inputs.
    # stderr is captured: a failing GraphModule prints its generated code there before raising,
    # and the check reports the exception itself.
    with torch.no_grad(), contextlib.redirect_stderr(io.StringIO()):
        return model(*(t.clone() for t in inputs))


# --- kinds ----------------------------------------------------------------------------------


def kind_of(dtype_config: DTypeConfig) -> str:
    """A DTypeConfig's quantization kind, in the vocabulary of :func:`graphs.node_kind`."""
    in_dtype, weight = dtype_config.input_dtype, dtype_config.weight_dtype
    if in_dtype == torch.float16:
        return "fp16"
    if dtype_config.is_dynamic:
        return f"dynamic {graphs.dtype_name(in_dtype)}"
    if in_dtype in (None, torch.float32):
        return f"weight-only {graphs.dtype_name(weight)}"
    return f"static {graphs.dtype_name(in_dtype)}"


def threshold_for(kind: str) -> float:
    if kind.startswith("weight-only") and ("4x2" in kind or "2x4" in kind):
        return SQNR_THRESHOLDS["weight-only 4-bit"]
    return SQNR_THRESHOLDS[kind.split()[0]]


def _fixed_input_range(dtype_config: DTypeConfig) -> tuple[float, float] | None:
    """The float range a fixed-qparams input constraint can represent."""
    dwc = dtype_config.input_dtype_with_constraints
    if dwc.scale_exact_match is None or dwc.zero_point_exact_match is None:
        return None
    qmin = dwc.quant_min_lower_bound if dwc.quant_min_lower_bound is not None else 0
    qmax = dwc.quant_max_upper_bound if dwc.quant_max_upper_bound is not None else 255
    scale, zero_point = dwc.scale_exact_match, dwc.zero_point_exact_match
    return scale * (qmin - zero_point), scale * (qmax - zero_point)


# --- one pattern ----------------------------------------------------------------------------


class PatternFailure(Exception):
    """A verification step failed; the message says which and why."""


@dataclass
class _Case:
    """One pattern under test and what was chosen for it."""

    label: str
    entry: PatternQConfig
    backend_config: BackendConfig
    engine: str

    @property
    def dtype_config(self) -> DTypeConfig:
        assert self.entry.dtype_config is not None
        return self.entry.dtype_config


def check_pattern(
    backend_config: BackendConfig, entry: PatternQConfig, label: str, engine: str
) -> PatternResult:
    """Exercise one pattern end to end; never raises for a pattern's own problems."""
    if entry.qconfig is None or entry.dtype_config is None:
        return PatternResult(label, "skip", f"no usable DTypeConfig: {entry.reason}")
    case = _Case(label, entry, backend_config, engine)
    kind = kind_of(case.dtype_config)
    try:
        with using_engine(engine):
            sqnr, notes = _exercise(case, kind)
    except SkipPattern as exc:
        return PatternResult(label, "skip", str(exc), kind=kind)
    except PatternFailure as exc:
        return PatternResult(label, "fail", str(exc), kind=kind)
    except Exception as exc:  # a torch error we did not anticipate: still the pattern's failure
        return PatternResult(label, "fail", f"unexpected {_describe_exc(exc)}", kind=kind)
    if sqnr is not None and sqnr < threshold_for(kind):
        reason = f"SQNR {sqnr:.1f} dB is below the {threshold_for(kind):.0f} dB bar for {kind}"
        return PatternResult(label, "fail", reason, sqnr, kind)
    return PatternResult(label, "pass", "; ".join(notes), sqnr, kind)


def _describe_exc(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first[:300]}"


def _exercise(case: _Case, kind: str) -> tuple[float | None, list[str]]:
    config = case.entry.config
    synth = synthesize(
        config, qconfig=case.entry.qconfig, input_range=_fixed_input_range(case.dtype_config)
    )
    float_out = _run(synth.model, synth.example_inputs)
    mapping = QConfigMapping().set_global(case.entry.qconfig)
    prepared = _stage(
        "prepare_fx",
        lambda: prepare_fx(
            copy.deepcopy(synth.model),
            mapping,
            synth.example_inputs,
            backend_config=case.backend_config,
        ),
    )
    for batch in synth.calibration:
        _stage("calibration", lambda batch=batch: _run(prepared, batch))
    not_observed = config.observation_type == ObservationType.INPUT_OUTPUT_NOT_OBSERVED
    first, last = _locate(prepared, synth)
    _verify_observed(prepared, first, last, kind, not_observed)
    reference = _stage(
        "convert_to_reference_fx",
        lambda: convert_to_reference_fx(
            copy.deepcopy(prepared), backend_config=case.backend_config
        ),
        hint=_reference_hint(config),
    )
    if not not_observed:
        _verify_reference(case, reference, first.name, last.name, kind)
    return _lowered_sqnr(case, prepared, synth, float_out)


def _stage(name: str, action: Callable[[], Any], hint: str = "") -> Any:
    try:
        return action()
    except (SkipPattern, PatternFailure):
        raise
    except Exception as exc:
        message = f"{name} failed: {_describe_exc(exc)}"
        raise PatternFailure(f"{message} ({hint})" if hint else message) from exc


def _reference_hint(config: Any) -> str:
    ref, root = config.reference_quantized_module, config.root_module
    if ref is None:
        return ""
    root_name = root.__name__ if root is not None else "?"
    return f"does reference_quantized_module {ref.__name__} fit root_module {root_name}?"


def _locate(prepared: Any, synth: Synthesized) -> tuple[Any, Any]:
    """The pattern's first and last node in the prepared graph. Fusion folds the later ops into
    the first op's module, so the last node is the last op that is still there."""
    found = [graphs.find_ref(prepared, ref.kind, ref.target) for ref in synth.ops]
    if not found[0]:
        raise PatternFailure("the pattern's first op is not in the prepared graph")
    last = next(nodes for nodes in reversed(found) if nodes)
    return found[0][0], last[-1]


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
            "not quantized: prepare_fx put no observer on its inputs (the pattern did not "
            "match, or torch rejected the QConfig for its DTypeConfig)"
        )
    if kind.startswith("static") and not output_observed:
        raise PatternFailure("not quantized: prepare_fx put no observer on its output")


def _verify_reference(case: _Case, reference: Any, first_name: str, last_name: str, kind: str):
    """(b): dequantize -> op -> quantize with the declared dtypes; the reference module."""
    nodes = {node.name: node for node in reference.graph.nodes}
    first, last = nodes.get(first_name), nodes.get(last_name)
    if first is None or last is None:
        raise PatternFailure("the pattern's nodes disappeared in the reference model")
    dtype_config = case.dtype_config
    expected_ref = case.entry.config.reference_quantized_module
    if expected_ref is not None and first.op == "call_module":
        found = graphs.reference_module(reference, first)
        if not isinstance(found, expected_ref):
            actual = type(found or reference.get_submodule(str(first.target))).__name__
            raise PatternFailure(
                f"reference model holds {actual}, not the declared reference_quantized_module "
                f"{expected_ref.__name__}"
            )
    if kind.startswith("weight-only"):
        return
    incoming = graphs.input_quantization(first)
    expected_in = dtype_config.input_dtype
    if incoming is None or incoming[1] != expected_in:
        got = "float inputs" if incoming is None else graphs.dtype_name(incoming[1])
        raise PatternFailure(f"reference model feeds it {got}, expected {expected_in}")
    if kind.startswith("static"):
        outgoing = graphs.output_quantization(last)
        expected_out = dtype_config.output_dtype
        if outgoing is None or outgoing[1] != expected_out:
            got = "a float output" if outgoing is None else graphs.dtype_name(outgoing[1])
            raise PatternFailure(
                f"reference model quantizes its output to {got}, expected {expected_out}"
            )


def _lowered_sqnr(
    case: _Case, prepared: Any, synth: Synthesized, float_out: Any
) -> tuple[float | None, list[str]]:
    """(c) and (d); falls back to the reference model where the engine has no kernels."""
    notes = []
    if not runs_on(case.dtype_config, case.engine):
        reference = convert_to_reference_fx(prepared, backend_config=case.backend_config)
        notes.append(
            f"{case.engine} has no kernels for {kind_of(case.dtype_config)}; "
            "SQNR of the reference model"
        )
        return sqnr_db(float_out, _run(reference, synth.example_inputs)), notes
    lowered = _stage("convert_fx", lambda: convert_fx(prepared, backend_config=case.backend_config))
    out = _stage(
        f"running the lowered model on {case.engine}", lambda: _run(lowered, synth.example_inputs)
    )
    return sqnr_db(float_out, out), notes


# --- models ---------------------------------------------------------------------------------

ModelFactory = Callable[[], tuple[torch.nn.Module, tuple]]


def check_model(
    name: str, factory: ModelFactory, backend_config: BackendConfig, engine: str
) -> ModelResult:
    """Quantize a whole model with :func:`qconfig_mapping` of the backend; report per node."""
    try:
        with using_engine(engine):
            return _quantize_model(name, factory, backend_config, engine)
    except Exception as exc:
        return ModelResult(name, "fail", _describe_exc(exc))


def _quantize_model(
    name: str, factory: ModelFactory, backend_config: BackendConfig, engine: str
) -> ModelResult:
    model, example_inputs = factory()
    model.eval()
    float_out = _run(model, example_inputs)
    mapping = qconfig_mapping(backend_config, engine=engine)
    prepared = prepare_fx(
        copy.deepcopy(model), mapping, example_inputs, backend_config=backend_config
    )
    _run(prepared, example_inputs)
    reference = convert_to_reference_fx(copy.deepcopy(prepared), backend_config=backend_config)
    quantized = _node_kinds(reference)
    lowered = convert_fx(prepared, backend_config=backend_config)
    sqnr = sqnr_db(float_out, _run(lowered, example_inputs))
    result = ModelResult(
        name,
        "pass",
        quantized=quantized,
        sqnr_db=sqnr,
        fp32_ms=_latency_ms(model, example_inputs),
        int8_ms=_latency_ms(lowered, example_inputs),
    )
    if not any(kind != "fp32" for kind in quantized.values()):
        # Not a failure: a backend may simply not cover this model's ops. The golden's
        # node -> kind mapping is what catches a backend that stopped quantizing them.
        result.status, result.reason = "skip", "the backend quantizes none of this model's ops"
    return result


def _node_kinds(reference: Any) -> dict[str, str]:
    """Original op nodes (not the quantize/dequantize plumbing) -> their quantized kind."""
    kinds = {}
    for node in reference.graph.nodes:
        if node.op not in ("call_module", "call_function", "call_method"):
            continue
        if graphs.quantize_kind(node) is not None or graphs.is_dequantize(node):
            continue
        if node.op == "call_function" and getattr(node.target, "__name__", "") == "getitem":
            continue
        kinds[node.name] = graphs.node_kind(reference, node)
    return kinds


def _latency_ms(model: torch.nn.Module, inputs: tuple, repeats: int = 10) -> float:
    """Median wall time of one forward, after two warm-up runs."""
    times = []
    with torch.no_grad():
        for i in range(repeats + 2):
            start = time.perf_counter()
            model(*(t.clone() for t in inputs))
            if i >= 2:
                times.append(time.perf_counter() - start)
    times.sort()
    return round(times[len(times) // 2] * 1000, 3)


# --- the whole check ------------------------------------------------------------------------


def pattern_label(config: Any) -> str:
    """A readable pattern name with bespec's aliases (``(nn.Conv2d, nn.ReLU)``)."""
    from backend_spec.names.labels import config_label

    label = config_label(config)
    return label if config.pattern is not None else "complex:" + label


def pattern_cases(backend_config: BackendConfig, engine: str) -> list[tuple[str, PatternQConfig]]:
    """(unique label, chosen DTypeConfig/QConfig) for every pattern with DTypeConfigs."""
    cases, seen = [], {}
    for entry in choose(backend_config, engine):
        label = pattern_label(entry.config)
        seen[label] = seen.get(label, 0) + 1
        cases.append((label if seen[label] == 1 else f"{label}#{seen[label]}", entry))
    return cases


Progress = Callable[[str], None]


def run_check(
    backend: BackendConfig | str | os.PathLike[str],
    *,
    engine: str | None = None,
    models: Sequence[str | tuple[str, ModelFactory]] | None = None,
    jobs: int = 1,
    progress: Progress | None = None,
    allow_imports: Iterable[str] = (),
) -> CheckReport:
    """Check every pattern of a backend and quantize the models; see the module docstring.

    ``backend`` is a BackendConfig, a built-in backend name or a spec path. ``models`` are zoo
    names, ``module:factory`` references or ``(name, factory)`` pairs (default: the whole zoo;
    ``[]`` for none). ``jobs > 1`` checks patterns in that many worker processes, which rebuild
    the BackendConfig themselves, so it needs a name or path (a BackendConfig object is checked
    serially). ``progress`` is called with each finished item's label.
    """
    from backend_spec.check import parallel

    start = time.perf_counter()
    source = parallel.BackendSource.of(backend, allow_imports)
    backend_config = source.build() if source else backend
    engine = host_engine(engine)
    report = CheckReport(backend=_backend_name(backend), engine=engine)
    cases = pattern_cases(backend_config, engine)
    if jobs > 1 and source is not None:
        report.patterns = parallel.check_patterns(source, engine, len(cases), jobs, progress)
    else:
        for label, entry in cases:
            report.patterns.append(check_pattern(backend_config, entry, label, engine))
            if progress:
                progress(label)
    for name, factory in resolve_models(models):
        report.models.append(check_model(name, factory, backend_config, engine))
        if progress:
            progress(name)
    report.seconds = time.perf_counter() - start
    return report


def _backend_name(backend: BackendConfig | str | os.PathLike[str]) -> str:
    """The report's name of a backend: a config's own name, else the reference as given."""
    return backend.name if isinstance(backend, BackendConfig) else os.fspath(backend)


def resolve_models(
    models: Sequence[str | tuple[str, ModelFactory]] | None,
) -> list[tuple[str, ModelFactory]]:
    """Zoo names, ``module:factory`` strings and ``(name, factory)`` pairs, as pairs."""
    from backend_spec.check import zoo

    if models is None:
        return list(zoo.MODELS.items())
    resolved = []
    for item in models:
        if isinstance(item, tuple):
            resolved.append(item)
        elif item in zoo.MODELS:
            resolved.append((item, zoo.MODELS[item]))
        else:
            resolved.append((item, import_factory(item)))
    return resolved


def import_factory(reference: str) -> ModelFactory:
    """``package.module:factory`` (or ``file.py:factory``) -> the factory, not yet called.

    Calls go through :func:`~backend_spec.names.importer.call_ref`, so a factory that needs
    arguments or exits the process fails its model instead of ending the check.
    """
    from backend_spec.names.importer import call_ref, import_ref

    factory = import_ref(reference)
    if not callable(factory):
        raise ValueError(f"{reference} is not callable")
    return functools.partial(call_ref, factory, reference)
