"""Export stage 1: give torch objects the names a spec file uses for them.

Every name produced here resolves back, through the loader's own resolver, to the very object
it names; :func:`object_name` checks that before it answers, so the exporter can never write a
name that loads as something else (or not at all). Objects that have no such name
(lambdas, closures, objects reachable only through local scopes) get ``None`` and the caller
reports them.
"""

from __future__ import annotations

import functools
import inspect
import sys
import types
from typing import Any

from backend_spec.names.resolver import NameProblem, Resolver
from backend_spec.names.vocabulary import (
    ALIASES,
    DEFAULT_ROOTS,
    METHOD_PREFIX,
    ROOT_MODULE_ALIASES,
    SPECIAL_NAMES,
)

__all__ = ["object_name", "observation_type_name", "op_name", "resolve_name", "same_object"]


@functools.cache
def _resolver(root: str) -> Resolver:
    """The loader's resolver, allowed to see ``root`` (torch and operator always)."""
    return Resolver(() if root in DEFAULT_ROOTS else (root,))


def resolve_name(name: str) -> Any:
    """What the loader makes of ``name`` (``None`` if it cannot resolve it).

    Objects outside torch and operator are resolved as if their top-level package were in
    ``allow_imports``, which is what a user loading the exported spec has to allow.
    """
    path = SPECIAL_NAMES.get(name, name)
    head, dot, _ = path.partition(".")
    root = ALIASES.get(head, head).split(".")[0] if dot else DEFAULT_ROOTS[0]
    if not root.isidentifier():
        return None
    try:
        return _resolver(root).lookup(name)
    except NameProblem:
        return None


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


def same_object(a: Any, b: Any) -> bool:
    """``a is b``, where a classmethod counts as the same whenever it is bound to the same
    class: ``Cls.fuse`` makes a new bound method object on every access."""
    if a is b:
        return True
    return (
        isinstance(a, types.MethodType)
        and isinstance(b, types.MethodType)
        and a.__func__ is b.__func__
        and a.__self__ is b.__self__
    )


def _alias_name(obj: Any) -> str | None:
    names = [n for n in _alias_index().get(id(obj), ()) if resolve_name(n) is obj]
    return min(names, key=_alias_rank) if names else None


def _aten_name(obj: Any) -> str | None:
    """An ATen overload (``torch.ops.aten.addmm.default``) is named as it prints."""
    if type(obj).__name__ != "OpOverload" or getattr(obj, "namespace", None) != "aten":
        return None
    return str(obj)


def _special_name(obj: Any) -> str | None:
    for name in SPECIAL_NAMES:
        if resolve_name(name) is obj:
            return name
    return None


def _bare_name(obj: Any) -> str | None:
    """``fuse_conv_bn`` style names, only when bare lookup finds this very function first."""
    if not inspect.isfunction(obj):
        return None
    return obj.__name__ if resolve_name(obj.__name__) is obj else None


def _qualified_name(obj: Any) -> str | None:
    """``module.qualname``, verified to resolve back to ``obj``; a classmethod bound to a
    subclass is named through that subclass (``Sub.fuse``, not ``Base.fuse``)."""
    owner = getattr(obj, "__self__", None)
    if isinstance(obj, types.MethodType) and isinstance(owner, type):
        module = owner.__module__
        qualname = f"{owner.__qualname__}.{obj.__func__.__name__}"
    else:
        module = getattr(obj, "__module__", None)
        qualname = getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return None
    if module == "__main__":  # a script's objects have no name another process can load
        return None
    root, dot, rest = module.partition(".")
    path = f"{ROOT_MODULE_ALIASES.get(root, root)}{dot}{rest}.{qualname}"
    return path if same_object(resolve_name(path), obj) else None


@functools.cache
def _attribute_index(module_count: int) -> dict[int, tuple[str, ...]]:
    """``id(obj)`` -> ``module.attr`` for every module-level object of every loaded module
    (rebuilt when more modules are loaded: ``module_count`` is ``len(sys.modules)``)."""
    index: dict[int, list[str]] = {}
    for module_name, module in list(sys.modules.items()):
        if not isinstance(module, types.ModuleType) or module_name == "__main__":
            continue
        try:
            namespace = dict(vars(module))
        except TypeError:
            continue
        for attr, value in namespace.items():
            if not attr.startswith("__") and not isinstance(value, types.ModuleType):
                index.setdefault(id(value), []).append(f"{module_name}.{attr}")
    return {key: tuple(names) for key, names in index.items()}


def _module_attribute_name(obj: Any) -> str | None:
    """Where no ``__qualname__`` leads back to ``obj`` (a ``functools.partial`` or another
    callable object bound at module level), the module attribute that holds it."""
    if isinstance(obj, (int, float, bool, str, bytes, tuple)):
        return None
    names = _attribute_index(len(sys.modules)).get(id(obj), ())
    found = [n for n in names if same_object(resolve_name(n), obj)]
    return min(found, key=lambda n: (n.count("._"), len(n), n)) if found else None


def object_name(obj: Any) -> str | None:
    """The spec name of a class or function, or ``None`` if it has no resolvable name.

    Preference: a special name (``MatchAllNode``), the shortest alias name (``nn.Conv2d``,
    ``F.relu``, ``operator.add``), a bare built-in fuser/getter name, a fully qualified name,
    then any module attribute holding the very object.
    """
    if isinstance(obj, str) or obj is None:
        return None
    for namer in (
        _aten_name,
        _special_name,
        _alias_name,
        _bare_name,
        _qualified_name,
        _module_attribute_name,
    ):
        name = namer(obj)
        if name is not None:
            return name
    return None


def op_name(op: Any) -> str | None:
    """Name of one op of a pattern: like :func:`object_name`, plus ``method:NAME`` strings."""
    if isinstance(op, str):
        return f"{METHOD_PREFIX}{op}"
    return object_name(op)


def observation_type_name(observation_type: Any) -> str:
    """An ``ObservationType`` as a spec writes it: ``output_share_observer_with_input``."""
    return observation_type.name.lower()
