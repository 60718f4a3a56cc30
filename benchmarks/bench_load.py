"""Load budget, as ratios measured inside one process.

Budgets (issue 2):
* loading a 200-pattern spec costs at most 3% of ``import torch`` in the same process;
* ten times the patterns costs at most twelve times the time.

Run: ``.venv/bin/python benchmarks/bench_load.py`` (``make bench``). Exits 1 if over budget.
"""

from __future__ import annotations

import statistics
import sys
import time

start = time.perf_counter()
import torch  # noqa: E402,F401  (timed: the yardstick)

IMPORT_TORCH = time.perf_counter() - start

from pathlib import Path  # noqa: E402

import backend_spec  # noqa: E402
from backend_spec.export import dump  # noqa: E402
from backend_spec.names.vocabulary import builtin_backend_config  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def spec_with(n_patterns: int, fmt: str) -> str:
    """A spec of ``n_patterns`` entries: torch's native patterns, repeated as needed."""
    base = builtin_backend_config("native")
    configs = base.configs
    from backend_spec._torch import BackendConfig

    big = BackendConfig("bench")
    big._pattern_complex_format_to_config = {
        i: _distinct(configs[i % len(configs)], i // len(configs)) for i in range(n_patterns)
    }
    return dump(big, format=fmt)


def _distinct(config, copy_number: int):
    """The ``copy_number``-th repeat of a pattern, made distinct (a duplicate is an error) at
    a constant size: the pattern fed into a method call named after the repeat."""
    if copy_number == 0:
        return config
    import copy

    from backend_spec.compiler.compiler import pattern_key

    repeat = copy.copy(config)
    repeat.pattern = None
    repeat._pattern_complex_format = (f"repeat{copy_number}", pattern_key(config))
    return repeat


def best_time(text: str, fmt: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        backend_spec.loads(text, format=fmt)
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times)


def main() -> int:
    ok = True
    print(f"import torch: {IMPORT_TORCH * 1000:.0f} ms (yardstick)")
    for fmt in ("yaml", "toml"):
        small, large = spec_with(200, fmt), spec_with(2000, fmt)
        best_time(small, fmt, 3)  # warm caches and lazy imports
        t_small, med_small = best_time(small, fmt, 15)
        t_large, _ = best_time(large, fmt, 5)
        ratio = t_small / IMPORT_TORCH
        scale = t_large / t_small
        print(
            f"{fmt}: 200 patterns {t_small * 1000:.1f} ms (median {med_small * 1000:.1f}) = "
            f"{ratio:.1%} of import torch [budget 3%]; 2000 patterns {t_large * 1000:.1f} ms = "
            f"{scale:.1f}x [budget 12x]"
        )
        ok &= ratio <= 0.03 and scale <= 12
    print("within budget" if ok else "OVER BUDGET")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
