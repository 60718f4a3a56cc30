"""Lint budget: ``bespec lint`` of the seven built-in specs, as a ratio to ``import torch``.

Budget (issue 20): at most 1.3x the time of ``python -c "import torch"`` (lint runs in
pre-commit on every commit, and torch's import is the floor of any command that needs torch).
Both run as fresh processes, in turns (yardstick, lint, yardstick, lint...), and the figure is
the median of the pairwise ratios, so that a drift of the machine's speed affects both alike.
The budget applies to CPU time (user + system of the child), which other processes on a busy
machine do not inflate; the wall-time ratio is printed beside it.

The children run with bytecode caching on (``PYTHONDONTWRITEBYTECODE`` removed, one warm-up
run first), as an installed bespec has it: compiling bespec's sources on every run is not
what users pay.

Two figures: a cold run (``--no-cache``: every file linted afresh, as on the first commit or
after an upgrade) and a repeat run answered by the lint cache (files unchanged since the
last run, as most commits leave most specs; it never imports torch). The budget applies to
the cold run's CPU ratio; the cached one is printed beside it.

Run: ``.venv/bin/python benchmarks/bench_lint.py [RUNS] [--quick] [--strict]`` (``make bench``;
``--quick``: one run each). See ``_bench.py``.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _bench import QUICK, args, exit_code, ratio

ROOT = Path(__file__).resolve().parent.parent
BUDGET = 1.3
BUILTINS = ("native", "fbgemm", "qnnpack", "x86", "onednn", "executorch", "tensorrt")

YARDSTICK = [sys.executable, "-c", "import torch"]
LINT = [
    sys.executable,
    "-m",
    "backend_spec",
    "lint",
    *(str(ROOT / "specs" / f"{name}.yaml") for name in BUILTINS),
]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``command`` (which must succeed)."""
    cpu, start = _children_cpu(), time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[2:4])} failed ({done.returncode}):\n{done.stderr}")
    return wall, _children_cpu() - cpu


def measure(lint: list[str], env: dict[str, str], runs: int) -> tuple[float, float]:
    """Median (wall, CPU) ratios of ``lint`` to ``import torch``, run in turns."""
    wall_ratios, cpu_ratios = [], []
    for _ in range(runs):
        torch_wall, torch_cpu = run(YARDSTICK, env)
        lint_wall, lint_cpu = run(lint, env)
        wall_ratios.append(lint_wall / torch_wall)
        cpu_ratios.append(lint_cpu / torch_cpu)
    return statistics.median(wall_ratios), statistics.median(cpu_ratios)


def main(runs: int) -> int:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT)
    cold = [*LINT[:4], "--no-cache", *LINT[4:]]
    label = f"bespec lint of the {len(BUILTINS)} built-ins, median of {runs}"
    with tempfile.TemporaryDirectory() as cache:
        env["BESPEC_CACHE_DIR"] = cache
        run(YARDSTICK, env)  # warm the file cache
        run(LINT, env)  # write bespec's bytecode, and fill the lint cache
        wall, cpu = measure(cold, env, runs)
        ratio(f"{label}, cold (--no-cache), wall", wall, "import torch")
        ratio(f"{label}, cold (--no-cache), cpu", cpu, "import torch", BUDGET)
        wall, cpu = measure(LINT, env, runs)
        ratio(f"{label}, repeat run (cached), wall", wall, "import torch")
        ratio(f"{label}, repeat run (cached), cpu", cpu, "import torch")
    return exit_code()


if __name__ == "__main__":
    raise SystemExit(main(1 if QUICK else int((args() or ["7"])[0])))
