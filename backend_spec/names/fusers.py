"""Fuser functions that specs can ask for by shape rather than by name.

``{sequential: nni.ConvReLU2d}`` means "a fuser returning ``nni.ConvReLU2d(m1, m2)``". For two
modules that is exactly torch's own ``_sequential_wrapper2`` closure, so configs compiled from
a spec compare equal to torch's built-ins; for three modules torch has no wrapper, so bespec
provides the same shape.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def sequential_fuser(fused_module: type, arity: int) -> Callable[..., Any]:
    """A fuser ``(is_qat, *modules) -> fused_module(*modules)``, ignoring ``is_qat``."""
    if arity == 2:
        from torch.ao.quantization.fuser_method_mappings import _sequential_wrapper2

        return _sequential_wrapper2(fused_module)

    def fuser_method(is_qat: bool, *modules: Any) -> Any:
        return fused_module(*modules)

    fuser_method.sequential = fused_module  # type: ignore[attr-defined]
    return fuser_method


def sequential_class(fuser: Callable[..., Any]) -> type | None:
    """The fused module class of a sequential fuser (torch's or bespec's), else None."""
    marked = getattr(fuser, "sequential", None)
    if isinstance(marked, type):
        return marked
    qualname = getattr(fuser, "__qualname__", "")
    if qualname != "_sequential_wrapper2.<locals>.fuser_method":
        return None
    names = fuser.__code__.co_freevars
    cells = fuser.__closure__ or ()
    for name, cell in zip(names, cells, strict=False):
        if name == "sequential" and isinstance(cell.cell_contents, type):
            return cell.cell_contents
    return None
