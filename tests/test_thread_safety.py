"""Concurrent loads leave the caller's warning filters exactly as they were."""

from __future__ import annotations

import threading
import warnings

from backend_spec import load
from backend_spec.quiet import quiet


def test_concurrent_loads_leave_no_ignore_filters():
    before = list(warnings.filters)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(3):
                load("specs/tutorial.yaml")
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert warnings.filters == before


def test_quiet_keeps_filters_added_inside_the_block():
    before = list(warnings.filters)
    with quiet():
        warnings.filterwarnings("error", message="bespec-test-marker")
        added = warnings.filters[0]
    assert added in warnings.filters
    warnings.filters.remove(added)
    assert warnings.filters == before


def test_quiet_silences_deprecations_inside_only():
    with quiet(), warnings.catch_warnings(record=True) as seen:
        warnings.warn("x is deprecated", DeprecationWarning, stacklevel=1)
    assert seen == []
