"""``bespec check`` end to end: every case of a backend (see :mod:`backend_spec.check.cases`),
then the zoo models quantized with the backend's own QConfigMapping, on the backend's engine.

Models get the same treatment as patterns when the engine has no kernels for the spec's dtypes
(qint8 activations on x86, say): the reference model stands in for the lowered one, and the
report says so once.
"""

from __future__ import annotations

import copy
import functools
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from backend_spec._torch import BackendConfig, quiet, torch
from backend_spec.analysis.qconfigs import kernels_for, qconfig_mapping
from backend_spec.check import blame, graphs, parallel
from backend_spec.check.cases import (
    Case,
    build_cases,
    check_case,
    full_exc,
    run_model,
    short_exc,
    sqnr_db,
)
from backend_spec.check.engines import engine_for, using_engine
from backend_spec.check.results import CheckReport, ModelResult, PatternResult
from backend_spec.check.signature import converted_signature, prepared_signature
from backend_spec.names.dtypes import dtype_names, fx_quantized_twin, to_dtype

with quiet():
    from torch.ao.quantization.quantize_fx import convert_fx, convert_to_reference_fx, prepare_fx

ModelFactory = Callable[[], tuple[torch.nn.Module, tuple]]
#: ``progress(label, total)``: called with each finished item's label and the item count.
Progress = Callable[[str, int], None]


# --- models ---------------------------------------------------------------------------------


#: How many calibration batches a model sees (the example batch plus fresh ones), in every
#: flow: ``--flow pt2e|both`` calibrate pt2e on the same batches.
CALIBRATION_BATCHES = 4


def calibration(example_inputs: tuple, batches: int = CALIBRATION_BATCHES) -> list[tuple]:
    """The example batch and fresh ones shaped like it (integer inputs are reused)."""
    gen = torch.Generator().manual_seed(1234)

    def like(tensor: Any) -> Any:
        if isinstance(tensor, torch.Tensor) and tensor.is_floating_point():
            return torch.randn(tensor.shape, generator=gen, dtype=tensor.dtype)
        return tensor

    return [example_inputs] + [tuple(like(t) for t in example_inputs) for _ in range(batches - 1)]


#: The seed of :func:`forward_passes`.
PASS_SEED = 0


