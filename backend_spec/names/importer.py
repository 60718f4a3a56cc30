"""The one importer of references a user typed: ``module:attr`` and ``file.py:attr``.

A reference typed on the command line or passed to the API (``bespec export mymod:get_config``,
``--model``, ``--qconfig-mapping``) is trusted like a script the user runs, unlike a spec file,
whose names go through the safe :mod:`backend_spec.names.resolver`. As with ``python -m``, the
current directory is importable, so ``bespec export mymod:get_config`` works in ``mymod``'s
folder. Every failure (no module, no attribute, an import that raises, a factory that needs
arguments or exits) is a ``ValueError`` with a one-line message, never a traceback.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from pathlib import Path
from typing import Any

from backend_spec.quiet import quiet


def split_ref(ref: str) -> tuple[str, str] | None:
    """``("pkg.mod", "attr")`` for ``pkg.mod:attr`` or ``path/f.py:attr``; None otherwise."""
    target, colon, attr = ref.rpartition(":")
    if not colon or not target or not attr or not all(p.isidentifier() for p in attr.split(".")):
        return None
    return target, attr


def import_ref(ref: str) -> Any:
    """The object ``module:attr`` (or ``file.py:attr``) names. ValueError when it cannot be
    found; the message says what was looked for."""
    parts = split_ref(ref)
    if parts is None:
        raise ValueError(f"{ref!r} is not module:attr or file.py:attr")
    target, attr = parts
    obj = _import_target(target)
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{target!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def call_ref(factory: Any, ref: str) -> Any:
    """``factory()``, for a reference to a function that builds the object wanted.

    A callable that needs arguments (``json:loads``) or ends the process (``sys:exit``) is a
    ValueError, not a traceback or a silent exit.
    """
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # some builtins have none; calling them is the test
        signature = None
    if signature is not None:
        try:
            signature.bind()
        except TypeError:
            msg = f"{ref} needs arguments; name an object or a function of none"
            raise ValueError(msg) from None
    try:
        with quiet():
            return factory()
    except (Exception, SystemExit) as exc:
        raise ValueError(f"calling {ref} failed: {type(exc).__name__}: {exc}") from None


def object_of(ref: str, expected: type, what: str) -> Any:
    """The ``expected`` instance ``ref`` names, or builds when it names a function of no
    arguments. ValueError otherwise (``what`` names the expected thing in the message)."""
    obj = import_ref(ref)
    if not isinstance(obj, expected) and callable(obj):
        obj = call_ref(obj, ref)
    if not isinstance(obj, expected):
        raise ValueError(f"{ref} is a {type(obj).__name__}, not a {what}")
    return obj


def _import_target(target: str) -> Any:
    if target.endswith(".py"):
        return _import_file(Path(target))
    if not all(p.isidentifier() for p in target.split(".")):
        raise ValueError(f"{target!r} is not a module name or a .py file")
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        with quiet():
            return importlib.import_module(target)
    except ImportError as exc:
        raise ValueError(f"cannot import {target!r}: {exc}") from exc
    except (Exception, SystemExit) as exc:
        raise ValueError(f"importing {target!r} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        if added:
            sys.path.remove(cwd)


def _import_file(path: Path) -> Any:
    if not path.is_file():
        raise ValueError(f"no such file: {str(path)!r}")
    name = f"_bespec_ref_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:  # pragma: no cover - .py files always have one
        raise ValueError(f"cannot import {str(path)!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)
    try:
        with quiet():
            spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        sys.modules.pop(name, None)
        raise ValueError(f"importing {str(path)!r} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.path.remove(folder)
    return module
