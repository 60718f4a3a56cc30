"""Checking patterns in worker processes (``bespec check --jobs N``).

BackendConfigs hold classes and functions that do not always pickle (fuser lambdas, custom
getters), so workers never receive one: each rebuilds it from a :class:`BackendSource` (a built-in
name or a spec path with its allow-list) and is handed pattern indices. Workers use a ``spawn``
(or ``forkserver``) context — forking a process that already ran torch kernels is unsafe — and
one intra-op thread each, so N workers do not oversubscribe the cores.
"""

from __future__ import annotations

import contextlib
import importlib.util
import multiprocessing
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

from backend_spec.check.cases import build_cases, check_case
from backend_spec.check.results import PatternResult


@dataclass(frozen=True)
class BackendSource:
    """A picklable recipe for a BackendConfig: a backend reference (a spec file, made absolute,
    a built-in name or ``module:attr``; see :mod:`backend_spec.compiler.backends`)."""

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
        from backend_spec.compiler.backends import load_backend

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
    return multiprocessing.get_context("spawn")


_LAUNCH_LOCK = threading.Lock()


def worker_path(allow_imports: Iterable[str] = ()) -> list[str]:
    """The import path of a worker: this process's, minus the current directory, plus (last)
    the folders bespec and the allowed modules were found in."""
    cwd = os.getcwd()
    path = [p for p in sys.path if p and os.path.abspath(p) != cwd]
    import backend_spec

    needed = [_folder_of(backend_spec.__spec__)]
    for module in allow_imports:
        try:
            needed.append(_folder_of(importlib.util.find_spec(module.split(".")[0])))
        except (ImportError, ValueError):
            continue  # the worker reports it when it loads the spec
    return path + [p for p in dict.fromkeys(needed) if p and p not in path]


def _folder_of(spec: Any) -> str:
    """The folder to put on the path to import a top-level module (its package's parent)."""
    if spec is None or not spec.origin:
        return ""
    folder = os.path.dirname(spec.origin)
    return os.path.dirname(folder) if spec.submodule_search_locations else folder


@contextlib.contextmanager
def _isolated_launch(allow_imports: Iterable[str]) -> Iterator[None]:
    """While workers start: ``PYTHONSAFEPATH=1`` and the worker path (both restored after)."""
    with _LAUNCH_LOCK:
        saved_path, saved_safe = sys.path[:], os.environ.get("PYTHONSAFEPATH")
        sys.path[:] = worker_path(allow_imports)
        os.environ["PYTHONSAFEPATH"] = "1"
        try:
            yield
        finally:
            sys.path[:] = saved_path
            if saved_safe is None:
                os.environ.pop("PYTHONSAFEPATH", None)
            else:
                os.environ["PYTHONSAFEPATH"] = saved_safe


def check_cases(
    source: BackendSource,
    engine: str,
    count: int,
    jobs: int,
    progress: Callable[[str], None] | None = None,
) -> list[PatternResult]:
    """Results of all ``count`` cases, in case order, computed by ``jobs`` workers.

    Each worker imports torch (hundreds of MB), so ``jobs`` is capped at the CPU count and
    the number of cases: ``-j 1000`` must not start a thousand processes.
    """
    jobs = max(1, min(jobs, count, os.cpu_count() or 1))
    results: list[PatternResult | None] = [None] * count
    with contextlib.ExitStack() as stack:
        launching = stack.enter_context(contextlib.ExitStack())
        # Helper processes start in the constructor, workers during submit: both isolated.
        launching.enter_context(_isolated_launch(source.allow_imports))
        pool = stack.enter_context(
            ProcessPoolExecutor(
                max_workers=jobs,
                mp_context=_context(),
                initializer=_init_worker,
                initargs=(source, engine),
            )
        )
        futures = [pool.submit(_check_index, i) for i in range(count)]
        launching.close()
        for future in as_completed(futures):
            index, result = future.result()
            results[index] = result
            if progress:
                progress(result.pattern)
    return [r for r in results if r is not None]
