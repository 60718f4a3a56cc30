"""Export of fusers and getters: a name, a torch wrapper shape, or a verified factory call.

Real configs build their fusers with factories: torch's ``_sequential_wrapper2(cls)``, its
``_reverse2(f)``, torch 1.13's ``reverse_sequential_wrapper2(cls)``, or their own
``get_fuser_method(cls)``. The closures these return have no importable name, but each is
fully determined by its factory and the values in its cells. This module writes such a
closure as the call that rebuilds it, ``{call: pkg.get_fuser_method, args: [pkg.ConvAct2d]}``,
and proves it does: the factory is called again with the recovered arguments and the result
must have the very same code object and equal cells (:func:`function_description`).
"""

from __future__ import annotations

import inspect
import math
import types
from dataclasses import dataclass
from typing import Any

from backend_spec import codes
from backend_spec.analysis.compare import function_description
from backend_spec.codes import Code
from backend_spec.names.fusers import map_wrapper
from backend_spec.names.naming import object_name, resolve_name
from backend_spec.names.vocabulary import TORCH_FACTORY_MODULES, inside


@dataclass
class Unwritable(Exception):
    """An object the spec cannot express; ``problem`` says why, ``code`` which refusal."""

    obj: Any
    problem: str
    code: Code = codes.UNNAMEABLE
    hint: str | None = None  # None: the code's hint


def function_doc(fn: Any) -> str | dict[str, Any]:
    """The spec value of a fuser or getter (raises :class:`Unwritable`)."""
    name = object_name(fn)
    if name is not None:
        return name
    wrapper = map_wrapper(fn, _named, function_doc)
    return wrapper if wrapper is not None else _factory_doc(fn)


def _named(obj: Any) -> str:
    name = object_name(obj)
    if name is None:
        raise Unwritable(obj, f"{_show(obj)} has no importable name")
    return name


def _show(obj: Any) -> str:
    owner = getattr(obj, "__self__", None)
    if isinstance(obj, types.MethodType) and not isinstance(owner, (type, types.ModuleType)):
        # its __qualname__ is the wrapped function's: the instance is what cannot be named
        kind = type(owner)
        return (
            f"method {obj.__name__} bound to an instance of {kind.__module__}.{kind.__qualname__}"
        )
    qualname = getattr(obj, "__qualname__", None)
    if qualname is None:
        return f"a {type(obj).__name__} value"
    return f"{getattr(obj, '__module__', '?')}.{qualname}"


def _factory_of(fn: Any) -> Any:
    """The module-level function (or class-level method) whose code made closure ``fn``."""
    if isinstance(fn, types.MethodType) and not isinstance(fn.__self__, type):
        raise Unwritable(
            fn,
            f"{_show(fn)} has no importable name",
            hint="bind no instance: use a module-level function, a staticmethod or a classmethod",
        )
    if not isinstance(fn, types.FunctionType) or ".<locals>." not in fn.__qualname__:
        raise Unwritable(fn, f"{_show(fn)} has no importable name")
    outer = fn.__qualname__.rsplit(".<locals>.", 1)[0]
    if "<" in outer or fn.__module__ in (None, "__main__"):
        raise Unwritable(
            fn,
            f"{_show(fn)} is made by a function that itself has no importable name",
        )
    factory = resolve_name(f"{fn.__module__}.{outer}")
    code = getattr(getattr(factory, "__func__", factory), "__code__", None)
    if code is None or not any(const is fn.__code__ for const in code.co_consts):
        raise Unwritable(fn, f"{_show(fn)} is made by {outer}, which cannot be named")
    return factory


