"""What the quantizer-export tests share: where their fixture quantizers live, one CLI run,
the probe qspec records inference reads, and the comparison of a spec's quantizer with the
original on models the export never saw. One copy, so a change of the CLI's environment or
of the comparison is one edit."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "quantizers"

needs_executorch = pytest.mark.skipif(
    importlib.util.find_spec("executorch") is None,
    reason="executorch cannot be imported (pip install --no-deps executorch==1.5.1 "
    "flatbuffers tabulate)",
)


def fixture(module: str, name: str | None = None) -> Any:
    """``fixtures/quantizers/<module>.py`` (or its attribute ``name``), imported with the
    fixture folder on the path only for the import."""
    sys.path.insert(0, str(FIXTURES))
    try:
        loaded = __import__(module)
    finally:
        sys.path.remove(str(FIXTURES))
    return loaded if name is None else getattr(loaded, name)


def pythonpath(*extra: str) -> str:
    """This checkout first, then ``extra``, then the caller's PYTHONPATH (where optional
    delegate dependencies such as tosa_serializer may live)."""
    parts = (str(ROOT), *extra, os.environ.get("PYTHONPATH", ""))
    return os.pathsep.join(part for part in parts if part)


def outside_checkout() -> tuple[str, ...]:
    """This process's ``sys.path`` entries outside the checkout: where side-installed quantizer
    packages (coremltools, nncf) live. The checkout's own folders are left out: on the path,
    ``tests/fixtures/quantizers/openvino.py`` would shadow the ``openvino`` package."""
    return tuple(p for p in sys.path if p and not Path(p).resolve().is_relative_to(ROOT))


def bespec(
    *args: str, cwd: Path = ROOT, timeout: int = 1800, path: tuple[str, ...] = ()
) -> subprocess.CompletedProcess:
    """``python -m backend_spec ARGS`` in a child process, as a user runs it (``path``: more
    import folders, after the checkout)."""
    return subprocess.run(
        [sys.executable, "-m", "backend_spec", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": pythonpath(*path)},
        cwd=cwd,
        timeout=timeout,
    )


def in_process(*args: str) -> subprocess.CompletedProcess:
    """``bespec ARGS`` run by the CLI's own app in this process, its output and exit code as
    :func:`bespec` gives them. An export builds its probe suite once per process (about half
    a minute on two cores), so the export tests share it, as a user's
    :func:`backend_spec.export.quantizer.export_quantizer` calls do."""
    from backend_spec.cli.app import app
    from backend_spec.quiet import silence_globally

    silence_globally()
    stdout, stderr, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            app(args=list(args), prog_name="bespec")
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    return subprocess.CompletedProcess(
        ["bespec", *args], code, stdout.getvalue(), stderr.getvalue()
    )


def export(
    tmp_path: Path, ref: str, *extra: str, path: tuple[str, ...] = ()
) -> tuple[subprocess.CompletedProcess, Path]:
    """``bespec export REF -o tmp_path/spec.yaml EXTRA``: the run and the file it writes. In
    this process (:func:`in_process`) unless ``path`` names more import folders (side-installed
    vendor packages stay out of the test process)."""
    out = tmp_path / "spec.yaml"
    args = ("export", ref, "-o", str(out), *extra)
    return (bespec(*args, path=path) if path else in_process(*args)), out


def observed(**changes: Any) -> dict[str, Any]:
    """A probe record of an observed per-tensor int8 activation qspec (the shape
    ``probe.describe`` writes), with ``changes`` applied."""
    return {
        "kind": "observed",
        "dtype": "int8",
        "quant_min": -128,
        "quant_max": 127,
        "qscheme": "per_tensor_affine",
        "ch_axis": None,
        "is_dynamic": False,
        "observer": "HistogramObserver",
        "kwargs": {"eps": 2**-12},
        **changes,
    }


def differences(spec: Any, original: Any, models: Any) -> list[str]:
    """``model: difference`` for each way the quantizer ``spec`` builds (a path or a loaded
    backend) differs from the factory ``original`` on ``models`` (name, factory pairs)."""
    import backend_spec
    from backend_spec.pt2e.compare import compare_quantizers

    results = compare_quantizers(original, lambda: backend_spec.quantizer(spec), models)
    return [f"{r.name}: {d}" for r in results for d in r.differences]


def qat_differences(spec: Any, original: Any, models: Any) -> list[str]:
    """The models on which the spec's QAT quantizer and the factory ``original`` differ after
    the same training-mode passes (outputs, activation qparams)."""
    import torch

    import backend_spec
    from backend_spec.pt2e.flows import calibration
    from backend_spec.pt2e.qat import run_pt2e_qat

    differing = []
    for name, factory in models:
        model, example_inputs = factory()
        batches = calibration(example_inputs)
        first = run_pt2e_qat(original(), model, example_inputs, batches)
        second = run_pt2e_qat(
            backend_spec.quantizer(spec, qat=True), model, example_inputs, batches
        )
        if not torch.equal(first.output, second.output) or first.qparams != second.qparams:
            differing.append(name)
    return differing


def named_models(*names: str) -> list[tuple[str, Any]]:
    """The packaged nets and parity nets called ``names``."""
    from backend_spec.pt2e import parity_nets
    from backend_spec.pt2e.nets import NETS

    models = {**NETS, **parity_nets.PARITY_NETS}
    return [(name, models[name]) for name in names]


def unseen() -> list[tuple[str, Any]]:
    """The models of fixtures/quantizers/unseen.py (MobileNet-, transformer-, LSTM-,
    U-Net-shaped...), which neither the probes nor export's verification contain."""
    return fixture("unseen").UNSEEN
