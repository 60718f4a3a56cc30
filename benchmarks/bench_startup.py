"""Startup budget of the light commands, as ratios to ``python -c "import torch"``.

Budget (issue 14): ``bespec --help``, ``schema``, ``init`` and ``fmt`` need no torch
(``--version`` imports it since issue 27: it reports the torch that runs), and each takes at
most 0.35x the time of importing torch. Every command runs as a fresh process (startup is the
point); each figure is the median of several runs, taken in turns with the yardstick so that a
drift of the machine's speed affects both alike.

Run: ``.venv/bin/python benchmarks/bench_startup.py [RUNS] [--quick] [--strict]``
(``make bench``; ``--quick``: one run each). See ``_bench.py``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _bench import QUICK, args, exit_code, ratio

ROOT = Path(__file__).resolve().parent.parent
BUDGET = 0.35

YARDSTICK = [sys.executable, "-c", "import torch"]
BESPEC = [sys.executable, "-m", "backend_spec"]
COMMANDS = {
    "--help": ["--help"],
    "schema": ["schema"],
    "init": ["init", "bench_backend", "--force"],
    "fmt --check": ["fmt", "--check", str(ROOT / "specs" / "tutorial.yaml")],
}


def run_time(command: list[str], cwd: str, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=env, capture_output=True, check=True)
    return time.perf_counter() - start


def main(runs: int = 5) -> int:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as cwd:
        run_time(YARDSTICK, cwd, env)  # warm the file cache
        yardstick: list[float] = []
        times: dict[str, list[float]] = {name: [] for name in COMMANDS}
        for _ in range(runs):
            yardstick.append(run_time(YARDSTICK, cwd, env))
            for name, command in COMMANDS.items():
                times[name].append(run_time([*BESPEC, *command], cwd, env))
    torch_time = statistics.median(yardstick)
    for name, samples in times.items():
        ratio(f"bespec {name}", statistics.median(samples) / torch_time, "import torch", BUDGET)
    return exit_code()


if __name__ == "__main__":
    raise SystemExit(main(1 if QUICK else int((args() or ["5"])[0])))