def forward_passes(prepared: Any, batches: list[tuple]) -> None:
    """``prepared`` on each batch, from one seed of torch's CPU generator (saved and restored
    around them). In training mode dropout draws its masks there, and two runs compared (FX
    against pt2e, a spec's quantizer against its original) must draw the same masks whatever
    their prepare drew before: torchao's conv-bn rewrite draws example inputs, a spec's
    quantizer does not."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(PASS_SEED)
        for batch in batches:
            prepared(*batch)


@dataclass
class FxRun:
    """One model through the FX pipeline: the row of the report, and the reference model with
    its output on the example batch (what ``--flow both`` compares pt2e with; None when the
    model failed before it)."""

    result: ModelResult
    reference: Any = None
    reference_output: Any = None


def check_model(
    name: str, factory: ModelFactory, backend_config: BackendConfig, engine: str
) -> ModelResult:
    """Quantize a whole model with :func:`qconfig_mapping` of the backend; report per node."""
    try:
        model, example_inputs = factory()
    except Exception as exc:
        return ModelResult(name, "fail", short_exc(exc), detail=full_exc(exc))
    return quantize_fx(name, model, example_inputs, backend_config, engine).result


def quantize_fx(
    name: str,
    model: torch.nn.Module,
    example_inputs: tuple,
    backend_config: BackendConfig,
    engine: str | None,
) -> FxRun:
    """The FX pipeline of every flow: prepare with the backend's QConfigMapping for ``engine``,
    calibrate on :func:`calibration`, convert to a reference model and, when ``engine`` has
    the kernels, lower and time it. A failure names its node and entries (:mod:`.blame`); one
    that is torch's lowering of ops the spec does not claim leaves the reference model's
    result, said in the row, instead of failing it."""
    run = FxRun(ModelResult(name, "pass"))
    try:
        with using_engine(engine or torch.backends.quantized.engine):
            _quantize_model(run, model, example_inputs, backend_config, engine)
    except LoweringFailed as exc:
        run.result.status, run.result.detail = "fail", exc.detail
    except Exception as exc:
        run.result.status, run.result.detail = "fail", full_exc(exc)
        run.result.reason = run.result.reason or short_exc(exc)
    return run


def _quantize_model(
    run: FxRun,
    model: torch.nn.Module,
    example_inputs: tuple,
    backend_config: BackendConfig,
    engine: str | None,
) -> None:
    result = run.result
    model.eval()
    float_out = run_model(model, example_inputs)
    # The spec's first choice per pattern, runnable here or not: fused partners must agree, and
    # a model the engine cannot run is measured as a reference model (as cases are).
    mapping = qconfig_mapping(backend_config, engine=engine, runnable_first=False)
    prepared = prepare_fx(
        copy.deepcopy(model), mapping, example_inputs, backend_config=backend_config
    )
    for batch in calibration(example_inputs):
        _blamed(result, prepared, batch, prepared, backend_config, engine)
    result.signature = prepared_signature(prepared)
    reference = convert_to_reference_fx(copy.deepcopy(prepared), backend_config=backend_config)
    result.quantized = quantized = _node_kinds(reference)
    run.reference = reference
    run.reference_output = _blamed(
        result, reference, example_inputs, prepared, backend_config, engine
    )
    lowered = None
    if engine is not None and _runs_on_engine(quantized, engine):
        lowered = _lowered(result, prepared, example_inputs, backend_config, engine)
    if lowered is not None:
        result.sqnr_db = sqnr_db(float_out, run_model(lowered, example_inputs))
        result.fp32_ms = _latency_ms(model, example_inputs)
        result.int8_ms = _latency_ms(lowered, example_inputs)
    else:
        result.reference_fallback = engine is not None and not result.torch_limit
        result.sqnr_db = sqnr_db(float_out, run.reference_output)
    result.signature.update(converted_signature(reference, lowered))
    trapped = _unconverted_observers(prepared)
    if trapped:
        # observed as a dtype convert_fx does not quantize with: the cases of those ops fail
        # for the same reason, so the model cannot pass while they do
        result.status, result.reason = "fail", trapped
        return
    if not any(kind != "fp32" for kind in quantized.values()) and not result.reason:
        # Not a failure: a backend may simply not cover this model's ops. The golden's
        # node -> kind mapping is what catches a backend that stopped quantizing them.
        result.status, result.reason = "skip", "the backend quantizes none of its ops"


def _blamed(
    result: ModelResult,
    model: Any,
    inputs: tuple,
    prepared: Any,
    backend_config: BackendConfig,
    engine: str | None,
) -> Any:
    """``model``'s output on ``inputs``; on failure, the row's reason names the node and the
    entries (:func:`blame.blame_run`) and the error goes on up."""
    try:
        return run_model(model, inputs)
    except Exception:
        found = blame.blame_run(model, inputs, prepared, backend_config, engine)
        if found is not None:
            result.reason = found.text
        raise


def _lowered(
    result: ModelResult,
    prepared: Any,
    example_inputs: tuple,
    backend_config: BackendConfig,
    engine: str,
) -> Any:
    """``convert_fx`` of ``prepared``, checked to run; None (the reference model stands in,
    the row says why) when it fails through torch's lowering of ops the spec does not claim.
    A failure of the spec's raises with the row's reason naming node and entries."""
    try:
        lowered = convert_fx(copy.deepcopy(prepared), backend_config=backend_config)
    except Exception as exc:
        found = blame.blame_convert(exc, prepared, backend_config)
        if found is not None:
            result.reason = found.text
        raise
    found = blame.blame_run(lowered, example_inputs, prepared, backend_config, engine)
    if found is None:
        return lowered
    result.reason = found.text
    if not found.torch_limit:
        raise LoweringFailed(found.text, _torch_error(lowered, example_inputs))
    result.torch_limit = True
    return None


def _torch_error(model: Any, inputs: tuple) -> str:
    """torch's own message for a model that fails on ``inputs`` (for ``--verbose``)."""
    try:
        run_model(model, inputs)
    except Exception as exc:
        return full_exc(exc)
    return ""


