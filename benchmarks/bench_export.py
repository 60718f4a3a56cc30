"""Quantizer export figures (issue 19), as ratios measured inside one process.

* ``bespec export`` of torchao's ``X86InductorQuantizer`` (and, with executorch installed,
  ``XNNPACKQuantizer`` per channel) with the probe suite cached, against the issue's budget of
  60 s per quantizer (ratio <= 1);
* the same export cold (an empty suite cache: every probe built and ``torch.export``-ed)
  against cached: what the per-torch-version cache saves.

Both run the whole export (probe, infer, write, verify) through the library call the CLI makes.
Run: ``.venv/bin/python benchmarks/bench_export.py [--quick] [--strict]`` (``make bench``;
``--quick``: one X86 export with the user's cache, imports included). See ``_bench.py``.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
import time
from pathlib import Path

from _bench import QUICK, exit_code, ratio

from backend_spec.export.quantizer import export_quantizer

#: Issue 19: exporting one quantizer takes at most this long on 2 cores.
BUDGET_SECONDS = 60.0


def x86():
    from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
        X86InductorQuantizer,
        get_default_x86_inductor_quantization_config,
    )

    quantizer = X86InductorQuantizer()
    quantizer.set_global(get_default_x86_inductor_quantization_config())
    return quantizer


def xnnpack():
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

    quantizer = XNNPACKQuantizer()
    quantizer.set_global(get_symmetric_quantization_config(is_per_channel=True))
    return quantizer


def _timed(factory, cache: Path | None) -> float:
    start = time.perf_counter()
    result = export_quantizer(factory, name=factory.__name__, cache_dir=cache)
    elapsed = time.perf_counter() - start
    if not result.ok:
        sys.exit(f"the export of {factory.__name__} was refused: the benchmark is broken")
    return elapsed


def main() -> int:
    factories = [x86]
    if importlib.util.find_spec("executorch") is not None:
        factories.append(xnnpack)
    if QUICK:  # one export, with the user's suite cache (imports included)
        ratio("export of x86", _timed(x86, None) / BUDGET_SECONDS, "the 60 s budget", budget=1.0)
        return exit_code()
    with tempfile.TemporaryDirectory() as warm, tempfile.TemporaryDirectory() as cold:
        _timed(x86, Path(warm))  # imports, and the warm cache
        for factory in factories:
            cold_seconds = _timed(factory, Path(cold) / factory.__name__)
            cached = _timed(factory, Path(warm))
            ratio(
                f"export of {factory.__name__}, probe suite cached",
                cached / BUDGET_SECONDS,
                "the 60 s budget",
                budget=1.0,
            )
            ratio(f"export of {factory.__name__}, cold", cold_seconds / cached, "cached")
    return exit_code()


if __name__ == "__main__":
    sys.exit(main())
