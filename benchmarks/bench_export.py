"""Quantizer export figures (issue 19), as ratios measured inside one process.

* ``bespec export`` of torchao's ``X86InductorQuantizer`` (and, with executorch installed,
  ``XNNPACKQuantizer`` per channel, and its QAT and dynamic QAT configs, and X86's dynamic QAT
  config, verified in the QAT flow: issue 30),
  the probe suite built as every process builds it (it is never cached on disk: issue 27),
  against the issue's budget of 60 s per quantizer (ratio <= 1);
* the share of that time spent building the suite;
* with executorch's Qualcomm backend importable, ``QnnQuantizer`` through the allow-listed
  adapter of its 35-pass ``transform_for_annotation`` (``tests/fixtures/bespec_passes``),
  timed to its refusal (the format lacks what it does to biases): its passes run on the
  whole suite four times, on lazily recompiled graphs (``pt2e.runtime.lazily``).

Both run the whole export (probe, infer, write, verify) through the library call the CLI makes.
Run: ``.venv/bin/python benchmarks/bench_export.py [--quick] [--strict]`` (``make bench``;
``--quick``: one X86 export, imports included). See ``_bench.py``.
"""

from __future__ import annotations

import importlib.util
import sys
import time

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


def xnnpack_qat():
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

    quantizer = XNNPACKQuantizer()
    quantizer.set_global(get_symmetric_quantization_config(is_per_channel=False, is_qat=True))
    return quantizer


def xnnpack_dynamic_qat():
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

    quantizer = XNNPACKQuantizer()
    config = get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True, is_qat=True)
    quantizer.set_global(config)
    return quantizer


def x86_dynamic_qat():
    from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
        X86InductorQuantizer,
        get_default_x86_inductor_quantization_config,
    )

    quantizer = X86InductorQuantizer()
    config = get_default_x86_inductor_quantization_config(is_dynamic=True, is_qat=True)
    quantizer.set_global(config)
    return quantizer


#: The QAT configs (verified on the suite exported in training mode, built apart).
QAT = (xnnpack_qat, xnnpack_dynamic_qat, x86_dynamic_qat)


def _timed(factory) -> float:
    start = time.perf_counter()
    result = export_quantizer(factory, name=factory.__name__)
    elapsed = time.perf_counter() - start
    if not result.ok:
        sys.exit(f"the export of {factory.__name__} was refused: the benchmark is broken")
    return elapsed


def _qnn_seconds() -> float | None:
    """The export of QnnQuantizer with its pass adapter allow-listed, refused or not; ``None``
    without executorch's Qualcomm backend."""
    from pathlib import Path

    if importlib.util.find_spec("executorch.backends.qualcomm") is None:
        return None
    fixtures = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
    sys.path[:0] = [str(fixtures), str(fixtures / "quantizers")]
    from delegates import qnn

    start = time.perf_counter()
    export_quantizer(qnn, name="qnn", allow_imports=("bespec_passes.qnn",))
    return time.perf_counter() - start


def _suite_seconds(qat: bool = False) -> float:
    """Building the probe suite (probes and ``torch.export``, in training mode for ``qat``), as
    every process does once per flow."""
    from backend_spec.export.quantizer import probe_suite

    start = time.perf_counter()
    probe_suite(qat)
    return time.perf_counter() - start


def main() -> int:
    factories = [x86, x86_dynamic_qat]
    if importlib.util.find_spec("executorch") is not None:
        factories += [xnnpack, xnnpack_qat, xnnpack_dynamic_qat]
    suite = _suite_seconds()
    if QUICK:  # one export, suite built in this process (imports included)
        ratio("export of x86", (suite + _timed(x86)) / BUDGET_SECONDS, "the 60 s budget", 1.0)
        return exit_code()
    for factory in factories:
        built = _suite_seconds(qat=True) if factory in QAT else suite
        seconds = built + _timed(factory)
        ratio(f"export of {factory.__name__}", seconds / BUDGET_SECONDS, "the 60 s budget", 1.0)
        ratio(f"export of {factory.__name__}, suite building", built / seconds, "the export")
    qnn = _qnn_seconds()
    if qnn is not None:
        seconds = suite + qnn
        ratio("export of qnn (35 passes first)", seconds / BUDGET_SECONDS, "the 60 s budget", 1.0)
    return exit_code()


if __name__ == "__main__":
    sys.exit(main())
