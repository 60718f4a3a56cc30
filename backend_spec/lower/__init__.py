"""From a spec to running int8 kernels: ``bespec check --lower xnnpack|inductor``.

A quantized graph is not what a backend ships: ExecuTorch's XNNPACK delegate or x86 inductor
makes kernels of it, and a spec can place every quantize "correctly" and still lead to float
kernels, a partition the delegate refuses, or a crash. This stage quantizes each model with the
spec's pt2e quantizer (:mod:`.quantized`), lowers it (:mod:`.xnnpack`, :mod:`.inductor`), says
per quantized op whether it reached an int8 kernel, and why not (:mod:`.constraints`), compares
the lowered outputs with the converted model and times int8 against fp32 (:mod:`.measure`).
:mod:`.run` runs the models (in workers), :mod:`.golden` records lowering coverage.

Neither lowering stack is a dependency of bespec: :func:`require` says in one line what to
install when one is missing.
"""

from __future__ import annotations

import importlib.util
import os
import shutil

TARGETS = ("xnnpack", "inductor")

EXECUTORCH_INSTALL = "pip install --no-deps executorch==1.5.1 flatbuffers tabulate"


class LoweringMissing(ImportError):
    """The lowering stack of a target (ExecuTorch, a C++ compiler) is not installed."""


def _found(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except Exception:  # a parent package that fails to import: not usable either
        return False


def require(target: str) -> None:
    """Raise :class:`LoweringMissing`, with what to install, when ``target`` cannot lower."""
    if not _found("torchao"):
        raise LoweringMissing(
            "--lower needs torchao for the pt2e flow: pip install 'backend-spec[pt2e]'"
        )
    if target == "xnnpack":
        needed = (
            "executorch.exir",
            "executorch.backends.xnnpack.partition.xnnpack_partitioner",
            "executorch.extension.pybindings.portable_lib",
        )
        if not all(_found(module) for module in needed):
            raise LoweringMissing(
                f"--lower xnnpack needs ExecuTorch, which is not installed: {EXECUTORCH_INSTALL}"
            )
    elif target == "inductor" and not compiler():
        raise LoweringMissing(
            "--lower inductor needs a C++ compiler for inductor's kernels, none found "
            "(set CXX or install g++, e.g. apt-get install g++)"
        )


def compiler() -> str | None:
    """The C++ compiler inductor would use (``CXX``, else g++, c++ or clang++ on the path)."""
    named = os.environ.get("CXX")
    if named:
        return shutil.which(named)
    return next((found for cc in ("g++", "c++", "clang++") if (found := shutil.which(cc))), None)
