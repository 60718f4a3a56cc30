"""Load budget, as ratios measured inside one process.

Budgets (issue 2):
* loading a 200-pattern spec costs at most 3% of ``import torch`` in the same process;
* ten times the patterns costs at most twelve times the time.

Run: ``.venv/bin/python benchmarks/bench_load.py [--quick] [--strict]`` (``make bench``;
``--quick``: 20 and 200 patterns, fewer repeats). See ``_bench.py``.
"""

from __future__ import annotations

import sys
import time

start = time.perf_counter()
import torch  # noqa: E402,F401  (timed: the yardstick)

IMPORT_TORCH = time.perf_counter() - start

from pathlib import Path  # noqa: E402

from _bench import QUICK, best, exit_code, ratio  # noqa: E402

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
    return best(lambda: backend_spec.loads(text, format=fmt), repeat)


def main() -> int:
    small_n, repeat = (20, 3) if QUICK else (200, 15)
    for fmt in ("yaml", "toml"):
        small, large = spec_with(small_n, fmt), spec_with(10 * small_n, fmt)
        best_time(small, fmt, 1 if QUICK else 3)  # warm caches and lazy imports
        t_small = best_time(small, fmt, repeat)
        t_large = best_time(large, fmt, max(2, repeat // 3))
        ratio(f"{fmt}: load of {small_n} patterns", t_small / IMPORT_TORCH, "import torch", 0.03)
        ratio(
            f"{fmt}: load of {10 * small_n} patterns", t_large / t_small, f"{small_n} patterns", 12
        )
    return exit_code()


if __name__ == "__main__":
    sys.exit(main())
