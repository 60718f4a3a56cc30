"""Every benchmark runs (quick mode) and prints its figures as ratios, so none rots unnoticed.

The figures themselves are not asserted: timings on a shared machine are not a test
(``make bench`` reports them; ``--strict`` gates on the budgets).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = sorted((ROOT / "benchmarks").glob("bench_*.py"))


def test_the_benchmarks_are_found() -> None:
    assert {p.stem for p in BENCHMARKS} >= {"bench_load", "bench_lint", "bench_pt2e"}


@pytest.mark.slow
@pytest.mark.parametrize("bench", BENCHMARKS, ids=lambda p: p.stem)
def test_benchmark_runs_in_quick_mode(bench: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BENCH_QUICK": "1"}
    env.pop("BENCH_STRICT", None)
    done = subprocess.run(
        [sys.executable, str(bench)], capture_output=True, text=True, cwd=ROOT, env=env, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    figures = re.findall(r"^.+: \d[\d.e+-]*x .+$", done.stdout, re.M)
    assert figures, f"no ratio printed:\n{done.stdout}"
    assert "Traceback" not in done.stderr, done.stderr
