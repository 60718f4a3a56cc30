"""What every benchmark shares: the quick mode, the ratio line and the exit status.

* ``--quick`` (or ``BENCH_QUICK=1``) runs a benchmark on a small input in a few seconds, so
  that ``make test`` (``tests/test_benchmarks.py``) runs every benchmark and a broken one fails
  CI. Its figures are printed but mean little: the inputs are small and the machine is busy.
* Each figure is printed as a ratio against its baseline (``import torch``, prepare_fx, a
  budget), the one form that holds across machines.
* A benchmark exits 1 when it breaks. Over budget it says ``OVER BUDGET`` and exits 0, since
  a busy machine alone can push a figure over; ``--strict`` (``BENCH_STRICT=1``) makes that
  exit 1 too, for a quiet machine.
"""

from __future__ import annotations

import os
import sys
import time

QUICK = "--quick" in sys.argv[1:] or os.environ.get("BENCH_QUICK") == "1"
STRICT = "--strict" in sys.argv[1:] or os.environ.get("BENCH_STRICT") == "1"

_over: list[str] = []


def args() -> list[str]:
    """The command-line arguments without the shared flags."""
    return [a for a in sys.argv[1:] if a not in ("--quick", "--strict")]


def ratio(name: str, value: float, baseline: str, budget: float | None = None) -> bool:
    """Print ``name: 1.23x baseline [budget <= 1.3x: ok]``; False (and remembered) if over."""
    verdict = ""
    within = budget is None or value <= budget
    if budget is not None:
        verdict = f" [budget <= {budget:g}x: {'ok' if within else 'OVER BUDGET'}]"
    print(f"{name}: {value:.3g}x {baseline}{verdict}", flush=True)
    if not within:
        _over.append(name)
    return within


def exit_code() -> int:
    """0 unless a figure was over budget under ``--strict``."""
    if _over:
        mode = "failing (--strict)" if STRICT else "not failing (run with --strict to fail)"
        print(f"over budget: {', '.join(_over)}; {mode}")
    return 1 if STRICT and _over else 0


def best(fn, repeat: int) -> float:
    """The fastest of ``repeat`` runs of ``fn`` (the least disturbed by the machine)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)
