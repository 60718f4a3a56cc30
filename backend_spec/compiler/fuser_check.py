"""Proof that a fuser builds what its entry declares, whatever form named it.

A name, ``{sequential: X}``, ``{reverse2: ...}`` or ``{call: f, args: [...]}`` all end as one
function that ``prepare_fx`` will call with the matched float modules. The static checks (the
resolver's trust predicate) say *who* may be called; this module says *what the call builds*:
the fuser is called on float modules of its own pattern (made by the same recipes as the
check's synthesized models: a few channels, on the CPU; the ``meta`` device would allocate
nothing, but its first BatchNorm or ReLU forward imports torch._dynamo, a second of every
``compile`` and ``lint``) and must return the declared ``fused_module``, or, with none
declared, a module that is not ``nn.Identity``. Only fusers that already passed the trust
predicate get here, so no code outside torch's fuser modules and the caller's allow-list runs.

Results are cached per (fuser, pattern, fused module): the same torch wrapper around the same
class, or the same factory closure over the same values, is proved once per process.
"""

from __future__ import annotations

import functools
import threading
import types
from collections.abc import Callable
from typing import Any

from backend_spec._torch import quiet, torch
from backend_spec.compiler.samples import (
    LAYOUTS,
    VOCAB,
    SkipPattern,
    float_module,
    module_layout,
    name_layout,
)
from backend_spec.names.fusers import wrapper_form
from backend_spec.names.labels import object_label
from backend_spec.names.resolver import is_module_class

nn = torch.nn

#: Entries kept in the proof cache before it is emptied (bounded memory in long sessions).
CACHE_SIZE = 4096

_cache: dict[Any, str] = {}
_lock = threading.Lock()


def fuser_problem(fuser: Callable[..., Any], ops: tuple[Any, ...], fused_module: Any) -> str:
    """Why ``fuser`` does not build ``fused_module`` from float modules of ``ops`` ("" when it
    does, or when the pattern cannot be synthesized and there is nothing to prove)."""
    key = (_identity(fuser), ops, fused_module)
    try:
        hash(key)
    except TypeError:  # a closure over unhashable values: proved every time
        return _prove(fuser, ops, fused_module)
    with _lock:
        cached = _cache.get(key)
    if cached is None:
        cached = _prove(fuser, ops, fused_module)
        with _lock:
            if len(_cache) >= CACHE_SIZE:
                _cache.clear()
            _cache[key] = cached
    return cached


def _identity(fn: Any) -> Any:
    """What decides a fuser's behaviour: its torch wrapper shape, or its code and captured
    values, so that closures rebuilt by each compile share one proof."""
    shape = wrapper_form(fn)
    if shape is not None:
        form, captured = shape
        return form, captured if isinstance(captured, type) else _identity(captured)
    if isinstance(fn, types.FunctionType) and fn.__closure__:
        try:
            return fn.__code__, tuple(cell.cell_contents for cell in fn.__closure__)
        except ValueError:  # an empty cell
            return fn
    return fn


def _prove(fuser: Callable[..., Any], ops: tuple[Any, ...], fused_module: Any) -> str:
    """Call the fuser (eval mode, then QAT mode) until it builds the declared class.

    A function op is handed over as the function itself, as ``prepare_fx`` does; when that
    fails, its module counterpart (``F.leaky_relu`` -> ``nn.LeakyReLU``) stands in, because
    torch's own configs pair such patterns with module fusers (onednn's ``(nn.Linear,
    F.leaky_relu)`` with ``nni.LinearLeakyReLU``).
    """
    failures: list[str] = []
    built: list[Any] = []
    tries = [(ops, False), (ops, True)]
    counterparts = tuple(_counterpart(op) for op in ops)
    if counterparts != ops:
        tries += [(counterparts, False), (counterparts, True)]
    for parts, is_qat in tries:
        try:
            with quiet(), torch.no_grad():
                modules = _float_modules(parts, training=is_qat)
                result = fuser(is_qat, *modules)
        except SkipPattern:
            return ""  # no float stand-ins for this pattern: nothing to prove
        except Exception as exc:  # the fuser's own failure is the finding
            failures.append(f"{type(exc).__name__}: {exc}"[:300])
            continue
        if _acceptable(result, fused_module):
            return ""
        built.append(result)
    parts = ", ".join(_label(op) for op in ops)
    if built:
        what = _label(type(built[0])) if isinstance(built[0], nn.Module) else repr(built[0])[:80]
        want = (
            f"the declared fused_module {_label(fused_module)}"
            if fused_module is not None
            else "a module that keeps them (nn.Identity drops every matched layer)"
        )
        return f"this fuser builds {what} from float ({parts}), not {want}"
    return f"this fuser fails on float ({parts}): {failures[-1]}"


def _counterpart(op: Any) -> Any:
    """The ``torch.nn`` module class of a function op (``F.leaky_relu`` -> ``nn.LeakyReLU``,
    ``torch.tanh`` -> ``nn.Tanh``), else the op itself."""
    if isinstance(op, type) or not callable(op):
        return op
    wanted = getattr(op, "__name__", "").replace("_", "").lower()
    return _module_classes().get(wanted, op) if wanted else op


@functools.cache
def _module_classes() -> dict[str, type]:
    """``torch.nn``'s module classes by lower-case name."""
    found = (getattr(nn, name) for name in dir(nn))
    return {c.__name__.lower(): c for c in found if isinstance(c, type) and is_module_class(c)}


def _acceptable(result: Any, fused_module: Any) -> bool:
    if fused_module is not None:
        return type(result) is fused_module
    return isinstance(result, nn.Module) and type(result) is not nn.Identity


def _float_modules(ops: tuple[Any, ...], training: bool) -> list[Any]:
    """What ``prepare_fx`` hands a fuser for these ops: float modules (all sized for one
    sample, in the mode asked), ``nn.ReLU()`` for ``F.relu``, other functions and method
    names as is."""
    if not all(isinstance(op, (type, str)) or callable(op) for op in ops):
        raise SkipPattern("nested or wildcard pattern")
    classes = [op for op in ops if isinstance(op, type)]
    by_family = (module_layout(op) for op in classes)  # a Linear makes BatchNorm1d's input flat
    by_name = (name_layout(op.__name__) for op in classes)
    layout = next(filter(None, by_family), None) or next(filter(None, by_name), "2d")
    shape = LAYOUTS[layout]
    sample = torch.randint(0, VOCAB, shape) if layout == "tokens" else torch.zeros(shape)
    modules: list[Any] = []
    for op in ops:
        if isinstance(op, type) and issubclass(op, nn.Module):
            # keep_width: every module takes the same sample, so nothing is run forward (a
            # forward on the meta device would import torch's Python meta kernels: seconds)
            modules.append(float_module(op, sample, keep_width=True).train(training))
        elif isinstance(op, type):
            raise SkipPattern(f"{op.__name__} is not a module class")
        else:
            modules.append(nn.ReLU().train(training) if op is nn.functional.relu else op)
    return modules


def _label(obj: Any) -> str:
    return object_label(obj) if isinstance(obj, type) else getattr(obj, "__name__", str(obj))
