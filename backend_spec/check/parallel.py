"""Checking patterns in worker processes (``bespec check --jobs N``).

BackendConfigs hold classes and functions that do not always pickle (fuser lambdas, custom
getters), so workers never receive one: each rebuilds it from a :class:`BackendSource` (a built-in
name or a spec path with its allow-list) and is handed pattern indices. Workers use a ``spawn``
(or ``forkserver``) context — forking a process that already ran torch kernels is unsafe — and
one intra-op thread each, so N workers do not oversubscribe the cores.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

from backend_spec.check.cases import build_cases, check_case
from backend_spec.check.results import PatternResult


@dataclass(frozen=True)
class BackendSource:
    """A picklable recipe for a BackendConfig: a backend reference (a spec file, made absolute,
    a built-in name or ``module:attr``; see :mod:`backend_spec.build.backends`)."""

    ref: str
    allow_imports: tuple[str, ...] = ()

    @classmethod
    def of(cls, backend: Any, allow_imports: Iterable[str] = ()) -> BackendSource | None:
        """The source of a reference or path; ``None`` for a BackendConfig object."""
        if isinstance(backend, (str, os.PathLike)):
            text = os.fspath(backend)
            ref = os.path.abspath(text) if os.path.isfile(text) else text
            return cls(ref, tuple(allow_imports))
        return None

    def build(self) -> Any:
        from backend_spec.build.backends import load_backend

        return load_backend(self.ref, self.allow_imports)


_WORKER: dict[str, Any] = {}


def _init_worker(source: BackendSource, engine: str) -> None:
    from backend_spec._torch import silence_globally, torch

    silence_globally()
    torch.set_num_threads(1)
    _WORKER["cases"] = build_cases(source.build(), engine)


def _check_index(index: int) -> tuple[int, PatternResult]:
    return index, check_case(_WORKER["cases"][index])


def _context() -> multiprocessing.context.BaseContext:
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def check_cases(
    source: BackendSource,
    engine: str,
    count: int,
    jobs: int,
    progress: Callable[[str], None] | None = None,
) -> list[PatternResult]:
    """Results of all ``count`` cases, in case order, computed by ``jobs`` workers."""
    results: list[PatternResult | None] = [None] * count
    with ProcessPoolExecutor(
        max_workers=jobs,
        mp_context=_context(),
        initializer=_init_worker,
        initargs=(source, engine),
    ) as pool:
        futures = [pool.submit(_check_index, i) for i in range(count)]
        for future in as_completed(futures):
            index, result = future.result()
            results[index] = result
            if progress:
                progress(result.pattern)
    return [r for r in results if r is not None]
