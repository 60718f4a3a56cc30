"""Fuser functions that specs can ask for by shape rather than by name.

``{sequential: nni.ConvReLU2d}`` means "a fuser returning ``nni.ConvReLU2d(m1, m2)``". For two
modules that is exactly torch's own ``_sequential_wrapper2`` closure, so configs compiled from
a spec compare equal to torch's built-ins; for three modules torch has no wrapper, so bespec
provides the same shape. ``reverse_sequential`` is torch 1.13's ``reverse_sequential_wrapper2``
(gone from later torch, still used by configs written for 1.13), ``reverse2``/``reverse3`` are
torch's ``_reverse2``/``_reverse3``.

:func:`wrapper_form` recognises these shapes in live objects by their code, so a config's own
copy of a torch-1.13 wrapper (same bytecode, same captured class) exports readably too.
"""

from __future__ import annotations

import functools
import types
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


def reverse_sequential_wrapper2(sequential: type) -> Callable[..., Any]:
    """torch 1.13's wrapper: a fuser ``(is_qat, x, y) -> sequential(y, x)``."""

    def fuser_method(is_qat, x, y):  # the exact torch 1.13 body
        return sequential(y, x)

    return fuser_method


def reverse_wrapper(form: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """torch's ``_reverse2`` (``form == "reverse2"``) or ``_reverse3``."""
    from torch.ao.quantization import fuser_method_mappings as mappings

    return mappings._reverse2 if form == "reverse2" else mappings._reverse3


#: ``co_flags`` bits that change what code does; the higher ones record ``__future__``
#: imports of the defining module, which do not.
_BEHAVIOUR_FLAGS = 0xFFFF


def _same_code(a: types.CodeType, b: types.CodeType) -> bool:
    """The same behaviour: identical bytecode, constants, names, signature and kind."""
    return a is b or (
        a.co_code == b.co_code
        and a.co_consts == b.co_consts
        and a.co_names == b.co_names
        and a.co_varnames == b.co_varnames
        and a.co_freevars == b.co_freevars
        and a.co_argcount == b.co_argcount
        and a.co_flags & _BEHAVIOUR_FLAGS == b.co_flags & _BEHAVIOUR_FLAGS
    )


@functools.cache
def _reference_codes() -> dict[str, types.CodeType]:
    """Form -> the code object of the closures that form builds."""
    codes = {
        "sequential": sequential_fuser(object, 2).__code__,
        "reverse_sequential": reverse_sequential_wrapper2(object).__code__,
    }
    for form in ("reverse2", "reverse3"):
        codes[form] = reverse_wrapper(form)(print).__code__
    return codes


def wrapper_form(fn: Any) -> tuple[str, Any] | None:
    """``(form, captured)`` when ``fn`` is one of the wrappers above, else None.

    ``captured`` is the class for ``sequential``/``reverse_sequential`` and the wrapped
    function for ``reverse2``/``reverse3``.
    """
    marked = getattr(fn, "sequential", None)
    if isinstance(marked, type) and isinstance(fn, types.FunctionType):
        return "sequential", marked
    code = getattr(fn, "__code__", None)
    cells = getattr(fn, "__closure__", None)
    if not isinstance(fn, types.FunctionType) or code is None or not cells or len(cells) != 1:
        return None
    try:
        captured = cells[0].cell_contents
    except ValueError:  # an empty cell
        return None
    for form, reference in _reference_codes().items():
        if _same_code(code, reference):
            if form in CLASS_FORMS and not isinstance(captured, type):
                return None
            return form, captured
    return None


#: Wrapper forms that capture a module class (the others capture a function).
CLASS_FORMS = ("sequential", "reverse_sequential")


def map_wrapper(
    fn: Any, on_class: Callable[[type], Any], on_function: Callable[[Any], Any]
) -> dict[str, Any] | None:
    """``{form: on_class(cls)}`` or ``{form: on_function(wrapped)}`` for a wrapper, else None:
    the one walk of wrapper shapes that export and compare both need."""
    shape = wrapper_form(fn)
    if shape is None:
        return None
    form, captured = shape
    return {form: (on_class if form in CLASS_FORMS else on_function)(captured)}


def sequential_class(fuser: Callable[..., Any]) -> type | None:
    """The fused module class of a sequential fuser (torch's or bespec's), else None."""
    found = wrapper_form(fuser)
    return found[1] if found is not None and found[0] == "sequential" else None
