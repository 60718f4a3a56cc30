"""Run ``check --lower`` over models, in worker processes when more than one CPU helps.

Workers rebuild the spec from its :class:`~backend_spec.check.parallel.BackendSource` (a
BackendConfig does not always pickle), as ``check --jobs`` does, take one intra-op thread each
(int8 and fp32 are timed alike, and two workers do not fight over the cores) and return plain
:class:`~backend_spec.lower.results.ModelResult` rows. A worker that dies (a native crash in a
backend's kernels) fails the models it had not finished, naming the crash.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from backend_spec.check.parallel import BackendSource, _context, _isolated_launch
from backend_spec.lower.results import LowerReport, ModelResult


#: The models ``check --lower`` lowers by default: the check zoo and the pt2e reference nets.
def default_models() -> list[str]:
    from backend_spec.check import zoo
    from backend_spec.pt2e import nets

    return [*zoo.MODELS, *nets.NETS]


def factory_for(name: str) -> Callable[[], tuple[Any, tuple]]:
    """A zoo model, a pt2e reference net, or a ``module:factory`` / ``file.py:factory``."""
    from backend_spec.analysis.explain import model_from_factory
    from backend_spec.check import zoo
    from backend_spec.pt2e import nets

    known = {**zoo.MODELS, **nets.NETS}
    if name in known:
        return known[name]
    return lambda: model_from_factory(name)


@dataclass
class Lowering:
    """Everything one process needs to lower models under one spec: built once per worker."""

    target: str
    backend_config: Any
    template: Any = None
    origins: dict[str, str] | None = None

    def __post_init__(self) -> None:
        from backend_spec.lower.quantized import entry_origins
        from backend_spec.pt2e import quantizer

        self.template = quantizer(self.backend_config)
        self.origins = entry_origins(self.backend_config)

    def lower(self, name: str, *, timing: bool = True) -> ModelResult:
        """One model: quantize, lower, judge; a failure at any step is the row's finding."""
        try:
            model, inputs = factory_for(name)()
        except Exception as exc:  # a factory that fails is the model's row, not the run's end
            return ModelResult(name, self.target, error=f"the model factory failed: {exc}"[:300])
        return self.lower_model(name, model, inputs, timing=timing)

    def lower_model(self, name: str, model: Any, inputs: tuple, *, timing: bool) -> ModelResult:
        from backend_spec.lower import inductor, xnnpack
        from backend_spec.lower.quantized import quantize

        module = xnnpack if self.target == "xnnpack" else inductor
        try:
            quantized = quantize(self.template, self.origins or {}, model, inputs)
        except Exception as exc:  # the model does not export or quantize: not lowering's
            return ModelResult(
                name, self.target, skipped=f"does not quantize: {type(exc).__name__}: {exc}"[:300]
            )
        return module.lower_model(name, quantized, timing=timing)


_WORKER: dict[str, Lowering] = {}


def _init_worker(source: BackendSource, target: str) -> None:
    from backend_spec._torch import silence_globally, torch

    silence_globally()
    torch.set_num_threads(1)
    _WORKER["lowering"] = Lowering(target, source.build())


def _lower_one(name: str, timing: bool) -> ModelResult:
    return _WORKER["lowering"].lower(name, timing=timing)


def lower_check(
    backend: Any,
    target: str,
    models: Sequence[str] | None = None,
    *,
    jobs: int | None = None,
    allow_imports: Sequence[str] = (),
    timing: bool = True,
    backend_config: Any = None,
) -> LowerReport:
    """Lower ``models`` (default: :func:`default_models`) under ``backend`` (a spec path,
    built-in name or reference; or a BackendConfig, then in this process only)."""
    from backend_spec._torch import torch

    names = list(dict.fromkeys(models or default_models()))
    source = BackendSource.of(backend, allow_imports)
    if backend_config is None:
        backend_config = backend if source is None else source.build()
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(names), os.cpu_count() or 1))
    if source is None or jobs == 1:
        lowering = Lowering(target, backend_config)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            rows = [lowering.lower(name, timing=timing) for name in names]
        finally:
            torch.set_num_threads(threads)
    else:
        rows = _in_workers(source, target, names, jobs, timing)
    return LowerReport(target, _backend_name(backend_config), rows, _versions(target))


def _in_workers(
    source: BackendSource, target: str, names: list[str], jobs: int, timing: bool
) -> list[ModelResult]:
    rows: dict[str, ModelResult] = {}
    try:
        with _isolated_launch(source.allow_imports):
            pool = ProcessPoolExecutor(
                max_workers=jobs,
                mp_context=_context(),
                initializer=_init_worker,
                initargs=(source, target),
            )
            futures = {pool.submit(_lower_one, name, timing): name for name in names}
        with pool:
            for future in as_completed(futures):
                name = futures[future]
                try:
                    rows[name] = future.result()
                except BrokenProcessPool:
                    raise
                except Exception as exc:  # the worker could not build or send the row
                    rows[name] = ModelResult(name, target, error=f"{type(exc).__name__}: {exc}")
    except BrokenProcessPool:
        pass  # a native crash killed a worker: the unfinished models say so below
    return [
        rows.get(name)
        or ModelResult(name, target, error="a worker process died while lowering (native crash)")
        for name in names
    ]


def _backend_name(backend_config: Any) -> str:
    from backend_spec.ir.lower import backend_of

    return backend_of(backend_config).name


def _versions(target: str) -> dict[str, str]:
    """The versions a lowering result depends on (recorded in goldens)."""
    from importlib import metadata

    from backend_spec._torch import torch

    found = {"torch": str(torch.__version__)}
    for package in ("torchao", "executorch") if target == "xnnpack" else ("torchao",):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return found


def explain_lowering(
    backend_config: Any, target: str, model: Any, inputs: tuple
) -> tuple[ModelResult, list[Any]]:
    """``explain --flow pt2e --lower TARGET``: the model lowered (not timed) and the pt2e
    verdict of each ATen node, for the reporter to join by node name."""
    import copy

    from backend_spec._torch import torch
    from backend_spec.pt2e.check import explain_pt2e

    verdicts = explain_pt2e(backend_config, copy.deepcopy(model), inputs)
    threads = torch.get_num_threads()
    try:
        result = Lowering(target, backend_config).lower_model("model", model, inputs, timing=False)
    finally:
        torch.set_num_threads(threads)
    return result, verdicts
