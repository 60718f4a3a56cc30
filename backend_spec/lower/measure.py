"""Timing and comparing lowered programs: medians after warm-up, SQNR and max abs diff."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

from backend_spec._torch import torch

#: Runs left out before timing (first calls allocate, pack weights, fill caches).
WARMUP = 5
#: Timed runs at most, in blocks, and the time they may take (a slow model is timed fewer
#: times, at least three per block).
RUNS, BLOCKS, BUDGET_S = 300, 3, 1.0


def median_us(run: Callable[[], Any]) -> float:
    """The median wall time of ``run()`` in microseconds, warm-up excluded: the lowest median
    of :data:`BLOCKS` blocks of runs, since on a shared machine other processes only ever add
    time (one block taken by a burst of load does not decide the figure)."""
    for _ in range(WARMUP):
        run()
    deadline = time.perf_counter() + BUDGET_S
    medians = []
    for _ in range(BLOCKS):
        times: list[float] = []
        while len(times) < RUNS // BLOCKS and (len(times) < 3 or time.perf_counter() < deadline):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
        medians.append(statistics.median(times))
    return min(medians) * 1e6


def first_tensor(output: Any) -> torch.Tensor:
    while isinstance(output, (tuple, list)):
        output = output[0]
    return output.detach()


def compare(reference: torch.Tensor, lowered: torch.Tensor) -> tuple[float | None, float]:
    """(SQNR in dB, None when identical; max abs difference) of ``lowered`` vs ``reference``."""
    reference, lowered = reference.float(), lowered.float().reshape(reference.shape)
    noise = (reference - lowered).norm()
    max_abs = float((reference - lowered).abs().max()) if reference.numel() else 0.0
    if noise == 0:
        return None, max_abs
    db = float(20 * torch.log10(reference.norm() / noise))
    return (round(db, 2) if math.isfinite(db) else -math.inf), max_abs
