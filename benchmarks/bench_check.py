"""Time `bespec check` of built-in backends (budget: native in <= 120 s on 2 cores).

    python benchmarks/bench_check.py [BACKEND ...] [--jobs N] [--engine E]

Prints the wall time, pattern counts and the fraction of patterns exercised and passing.
"""

from __future__ import annotations

import argparse
import time

from backend_spec._torch import silence_globally
from backend_spec.check import run_check

BUDGET_S = 120.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("backends", nargs="*", default=["native"])
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--engine", default=None)
    parser.add_argument("--no-models", action="store_true", help="patterns only")
    args = parser.parse_args()
    silence_globally()
    for backend in args.backends:
        start = time.perf_counter()
        report = run_check(
            backend, engine=args.engine, jobs=args.jobs, models=[] if args.no_models else None
        )
        elapsed = time.perf_counter() - start
        counts = report.counts()
        verdict = "within" if elapsed <= BUDGET_S else "OVER"
        print(
            f"{backend:10s} engine={report.engine} jobs={args.jobs}: {elapsed:6.1f} s "
            f"({verdict} the {BUDGET_S:.0f} s budget) patterns={len(report.patterns)} "
            f"pass={counts['pass']} fail={counts['fail']} skip={counts['skip']} "
            f"pass_fraction={report.pass_fraction():.1%} models={len(report.models)}"
        )


if __name__ == "__main__":
    main()