class LoweringFailed(Exception):
    """The lowered model fails because of the spec; ``detail`` is torch's message."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(reason)
        self.detail = detail


def _unconverted_observers(prepared: torch.nn.Module) -> str:
    """Why convert_fx leaves ops float that prepare observed ("" when it does not): static
    observers of a plain integer dtype (``uint8`` where FX quantizes with ``quint8``)."""
    from torch.ao.quantization.fake_quantize import FakeQuantizeBase
    from torch.ao.quantization.observer import ObserverBase

    counts: dict[str, int] = {}
    for module in prepared.modules():
        if isinstance(module, (ObserverBase, FakeQuantizeBase)) and not getattr(
            module, "is_dynamic", False
        ):
            name = str(getattr(module, "dtype", "")).removeprefix("torch.")
            if fx_quantized_twin(name):
                counts[name] = counts.get(name, 0) + 1
    return "; ".join(
        f"{n} tensor(s) observed as {name}, which convert_fx leaves float: FX quantizes with "
        f"{fx_quantized_twin(name)} (pt2e reads it as {name})"
        for name, n in sorted(counts.items())
    )


def _runs_on_engine(kinds: dict[str, str], engine: str) -> bool:
    """Whether the engine has kernels for every quantized kind the reference model uses."""
    for kind in set(kinds.values()):
        mode, _, name = kind.partition(" ")
        if name and name in dtype_names() and not kernels_for(mode, to_dtype(name), engine):
            return False
    return True


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
    """Median wall time of one forward, on one thread, after warm-up runs (:data:`WARM_UP`).

    One thread: on a shared CPU, a thread pool waiting for a busy core turns a 0.1 ms forward
    into tens of milliseconds. Warm-up: the first forwards of a process or of a model pay for
    lazy initialisation (kernel selection, weight packing, allocator growth), which is not the
    model's speed."""
    threads = torch.get_num_threads()
    times = []
    try:
        torch.set_num_threads(1)
        with torch.no_grad():
            for i in range(repeats + WARM_UP):
                start = time.perf_counter()
                model(*(t.clone() for t in inputs))
                if i >= WARM_UP:
                    times.append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    times.sort()
    return round(times[len(times) // 2] * 1000, 3)


#: Forwards run and not timed before :func:`_latency_ms` measures.
WARM_UP = 3


# --- the whole check ------------------------------------------------------------------------


def run_check(
    backend: BackendConfig | str | os.PathLike[str],
    *,
    engine: str | None = None,
    models: Sequence[str | tuple[str, ModelFactory]] | None = None,
    jobs: int = 1,
    progress: Progress | None = None,
    allow_imports: Iterable[str] = (),
    backend_config: BackendConfig | None = None,
) -> CheckReport:
    """Check every case of a backend and quantize the models; see the module docstring.

    ``backend`` is a BackendConfig, a built-in backend name or a spec path (``backend_config``:
    the BackendConfig it already compiled to, so it is not built twice). ``engine`` defaults to
    the backend's own (:func:`engines.engine_for`). ``models`` are zoo names or ``(name,
    factory)`` pairs (default: the whole zoo; ``[]`` for none). ``jobs > 1`` checks cases in that
    many worker processes, which rebuild the BackendConfig themselves, so it needs a name or path
    (a BackendConfig object is checked serially). ``progress`` is called with each finished
    item's label and the total count.
    """
    start = time.perf_counter()
    source = parallel.BackendSource.of(backend, allow_imports)
    if backend_config is None:
        backend_config = source.build() if source else backend
    engine = check_engine(backend, backend_config, engine)
    report = CheckReport(backend=_backend_name(backend), engine=engine)
    cases = build_cases(backend_config, engine)
    model_list = resolve_models(models)
    total = len(cases) + len(model_list)

    def advance(label: str) -> None:
        if progress:
            progress(label, total)

    if jobs > 1 and source is not None and len(cases) > 1:
        report.patterns = parallel.check_cases(source, engine, len(cases), jobs, advance)
    else:
        for case in cases:
            report.patterns.append(check_case(case))
            advance(case.label)
    mark_inherited(report, cases, engine)
    for name, factory in model_list:
        report.models.append(check_model(name, factory, backend_config, engine))
        advance(name)
    _fallback_note(report)
    report.seconds = time.perf_counter() - start
    return report


def mark_inherited(report: CheckReport, cases: Sequence[Case], engine: str) -> None:
    """Mark the cases that are torch's, not the spec's (:attr:`PatternResult.inherited`): the
    case's entry came unchanged from a built-in (its origin is ``torch:NAME``), and the same
    case run on that built-in itself ends the same way. The rerun is the evidence: a case the
    spec's own edits broke (a removed partner entry, say) passes there and stays a failure."""
    from backend_spec.compiler.backends import load_backend
    from backend_spec.ir.lower import entries_of

    by_key = {case.key: case for case in cases}
    suspects: dict[str, list[PatternResult]] = {}
    for result in report.patterns:
        case = by_key.get(result.key)
        if result.status == "pass" or case is None:
            continue
        source = entries_of(case.backend_config)(case.config).origin.source
        if source.startswith("torch:"):
            suspects.setdefault(source, []).append(result)
    for source, results in suspects.items():
        base = {c.key: c for c in build_cases(load_backend(source.removeprefix("torch:")), engine)}
        for result in results:
            if result.key in base and check_case(base[result.key]).status == result.status:
                result.inherited = source


def _fallback_note(report: CheckReport) -> None:
    """One note for every result whose SQNR is the reference model's."""
    cases = sum(r.reference_fallback for r in report.patterns)
    models = sum(m.reference_fallback and not m.torch_limit for m in report.models)
    if cases or models:
        report.add_note(
            f"{report.engine} has no kernels for some of the spec's dtypes: {cases} cases and "
            f"{models} models report the SQNR of the reference model (marked *), not of a "
            "lowered one"
        )


def check_engine(backend: Any, backend_config: BackendConfig, requested: str | None = None) -> str:
    """The engine ``check`` runs ``backend`` on, in every flow: ``requested``, else the
    backend's own (:func:`engines.engine_for`; ValueError for one this torch lacks)."""
    return engine_for(_engine_name(backend, backend_config), requested)


def _engine_name(backend: Any, backend_config: BackendConfig) -> str:
    """The name the engine is chosen by: a built-in's name, else the config's own ``name``."""
    from backend_spec.names.vocabulary import BUILTIN_BACKENDS

    source = parallel.BackendSource.of(backend)
    if source is not None and source.ref in BUILTIN_BACKENDS and not os.path.isfile(source.ref):
        return source.ref
    return getattr(backend_config, "name", "")


def _backend_name(backend: Any) -> str:
    if isinstance(backend, BackendConfig):
        return backend.name
    return os.fspath(backend)


def resolve_models(
    models: Sequence[str | tuple[str, ModelFactory]] | None,
) -> list[tuple[str, ModelFactory]]:
    """Zoo names, ``module:factory`` / ``file.py:factory`` references and ``(name, factory)``
    pairs, as pairs (ValueError for a reference that names no callable)."""
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
