"""Export stage 1: give torch objects the names a spec file uses for them.

Every name produced here resolves back, by attribute lookup from its root module, to the very
object it names; :func:`object_name` checks that before it answers, so the exporter can never
write a name that loads as something else (or not at all). Objects that have no such name
(lambdas, closures, objects reachable only through local scopes) get ``None`` and the caller
reports them.
"""

from __future__ import annotations

import functools
import inspect
import sys
import types
from collections.abc import Callable
from typing import Any

from backend_spec._torch import torch
from backend_spec.names import (
    ALIASES,
    BARE_FUNCTION_MODULES,
    METHOD_PREFIX,
    ROOT_MODULE_ALIASES,
    SPECIAL_NAMES,
)

#: The one dtype whose preferred spelling is not ``str(dtype)``: torch's own sources write
#: ``torch.float`` for float32 (``bias_dtype=torch.float``), and so do spec files.
_PREFERRED_DTYPE_NAMES: dict[Any, str] = {torch.float32: "float"}

_MISSING = object()


def resolve_dotted(path: str) -> Any:
    """The object a fully qualified dotted name denotes, or a sentinel if it denotes none.

    Walks attributes from the root module and falls back to ``sys.modules`` for submodules
    that are loaded but not bound as attributes. Nothing is imported: an object that exists
    has its module loaded already, so an unloaded module means the name is not the object's.
    """
    parts = path.split(".")
    obj = sys.modules.get(parts[0], _MISSING)
    for i, part in enumerate(parts[1:], start=2):
        if obj is _MISSING:
            return _MISSING
        nxt = getattr(obj, part, _MISSING)
        if nxt is _MISSING and isinstance(obj, types.ModuleType):
            nxt = sys.modules.get(".".join(parts[:i]), _MISSING)
        obj = nxt
    return obj


def resolve_name(name: str) -> Any:
    """The object a spec name denotes (aliases, special and bare names included).

    This is the exporter's own check of what it writes; the loader has its own resolver with
    the allow-list rules of the contract. Returns a sentinel (``is_missing``) if unresolved.
    """
    if name.startswith(METHOD_PREFIX):
        return name[len(METHOD_PREFIX) :]
    if name in SPECIAL_NAMES:
        return resolve_dotted(SPECIAL_NAMES[name])
    head, dot, rest = name.partition(".")
    if not dot:
        return _resolve_bare(name)
    return resolve_dotted(f"{ALIASES.get(head, head)}.{rest}")


def is_missing(obj: Any) -> bool:
    """Whether a ``resolve_*`` result means "no such object"."""
    return obj is _MISSING


def _resolve_bare(name: str) -> Any:
    """A bare function name: the first of :data:`BARE_FUNCTION_MODULES` that defines it wins."""
    for module_name in BARE_FUNCTION_MODULES:
        module = sys.modules.get(module_name)
        if module is not None and name in vars(module):
            return vars(module)[name]
    return _MISSING


@functools.cache
def _alias_index() -> dict[int, tuple[str, ...]]:
    """``id(obj)`` -> every ``alias.attr`` name under which an alias module exposes ``obj``.

    Looking objects up by identity (not by ``__name__``) is what names boolean-dispatch
    functions such as ``F.max_pool2d`` correctly: their ``__name__`` is ``fn``.
    """
    index: dict[int, list[str]] = {}
    for alias, target in ALIASES.items():
        module = sys.modules.get(target)
        if module is None:
            continue
        for attr, value in vars(module).items():
            if isinstance(value, types.ModuleType):
                continue
            index.setdefault(id(value), []).append(f"{alias}.{attr}")
    return {key: tuple(names) for key, names in index.items()}


def _alias_rank(name: str) -> tuple[bool, int, int, str]:
    """Sort key of alias names: public first, then shortest, then the most specific alias."""
    alias, _, attr = name.partition(".")
    position = list(ALIASES).index(alias)
    return (attr.startswith("_"), len(name), -position, name)


def _alias_name(obj: Any) -> str | None:
    names = [n for n in _alias_index().get(id(obj), ()) if resolve_name(n) is obj]
    return min(names, key=_alias_rank) if names else None


def _special_name(obj: Any) -> str | None:
    for name, path in SPECIAL_NAMES.items():
        if resolve_dotted(path) is obj:
            return name
    return None


def _bare_name(obj: Any) -> str | None:
    """``fuse_conv_bn`` style names, only when bare lookup finds this very function first."""
    if not inspect.isfunction(obj):
        return None
    name = obj.__name__
    return name if _resolve_bare(name) is obj else None


def _qualified_name(obj: Any) -> str | None:
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return None
    root, dot, rest = module.partition(".")
    path = f"{ROOT_MODULE_ALIASES.get(root, root)}{dot}{rest}.{qualname}"
    return path if resolve_dotted(path) is obj else None


def object_name(obj: Any) -> str | None:
    """The spec name of a class or function, or ``None`` if it has no resolvable name.

    Preference: a special name (``MatchAllNode``), the shortest alias name (``nn.Conv2d``,
    ``F.relu``, ``operator.add``), a bare built-in fuser/getter name, a fully qualified name.
    """
    if isinstance(obj, str) or obj is None:
        return None
    for namer in (_special_name, _alias_name, _bare_name, _qualified_name):
        name = namer(obj)
        if name is not None:
            return name
    return None


def op_name(op: Any) -> str | None:
    """Name of one op of a pattern: like :func:`object_name`, plus ``method:NAME`` strings."""
    if isinstance(op, str):
        return f"{METHOD_PREFIX}{op}"
    return object_name(op)


def dtype_name(dtype: torch.dtype) -> str:
    """``quint8``, ``qint8``, ``float16``, ... and ``float`` for float32."""
    name = _PREFERRED_DTYPE_NAMES.get(dtype, str(dtype).removeprefix("torch."))
    if getattr(torch, name, None) is not dtype:
        raise ValueError(f"{dtype!r} has no torch attribute name")
    return name


@functools.cache
def _sequential_code() -> types.CodeType:
    from torch.ao.quantization.fuser_method_mappings import _sequential_wrapper2

    return _sequential_wrapper2(torch.nn.Sequential).__code__


def sequential_class(fuser: Callable[..., Any]) -> Any:
    """The class a torch ``_sequential_wrapper2`` fuser closes over, else ``None``.

    Such fusers are closures (``fuser_method(is_qat, m1, m2) -> sequential(m1, m2)``) and
    have no importable name; their whole behaviour is the class they build, which the
    contract spells ``{sequential: FusedModuleClass}``.
    """
    code = getattr(fuser, "__code__", None)
    if code is None or code is not _sequential_code():
        return None
    cell = fuser.__closure__[code.co_freevars.index("sequential")]
    return cell.cell_contents
