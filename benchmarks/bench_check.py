"""Time `bespec check` of built-in backends (budget: native with --jobs 2 in <= 30 s on 2 cores).

    python benchmarks/bench_check.py [BACKEND ...] [--jobs N] [--engine E] [--no-models]
                                     [--quick] [--strict]

Prints the wall time, the CPU time, the load average and how many pattern × DTypeConfig cases
were exercised. On a shared machine wall time alone says little; run with ``--jobs 1`` (the
default) for a CPU time that load does not inflate: CPU seconds / 2 estimates ``--jobs 2`` on two
idle cores (workers' CPU time is not visible to this process, so ``--jobs N`` reports wall time).
The figure is that estimate as a ratio of the budget. ``--quick`` checks ``specs/tutorial.yaml``
without models (see ``_bench.py``); not part of ``make bench`` (a full check takes minutes).
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path

from _bench import QUICK, exit_code, ratio

from backend_spec._torch import silence_globally
from backend_spec.check import run_check

BUDGET_S = 30.0
TUTORIAL = str(Path(__file__).resolve().parent.parent / "specs" / "tutorial.yaml")


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("backends", nargs="*", default=["native"])
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--engine", default=None)
    parser.add_argument("--no-models", action="store_true", help="patterns only")
    parser.add_argument("--quick", action="store_true", help="the tutorial spec, no models")
    parser.add_argument("--strict", action="store_true", help="exit 1 when over budget")
    args = parser.parse_args()
    silence_globally()
    backends = [TUTORIAL] if QUICK else args.backends
    for backend in backends:
        load = os.getloadavg()[0]
        start, cpu = time.perf_counter(), _cpu_seconds()
        report = run_check(
            backend,
            engine=args.engine,
            jobs=args.jobs,
            models=[] if args.no_models or QUICK else None,
        )
        elapsed, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
        idle_estimate = cpu / 2 if args.jobs == 1 else elapsed
        counts = report.counts()
        print(
            f"{Path(backend).stem} engine={report.engine} jobs={args.jobs}: wall {elapsed:.1f} s, "
            f"cpu {cpu:.1f} s (load {load:.1f}) cases={len(report.patterns)} "
            f"exercised={report.exercised()} pass={counts['pass']} fail={counts['fail']} "
            f"skip={counts['skip']} models={len(report.models)}"
        )
        label = f"check {Path(backend).stem}, ~{idle_estimate:.1f} s for --jobs 2 on idle cores"
        ratio(label, idle_estimate / BUDGET_S, f"the {BUDGET_S:.0f} s budget", 1.0)
    return exit_code()


if __name__ == "__main__":
    raise SystemExit(main())
