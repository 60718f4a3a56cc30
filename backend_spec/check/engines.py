"""Which quantized CPU engine a check runs on, and running code with it selected.

The engine follows the backend: a spec for qnnpack is checked with qnnpack's kernels, one for
onednn with onednn's (ConvTranspose, for one, behaves differently on x86). Built-in backends map
by name; a custom spec names its engine with ``--engine`` or ``[tool.bespec.check] engine``, and
otherwise gets the first of :data:`ENGINE_PREFERENCE` this torch supports.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

from backend_spec._torch import quiet, torch

#: Engines tried, in order, when neither the backend nor the user names one.
ENGINE_PREFERENCE = ("x86", "fbgemm", "qnnpack")

#: Backend name -> the engine whose kernels it describes. ``native`` is torch's default backend
#: (its kernels are fbgemm's and x86's); executorch lowers with qnnpack/XNNPACK semantics.
BACKEND_ENGINES: dict[str, str] = {
    "x86": "x86",
    "fbgemm": "fbgemm",
    "qnnpack": "qnnpack",
    "onednn": "onednn",
    "executorch": "qnnpack",
}


def supported_engines() -> list[str]:
    return [e for e in torch.backends.quantized.supported_engines if e != "none"]


def engine_for(backend_name: str | None, requested: str | None = None) -> str:
    """The engine to check ``backend_name`` on: ``requested`` if given (ValueError if this torch
    lacks it), else the backend's own engine when this torch has it, else the preference."""
    supported = supported_engines()
    if requested is not None:
        if requested not in supported:
            raise ValueError(f"engine {requested!r} is not supported here (have {supported})")
        return requested
    own = BACKEND_ENGINES.get(backend_name or "")
    if own in supported:
        return own
    for candidate in ENGINE_PREFERENCE:
        if candidate in supported:
            return candidate
    raise ValueError(f"no quantized CPU engine available (have {supported})")


@contextlib.contextmanager
def using_engine(engine: str) -> Iterator[None]:
    """Run with ``torch.backends.quantized.engine`` set, restoring the previous one after.

    FX's quantization tracer records a Python stack trace per node unless told not to; the
    check never shows them, and the first one imports torch's compiler stack (seconds per
    worker), so they are switched off meanwhile.
    """
    import torch.fx.config as fx_config

    previous = torch.backends.quantized.engine, fx_config.do_not_emit_stack_traces
    torch.backends.quantized.engine = engine
    fx_config.do_not_emit_stack_traces = True
    try:
        with quiet(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        torch.backends.quantized.engine, fx_config.do_not_emit_stack_traces = previous
