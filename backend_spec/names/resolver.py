"""Stage 3: names in a spec -> torch objects, safely.

A spec is untrusted input. Resolution walks module dictionaries only (never a module's lazy
``__getattr__``, which could import arbitrary code), imports nothing outside the caller's
allow-list, and refuses any path that passes through a module outside the allowed roots
(``torch.os.system``) or ends at an object defined outside them. Each field then checks the
kind of object it received.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import keyword
import sys
from dataclasses import dataclass
from enum import Enum
from types import ModuleType
from typing import Any

from backend_spec import codes
from backend_spec.names.vocabulary import (
    ALIASES,
    BARE_FUNCTION_MODULES,
    DEFAULT_ROOTS,
    METHOD_PREFIX,
    ROOT_MODULE_ALIASES,
    SPECIAL_NAMES,
)


class Kind(str, Enum):
    """What a field needs its name to resolve to."""

    MODULE = "module"  # an nn.Module subclass
    FUNCTION = "function"  # a plain callable (fuser, getter)
    OP = "op"  # a pattern op: module class, function, or method:NAME
    COMPLEX_OP = "complex_op"  # as OP, plus MatchAllNode


@dataclass
class NameProblem(Exception):
    """Why a name could not be used; the caller attaches the position."""

    code: str
    message: str
    hint: str = ""


def _is_identifier(part: str) -> bool:
    return part.isidentifier() and not keyword.iskeyword(part)


def _module_root(name: str | None) -> str:
    if not name:
        return ""
    return ROOT_MODULE_ALIASES.get(name.split(".")[0], name.split(".")[0])


def _suggest(word: str, candidates: Any, prefix: str = "") -> str:
    public = [c for c in candidates if isinstance(c, str) and not c.startswith("__")]
    matches = difflib.get_close_matches(word, public, n=3, cutoff=0.6)
    if not matches:
        lowered = {c.lower(): c for c in public}
        if word.lower() in lowered:
            matches = [lowered[word.lower()]]
    if not matches:
        return ""
    return "did you mean " + " or ".join(f"'{prefix}{m}'" for m in matches) + "?"


class Resolver:
    """Resolves spec names for one load; results are cached per name."""

    def __init__(self, allow_imports: tuple[str, ...] | list[str] = ()):
        for module in allow_imports:
            if not all(_is_identifier(part) for part in module.split(".")):
                raise ValueError(f"allow_imports: {module!r} is not a module name")
        self.allowed = tuple(allow_imports)
        self._cache: dict[str, Any] = {}

    # -- roots ------------------------------------------------------------------------------

    def _inside_roots(self, module_name: str) -> bool:
        if _module_root(module_name) in DEFAULT_ROOTS:
            return True
        return any(module_name == a or module_name.startswith(a + ".") for a in self.allowed)

    def _may_import(self, module_name: str) -> bool:
        return any(module_name == a or module_name.startswith(a + ".") for a in self.allowed)

    # -- lookup -----------------------------------------------------------------------------

    def lookup(self, name: str) -> Any:
        """The object a name denotes (a method name for ``method:NAME``), or NameProblem."""
        cached = self._cache.get(name)
        if cached is None:
            try:
                cached = (True, self._lookup(name))
            except NameProblem as problem:
                cached = (False, problem)
            self._cache[name] = cached
        ok, value = cached
        if not ok:
            raise value
        return value

    def _lookup(self, name: str) -> Any:
        if name.startswith(METHOD_PREFIX):
            method = name[len(METHOD_PREFIX) :]
            if not _is_identifier(method):
                raise NameProblem(codes.INVALID_NAME, f"'{name}' is not a valid method name")
            return MethodName(method)
        name = SPECIAL_NAMES.get(name, name)
        parts = name.split(".")
        if not all(_is_identifier(part) for part in parts):
            raise NameProblem(
                codes.INVALID_NAME,
                f"'{name}' is not a valid dotted name",
                "write a name such as nn.Conv2d, F.relu or torch.nn.modules.conv.Conv2d",
            )
        if any(part.startswith("__") for part in parts):
            raise NameProblem(
                codes.INVALID_NAME,
                f"'{name}' uses a dunder attribute",
                "name a module, class or function",
            )
        if len(parts) == 1:
            return self._bare(name)
        start, rest, shown = self._start(parts)
        start, rest, shown = self._deepest_module(start, rest, shown)
        return self._walk(start, rest, shown)

    def _deepest_module(
        self, module: Any, rest: list[str], shown: str
    ) -> tuple[Any, list[str], str]:
        """Start from the longest prefix of the name that is itself a module.

        ``pkg.qat.conv.ConvReLU`` means the class of module ``pkg.qat.conv``, even when
        ``pkg.qat`` rebinds the attribute ``conv`` (a star-import of another ``conv``):
        walking attributes would silently reach a different class.
        """
        if not isinstance(module, ModuleType):
            return module, rest, shown
        for end in range(len(rest) - 1, 0, -1):
            dotted = ".".join([module.__name__, *rest[:end]])
            found = sys.modules.get(dotted)
            if found is None and self._may_import(dotted):
                try:
                    found = importlib.import_module(dotted)
                except ImportError:
                    found = None
            if isinstance(found, ModuleType) and self._inside_roots(found.__name__):
                return found, rest[end:], ".".join([shown, *rest[:end]])
        return module, rest, shown

    def _bare(self, name: str) -> Any:
        namespace: dict[str, Any] = {}
        for module_name in BARE_FUNCTION_MODULES:
            module = sys.modules.get(module_name)
            if module is None:
                continue
            value = vars(module).get(name)
            if value is not None and inspect.isfunction(value):
                return value
            namespace.update({k: v for k, v in vars(module).items() if inspect.isfunction(v)})
        hint = _suggest(name, [*namespace, *SPECIAL_NAMES]) or (
            "qualify the name with a module alias (nn., F., nni., torch., operator.)"
        )
        raise NameProblem(codes.UNKNOWN_NAME, f"unknown name '{name}'", hint)

    def _start(self, parts: list[str]) -> tuple[Any, list[str], str]:
        """The module a dotted name starts from, the parts left to walk, and its shown prefix."""
        head = parts[0]
        if head in ALIASES:
            module_name = ALIASES[head]
            module = sys.modules.get(module_name) or importlib.import_module(module_name)
            return module, parts[1:], head
        for allowed in sorted(self.allowed, key=len, reverse=True):
            allowed_parts = allowed.split(".")
            if parts[: len(allowed_parts)] == allowed_parts and len(parts) > len(allowed_parts):
                try:
                    module = importlib.import_module(allowed)
                except ImportError as exc:
                    raise NameProblem(
                        codes.IMPORT_FAILED, f"allowed module '{allowed}' cannot be imported: {exc}"
                    ) from None
                return module, parts[len(allowed_parts) :], allowed
        roots = ", ".join([*DEFAULT_ROOTS, *self.allowed])
        raise NameProblem(
            codes.OUTSIDE_ROOTS,
            f"'{'.'.join(parts)}' is outside the allowed roots ({roots})",
            _suggest(head, [*ALIASES, *self.allowed])
            or "add its module with --allow-import / allow_imports if you trust it",
        )

    def _walk(self, obj: Any, parts: list[str], shown: str) -> Any:
        for part in parts:
            obj = self._attribute(obj, part, shown)
            shown = f"{shown}.{part}"
            if isinstance(obj, ModuleType) and not self._inside_roots(obj.__name__):
                raise NameProblem(
                    codes.OUTSIDE_ROOTS,
                    f"'{shown}' reaches module '{obj.__name__}', outside the allowed roots",
                    "only names inside torch, operator and allowed modules can be used",
                )
        self._check_defined_inside(obj, shown)
        return obj

    def _attribute(self, obj: Any, part: str, shown: str) -> Any:
        if isinstance(obj, ModuleType):
            namespace = vars(obj)
            if part in namespace:
                return namespace[part]
            submodule = f"{obj.__name__}.{part}"
            if submodule in sys.modules:
                return sys.modules[submodule]
            if self._may_import(submodule):
                try:
                    return importlib.import_module(submodule)
                except ModuleNotFoundError:
                    pass
            raise NameProblem(
                codes.UNKNOWN_NAME,
                f"unknown name '{shown}.{part}'",
                _suggest(part, namespace, f"{shown}."),
            )
        if isinstance(obj, type):
            try:
                return _unwrap_descriptor(inspect.getattr_static(obj, part), obj)
            except AttributeError:
                raise NameProblem(
                    codes.UNKNOWN_NAME,
                    f"unknown name '{shown}.{part}'",
                    _suggest(part, dir(obj), f"{shown}."),
                ) from None
        raise NameProblem(
            codes.INVALID_NAME, f"'{shown}' is not a module or class; cannot look up '{part}'"
        )

    def _check_defined_inside(self, obj: Any, shown: str) -> None:
        module_name = getattr(obj, "__module__", None) if not isinstance(obj, ModuleType) else None
        if isinstance(module_name, str) and not self._inside_roots(module_name):
            raise NameProblem(
                codes.OUTSIDE_ROOTS,
                f"'{shown}' is defined in module '{module_name}', outside the allowed roots",
                "only objects of torch, operator and allowed modules can be used",
            )

    # -- kinds ------------------------------------------------------------------------------

    def resolve(self, name: str, kind: Kind, field: str = "this field") -> Any:
        """Look a name up and check it is the kind of object ``field`` needs."""
        obj = self.lookup(name)
        problem = _kind_problem(obj, kind, field)
        if problem:
            raise NameProblem(codes.WRONG_KIND, f"'{name}' is {describe(obj)}; {problem}")
        return str(obj) if isinstance(obj, MethodName) else obj


def _unwrap_descriptor(value: Any, owner: type) -> Any:
    """What ``owner.attr`` evaluates to for the two descriptors fusers use: a staticmethod's
    function, a classmethod bound to ``owner`` (others are returned as found)."""
    if isinstance(value, staticmethod):
        return value.__func__
    if isinstance(value, classmethod):
        return value.__get__(None, owner)
    return value


class MethodName(str):
    """A ``call_method`` op name, kept apart from plain strings until the kind check."""


def is_module_class(obj: Any) -> bool:
    """An ``nn.Module`` subclass (what module fields and module ops need)."""
    from backend_spec._torch import torch

    return isinstance(obj, type) and issubclass(obj, torch.nn.Module)


def _is_function(obj: Any) -> bool:
    return callable(obj) and not isinstance(obj, (type, ModuleType))


def _is_match_all(obj: Any) -> bool:
    from backend_spec._torch import torch

    return obj is torch.ao.quantization.utils.MatchAllNode


def _kind_problem(obj: Any, kind: Kind, field: str) -> str:
    if kind is Kind.MODULE:
        return "" if is_module_class(obj) else f"{field} needs an nn.Module subclass"
    if kind is Kind.FUNCTION:
        if isinstance(obj, MethodName) or not _is_function(obj):
            return f"{field} needs a function"
        return ""
    if isinstance(obj, MethodName) or is_module_class(obj) or _is_function(obj):
        return ""
    if kind is Kind.COMPLEX_OP and _is_match_all(obj):
        return ""
    return "a pattern needs an op: a module class, a function, or method:NAME"


def describe(obj: Any) -> str:
    """A few words on what an object is, for error messages."""
    if isinstance(obj, MethodName):
        return f"the method name '{obj}'"
    if isinstance(obj, ModuleType):
        return "a module"
    if isinstance(obj, type):
        return f"the class {obj.__module__}.{obj.__qualname__}"
    if callable(obj):
        return "a function"
    return f"a {type(obj).__name__} value"
