"""Stage 3: names in a spec -> torch objects, safely (the trust model is docs/security.md).

A spec is untrusted input. Resolution walks module dictionaries only (never a module's lazy
``__getattr__``, which could import arbitrary code), imports nothing outside torch's walkable
trees and the caller's allow-list, and refuses any path that passes through another module
(``torch.os.system``, ``torch.serialization``) or ends at an object defined outside the roots
(for C methods, which have no ``__module__``, the owner class ``__objclass__`` decides). What a
name means never depends on what the process imported before. Each field then checks the kind
of object it received, and callable and module fields where it is defined.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import keyword
import sys
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from types import ModuleType
from typing import Any

from backend_spec import codes
from backend_spec.diagnostics import MAX_SUGGESTIONS, close_matches
from backend_spec.names.vocabulary import (
    ALIASES,
    BARE_FUNCTION_MODULES,
    CALLABLE_MODULES,
    DEFAULT_ROOTS,
    METHOD_PREFIX,
    MODULE_CLASS_MODULES,
    ROOT_MODULE_ALIASES,
    SEQUENTIAL_MODULES,
    SPECIAL_NAMES,
    WALKABLE_MODULES,
    WALKABLE_PACKAGES,
)


class Kind(str, Enum):
    """What a field needs its name to resolve to."""

    MODULE = "module"  # an nn.Module subclass
    FUNCTION = "function"  # a plain callable (fuser, getter)
    OP = "op"  # a pattern op: module class, function, or method:NAME
    COMPLEX_OP = "complex_op"  # as OP, plus MatchAllNode
    FUSED_MODULE = "fused_module"  # the class of {sequential: X}: a torch fused module


@dataclass
class NameProblem(Exception):
    """Why a name could not be used; the caller attaches the position."""

    code: str
    message: str
    hint: str | None = None  # None: the code's hint


def _is_identifier(part: str) -> bool:
    return part.isidentifier() and not keyword.iskeyword(part)


def _module_root(name: str | None) -> str:
    if not name:
        return ""
    return ROOT_MODULE_ALIASES.get(name.split(".")[0], name.split(".")[0])


def _under(module_name: str | None, trees: tuple[str, ...] | list[str]) -> bool:
    """``module_name`` is one of ``trees`` or a submodule of one."""
    if not module_name:
        return False
    module_name = ROOT_MODULE_ALIASES.get(module_name, module_name)
    return any(module_name == t or module_name.startswith(t + ".") for t in trees)


def defining_module(obj: Any) -> str | None:
    """The module an object was defined in, or None when it cannot be told.

    C methods and slot wrappers have no ``__module__``: their owner class (``__objclass__``)
    decides, so ``_TensorExtractor.dump`` counts as ``_pickle``'s, not torch's. A builtin bound
    to an object counts as its object's class.
    """
    if isinstance(obj, ModuleType):
        return obj.__name__
    try:
        owner = getattr(obj, "__objclass__", None)
        if isinstance(owner, type):
            return owner.__module__
        module = getattr(obj, "__module__", None)
        if isinstance(module, str):
            return module
        bound = getattr(obj, "__self__", None)
        if isinstance(bound, ModuleType):
            return bound.__name__
        if bound is not None:
            return (bound if isinstance(bound, type) else type(bound)).__module__
    except Exception:  # an object whose attribute access fails: unknown, hence refused
        return None
    return None


def check_module_names(names: Any) -> None:
    """ValueError unless every entry of an allow-list is a dotted module name."""
    for module in names:
        if not isinstance(module, str) or not all(_is_identifier(p) for p in module.split(".")):
            raise ValueError(f"allow_imports: {module!r} is not a module name")


def _suggest(word: str, candidates: Any, prefix: str = "") -> str:
    public = [c for c in candidates if isinstance(c, str) and not c.startswith("__")]
    matches = close_matches(word, public)
    if not matches:
        lowered = {c.lower(): c for c in public}
        if word.lower() in lowered:
            matches = [lowered[word.lower()]]
    if not matches:
        return ""
    return "did you mean " + " or ".join(f"'{prefix}{m}'" for m in matches) + "?"


_ABSENT = object()


def _is_submodule(module_name: str) -> bool:
    """Whether a module of that name exists (found on disk, not imported: same answer always)."""
    try:
        return importlib.util.find_spec(module_name) is not None
    except (ImportError, ValueError):
        return False


class Resolver:
    """Resolves spec names for one load; results are cached per name."""

    def __init__(self, allow_imports: tuple[str, ...] | list[str] = ()):
        check_module_names(allow_imports)
        self.allowed = tuple(allow_imports)
        self._cache: dict[str, Any] = {}
        self._suggestions_left = MAX_SUGGESTIONS

    def suggest(self, word: str, candidates: Any, prefix: str = "") -> str:
        """A "did you mean" hint, while this load's suggestion budget lasts ("" after)."""
        if self._suggestions_left <= 0:
            return ""
        self._suggestions_left -= 1
        return _suggest(word, candidates, prefix)

    def suggest_names(self, word: str, candidates: Any, n: int = 1) -> list[str]:
        """Close matches of ``word`` (user-defined names), under the same budget."""
        if self._suggestions_left <= 0:
            return []
        self._suggestions_left -= 1
        return close_matches(word, candidates, n)

    # -- roots ------------------------------------------------------------------------------

    def _inside_roots(self, module_name: str) -> bool:
        if _module_root(module_name) in DEFAULT_ROOTS:
            return True
        return _under(module_name, self.allowed)

    def _walkable(self, module_name: str) -> bool:
        """A module a name may pass through (and that may be imported to do so)."""
        return (
            module_name in WALKABLE_PACKAGES
            or _under(module_name, WALKABLE_MODULES)
            or _under(module_name, self.allowed)
        )

    def trusted_callable(self, obj: Any) -> str:
        """Why ``obj`` may not be called from a callable field, or "" when it may.

        The one predicate of the trust model for callables (fusers, getters, and factories):
        a plain function of torch's fuser / backend-config modules, or any callable (not a
        class) defined in an allow-listed module.
        """
        module = defining_module(obj)
        if _under(module, self.allowed):
            if callable(obj) and not isinstance(obj, (type, ModuleType)):
                return ""
            return "this field needs a function"
        if inspect.isfunction(obj) and _under(module, CALLABLE_MODULES):
            return ""
        return (
            f"a callable field accepts only torch's fusers and getters "
            f"({', '.join(CALLABLE_MODULES)}), {{sequential: X}}, or functions of allowed "
            f"modules; this one is defined in '{module}'"
        )

    def factory_argument(self, name: str, lookup_key: bool = False) -> Any:
        """The object a name argument of ``{call: f, args: [...]}`` denotes, or NameProblem.

        The same predicate as the other callable forms: a function argument is a callable
        field's value (torch's fusers and getters, or allowed), and a class argument ends up
        as the fused module a fuser builds, so it is checked like ``{sequential: X}``'s class
        (a torch fused module class; any nn.Module subclass of an allowed module). Modules
        are refused: a factory never needs one. A class inside a list (``lookup_key``: the
        op list ``get_fuser_method`` looks a fuser up by) is only a key: any module class of
        torch.nn, torch.ao.nn or an allowed module; what the fuser then builds is proved.
        """
        obj = self.lookup(name)
        if lookup_key and isinstance(obj, type):
            code, problem = self._key_class_problem(obj)
            if problem:
                raise NameProblem(
                    code,
                    f"'{name}' is {describe(obj)}; in a lookup key, {problem}",
                    "name the module classes of the pattern, e.g. [nn.Conv2d, nn.ReLU]",
                )
            return obj
        if isinstance(obj, ModuleType):
            raise NameProblem(
                codes.WRONG_KIND,
                f"'{name}' is {describe(obj)}; a factory argument cannot be a module",
                "pass a fused module class, a fuser function, a number or {literal: text}",
            )
        if isinstance(obj, type):
            code, problem = self._class_argument_problem(obj)
            if problem:
                raise NameProblem(
                    code,
                    f"'{name}' is {describe(obj)}; a class argument of {{call: ...}} becomes "
                    f"the fused module, so {problem}",
                    "name a torch fused module class such as nni.ConvReLU2d (nn.Identity, "
                    "nn.Sequential or nn.Module would drop or hide the matched layers)",
                )
            return obj
        if callable(obj) and not isinstance(obj, MethodName):
            problem = self.trusted_callable(obj)
            if problem:
                raise NameProblem(codes.UNTRUSTED, f"'{name}': {problem}", _TRUST_HINT)
        return obj

    def _key_class_problem(self, cls: type) -> tuple[str, str]:
        """``(code, why)`` a class may not be a lookup key of a factory call, or ``("", "")``."""
        if not is_module_class(cls):
            return codes.WRONG_KIND, "a class needs to be an nn.Module subclass"
        trusted = self._trusted_class(cls, MODULE_CLASS_MODULES, "a module class")
        return (codes.UNTRUSTED, trusted) if trusted else ("", "")

    def _class_argument_problem(self, cls: type) -> tuple[str, str]:
        """``(code, why)`` a class may not be a factory argument, or ``("", "")``."""
        if _under(defining_module(cls), self.allowed):
            if is_module_class(cls):
                return "", ""
            return codes.WRONG_KIND, "it needs to be an nn.Module subclass"
        if not is_fused_module_class(cls):
            return codes.WRONG_KIND, "it needs to be a fused module class (a _FusedModule)"
        trusted = self._trusted_class(cls, SEQUENTIAL_MODULES, "a fused module class")
        return (codes.UNTRUSTED, trusted) if trusted else ("", "")

    def _trusted_class(self, obj: Any, trees: tuple[str, ...], what: str) -> str:
        module = defining_module(obj)
        if _under(module, self.allowed) or _under(module, trees):
            return ""
        return f"{what} must come from {' or '.join(trees)} or an allowed module, not '{module}'"

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
        if len(parts) == 3 and parts[0] == ATEN_PREFIX and all(map(_is_identifier, parts)):
            return aten_overload(name, self.suggest)
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
            if not self._walkable(dotted):  # the same answer whatever was imported before
                continue
            try:
                found = importlib.import_module(dotted)
            except ImportError:
                continue
            return found, rest[end:], ".".join([shown, *rest[:end]])
        return module, rest, shown

    def _bare(self, name: str) -> Any:
        namespace: dict[str, Any] = {}
        for module_name in BARE_FUNCTION_MODULES:
            module = importlib.import_module(module_name)  # torch's own; loaded either way
            value = vars(module).get(name)
            if value is not None and inspect.isfunction(value):
                return value
            namespace.update({k: v for k, v in vars(module).items() if inspect.isfunction(v)})
        hint = self.suggest(name, [*namespace, *SPECIAL_NAMES]) or (
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
                except Exception as exc:  # the user's module failed to import: say why
                    raise NameProblem(
                        codes.IMPORT_FAILED, f"allowed module '{allowed}' cannot be imported: {exc}"
                    ) from None
                return module, parts[len(allowed_parts) :], allowed
        roots = ", ".join([*DEFAULT_ROOTS, *self.allowed])
        raise NameProblem(
            codes.OUTSIDE_ROOTS,
            f"'{'.'.join(parts)}' is outside the allowed roots ({roots})",
            self.suggest(head, [*ALIASES, *self.allowed]) or None,
        )

    def _walk(self, obj: Any, parts: list[str], shown: str) -> Any:
        for part in parts:
            obj = self._attribute(obj, part, shown)
            shown = f"{shown}.{part}"
            if isinstance(obj, ModuleType):
                self._check_walkable(obj.__name__, shown)
        self._check_defined_inside(obj, shown)
        return obj

    def _check_walkable(self, module_name: str, shown: str) -> None:
        if self._walkable(module_name):
            return
        if not self._inside_roots(module_name):
            raise NameProblem(
                codes.OUTSIDE_ROOTS,
                f"'{shown}' reaches module '{module_name}', outside the allowed roots",
                "only names inside torch, operator and allowed modules can be used",
            )
        raise NameProblem(
            codes.OUTSIDE_ROOTS,
            f"'{shown}' walks through module '{module_name}', outside the modules names may use",
            "name torch functions as torch.NAME, modules through nn, F, nni, ... "
            "(see docs/security.md)",
        )

    def _attribute(self, obj: Any, part: str, shown: str) -> Any:
        if isinstance(obj, ModuleType):
            namespace = vars(obj)
            value = namespace.get(part, _ABSENT)
            if isinstance(value, ModuleType) and not self._walkable(value.__name__):
                return value  # the caller refuses it, naming the module
            if value is _ABSENT or isinstance(value, ModuleType):
                # A submodule gets the same answer whether or not it was imported already.
                module_name = f"{obj.__name__}.{part}" if value is _ABSENT else value.__name__
                if self._walkable(module_name):
                    try:
                        return importlib.import_module(module_name)
                    except ImportError:
                        pass
                elif _is_submodule(module_name):
                    self._check_walkable(module_name, f"{shown}.{part}")
            else:
                return value
            raise NameProblem(
                codes.UNKNOWN_NAME,
                f"unknown name '{shown}.{part}'",
                self.suggest(part, namespace, f"{shown}."),
            )
        if isinstance(obj, type):
            try:
                return _unwrap_descriptor(inspect.getattr_static(obj, part), obj)
            except AttributeError:
                raise NameProblem(
                    codes.UNKNOWN_NAME,
                    f"unknown name '{shown}.{part}'",
                    self.suggest(part, dir(obj), f"{shown}."),
                ) from None
        raise NameProblem(
            codes.INVALID_NAME, f"'{shown}' is not a module or class; cannot look up '{part}'"
        )

    def _check_defined_inside(self, obj: Any, shown: str) -> None:
        if isinstance(obj, ModuleType):
            return
        module_name = defining_module(obj)
        if module_name is None:
            if isinstance(obj, MethodName) or not callable(obj):
                return  # data (a constant): the kind check refuses it
            raise NameProblem(
                codes.OUTSIDE_ROOTS,
                f"'{shown}' has no known defining module; it cannot be trusted",
                "only objects of torch, operator and allowed modules can be used",
            )
        if not self._inside_roots(module_name):
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
        problem = self._trust_problem(obj, kind)
        if problem:
            raise NameProblem(codes.UNTRUSTED, f"'{name}': {problem}", _TRUST_HINT)
        return str(obj) if isinstance(obj, MethodName) else obj

    def _trust_problem(self, obj: Any, kind: Kind) -> str:
        """Where the object comes from, for fields whose objects torch instantiates or calls."""
        if kind is Kind.FUNCTION:
            return self.trusted_callable(obj)
        if kind is Kind.MODULE:
            return self._trusted_class(obj, MODULE_CLASS_MODULES, "a module class")
        if kind is Kind.FUSED_MODULE:
            return self._trusted_class(obj, SEQUENTIAL_MODULES, "a {sequential: X} class")
        return ""


_TRUST_HINT = "see docs/security.md; trust another module with --allow-import / allow_imports"


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


def is_fused_module_class(obj: Any) -> bool:
    """A torch fused module class (``nni.ConvReLU2d``...): what ``{sequential: X}`` builds.

    Any other class would silently drop layers (``nn.Identity(m1, m2)`` keeps none of them).
    """
    from backend_spec._torch import torch

    fused = torch.ao.nn.intrinsic.modules.fused._FusedModule
    return isinstance(obj, type) and issubclass(obj, fused) and obj is not fused


def _is_function(obj: Any) -> bool:
    return callable(obj) and not isinstance(obj, (type, ModuleType))


def _is_match_all(obj: Any) -> bool:
    from backend_spec._torch import torch

    return obj is torch.ao.quantization.utils.MatchAllNode


def _kind_problem(obj: Any, kind: Kind, field: str) -> str:
    if kind is Kind.MODULE:
        return "" if is_module_class(obj) else f"{field} needs an nn.Module subclass"
    if kind is Kind.FUSED_MODULE:
        if is_fused_module_class(obj):
            return ""
        return "{sequential: X} needs a fused module class such as nni.ConvReLU2d"
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


#: First part of an ATen overload name: ``aten.addmm.default`` (as ``str(overload)`` says).
ATEN_PREFIX = "aten"


def aten_overload(name: str, suggest: Callable[[str, Any, str], str] = _suggest) -> Any:
    """``aten.<op>.<overload>`` -> ``torch.ops.aten.<op>.<overload>``: torch's own operator
    registry, so nothing is imported. A pt2e pattern op (the ATen graph's own node target),
    or an op of an ``aten:`` chain. An unknown one is BS300 with the closest overloads of the
    op, or the closest ops, as the hint (``suggest``: the resolver's, under its budget)."""
    import torch

    _, op, overload = name.split(".")
    try:
        packet = None if op.startswith("__") else getattr(torch.ops.aten, op)
    except (AttributeError, RuntimeError):
        packet = None
    if not isinstance(packet, torch._ops.OpOverloadPacket):
        hint = suggest(op, _aten_op_names(), "aten.")
        raise NameProblem(
            codes.UNKNOWN_NAME,
            f"unknown ATen op '{name}': torch has no aten.{op}",
            hint or "write aten.<op>.<overload> as str(torch.ops.aten.<op>.<overload>) prints it",
        )
    if overload not in packet.overloads():
        hint = suggest(overload, packet.overloads(), f"aten.{op}.")
        raise NameProblem(
            codes.UNKNOWN_NAME,
            f"unknown ATen overload '{name}': aten.{op} has {_few(packet.overloads())}",
            hint or "write aten.<op>.<overload> as str(torch.ops.aten.<op>.<overload>) prints it",
        )
    return getattr(packet, overload)


def _few(names: Any, n: int = 8) -> str:
    """At most ``n`` names, sorted, and how many more."""
    shown = sorted(names)
    more = f" and {len(shown) - n} more" if len(shown) > n else ""
    return ", ".join(shown[:n]) + more


@functools.cache
def _aten_op_names() -> tuple[str, ...]:
    """The names of every ATen op torch registers (``linear``, ``conv2d``...), for hints."""
    import torch

    try:
        qualified = torch._C._dispatch_get_all_op_names()
    except AttributeError:  # pragma: no cover - a torch without the private listing
        return tuple(dir(torch.ops.aten))
    return tuple(sorted({n[6:].split(".")[0] for n in qualified if n.startswith("aten::")}))