def _factory_doc(fn: Any) -> dict[str, Any]:
    factory = _factory_of(fn)
    factory_name = _named(factory)
    module = getattr(getattr(factory, "__func__", factory), "__module__", "")
    if module.split(".")[0] == "torch" and not inside(module, TORCH_FACTORY_MODULES):
        raise Unwritable(
            fn,
            f"{_show(fn)} comes from {factory_name}, a torch function outside "
            f"{' and '.join(TORCH_FACTORY_MODULES)}: the loader does not call it",
        )
    args, kwargs = _recover_arguments(fn, factory, factory_name)
    _verify(fn, factory, factory_name, args, kwargs)
    doc: dict[str, Any] = {"call": factory_name}
    if args:
        doc["args"] = [_arg_doc(fn, value) for value in args]
    if kwargs:
        doc["kwargs"] = {key: _arg_doc(fn, value) for key, value in kwargs.items()}
    return doc


def _cells(fn: types.FunctionType) -> dict[str, Any]:
    out = {}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True):
        try:
            out[name] = cell.cell_contents
        except ValueError:
            continue
    return out


def _recover_arguments(
    fn: types.FunctionType, factory: Any, factory_name: str
) -> tuple[list[Any], dict[str, Any]]:
    """The arguments of the factory call, read from the closure's cells by parameter name.

    A parameter the closure did not capture keeps its default; one without a default cannot
    be recovered. Parameters after a skipped one are passed by keyword.
    """
    cells = _cells(fn)
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        raise Unwritable(fn, f"the signature of factory {factory_name} cannot be read") from None
    names = {p.name for p in parameters}
    if not cells or not set(fn.__code__.co_freevars) <= names:
        # Not a factory's product: a local function keeping other locals (or none). Calling
        # its enclosing function again could do anything, so it is never called.
        raise Unwritable(
            fn,
            f"{_show(fn)} is a local function, not the product of a factory called with "
            "the values it keeps: it has no importable name",
        )
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    skipped = False
    for p in parameters:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            if p.name in cells and cells[p.name]:
                raise Unwritable(
                    fn, f"factory {factory_name} captured its *{p.name} arguments: not recoverable"
                )
            skipped = True
            continue
        if p.name not in cells or (p.default is not p.empty and cells[p.name] is p.default):
            if p.default is p.empty:
                raise Unwritable(
                    fn,
                    f"{_show(fn)} does not keep argument '{p.name}' of factory {factory_name}, "
                    "so the call cannot be recovered",
                    hint="define the function at module level",
                )
            skipped = True
            continue
        if p.kind is p.KEYWORD_ONLY or skipped:
            kwargs[p.name] = cells[p.name]
        else:
            args.append(cells[p.name])
    return args, kwargs


def _verify(
    fn: Any, factory: Any, factory_name: str, args: list[Any], kwargs: dict[str, Any]
) -> None:
    """Call the factory again: the same code and equal cells, or a clear refusal."""
    try:
        again = factory(*args, **kwargs)
    except Exception as exc:
        raise Unwritable(
            fn,
            f"calling {factory_name} again failed: {type(exc).__name__}: {exc}",
            codes.FACTORY_MISMATCH,
            "make the factory callable with the values its closure keeps",
        ) from None
    if getattr(again, "__code__", None) is not fn.__code__:
        raise Unwritable(
            fn,
            f"{factory_name} called again returns another function than {_show(fn)}",
            codes.FACTORY_MISMATCH,
        )
    if function_description(again) != function_description(fn):
        raise Unwritable(
            fn,
            f"{factory_name} called again builds {_show(fn)} with other captured values",
            codes.FACTORY_MISMATCH,
        )


def _arg_doc(fn: Any, value: Any) -> Any:
    """A factory argument as spec data: names, numbers, booleans, text, tuples, forms."""
    if isinstance(value, int):  # bool included
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise Unwritable(fn, f"factory argument {value!r} is not a finite number")
        return value
    if isinstance(value, str):
        return {"literal": value}
    if isinstance(value, tuple):
        return [_arg_doc(fn, v) for v in value]
    if callable(value) and not isinstance(value, type):
        return function_doc(value)
    name = object_name(value)
    if name is None:
        raise Unwritable(
            fn, f"factory argument {_show(value)} of {_show(fn)} has no name a spec can use"
        )
    return name
